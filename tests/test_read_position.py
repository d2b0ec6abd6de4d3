"""The read position as a value: a source's ``read_position()`` is what its checkpoint saves, and
``restore_position`` gives the same value back from the checkpoint."""
import warnings

from helpers import write_valued_cbf
from recordkit.engine.checkpoint import ReadPosition, restore_position, save_position
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader


def test_a_sources_read_position_round_trips_through_its_checkpoint(tmp_path):
    path = write_valued_cbf(tmp_path / "v.cbf", 200, longest=3, chunk_size=256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        src = MinibatchSource(CBFReader(path), randomize=True, window=4, seed=2, max_sweeps=3, epoch_size=150)
    assert src.read_position() == ReadPosition(0, 0, None, False, 0, 0, 0)
    for _ in range(9):
        src.next_minibatch(50)
    pos = src.read_position()
    assert pos.partition == (1, 0) and pos.minibatches_delivered == 9 and pos.samples_delivered > 0
    state = src.get_checkpoint_state()
    assert restore_position(state, src._facts()) == pos
    assert {k: state[k] for k in save_position(pos)} == save_position(pos)
    again = MinibatchSource(CBFReader(path), randomize=True, window=4, seed=2, max_sweeps=3, epoch_size=150)
    again.restore_from_checkpoint(state)
    assert again.read_position() == pos
    a, b = src.next_minibatch(50), again.next_minibatch(50)
    assert a.keys.tolist() == b.keys.tolist()
    src.close()
    again.close()
