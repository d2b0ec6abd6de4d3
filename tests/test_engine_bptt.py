"""Truncated BPTT (engine/bptt.py): the compiled refill and assembly give exactly the minibatches
of the per-sequence Python path it replaced, kept in tests/bptt_reference.py.

Every minibatch is compared field by field (touched keys, lengths, each stream's values, mask,
lengths and dtype, the continuity flags, the per-step keys, end of sweep, sweep) together with
the checkpoint state after it, on corpora randomized or not, dense, sparse (with repeated
indices, which densifying sums) or both, with dropped sequences, worker partitions, epochs,
sample limits, double precision, CBF input, and restores from checkpoints taken mid-sequence.
"""
import json
import warnings

import numpy as np
import pytest

import bptt_reference
from helpers import dense, sparse, write
from recordkit.engine import _gather
from recordkit.engine.source import MinibatchSource
from recordkit.errors import UsageError
from recordkit.formats.cbf import CBFWriter
from recordkit.formats.ctf import CTFReader


def corpus(tmp_path, n, *, seed, max_len=20, streams=("x", "y"), bad_every=0, name="c.ctf"):
    """``n`` id-mode sequences of 1..max_len samples: ``x`` dense 3, ``y`` sparse 7 with 1-3
    entries per sample (indices may repeat within a sample). Every ``bad_every``-th sequence
    has a malformed value, so a reader with a budget drops it."""
    rng = np.random.default_rng(seed)
    lines = []
    for key in range(n):
        for t in range(int(rng.integers(1, max_len + 1))):
            parts = [f"{key * 3 + 1}"]
            if "x" in streams:
                parts.append("|x " + " ".join(f"{v:.4g}" for v in rng.normal(size=3)))
                if bad_every and key % bad_every == bad_every - 1 and t == 0:
                    parts[-1] += "q"
            if "y" in streams:
                k = int(rng.integers(1, 4))
                parts.append("|y " + " ".join(f"{int(i)}:{v:.3g}" for i, v in
                                              zip(rng.integers(0, 7, size=k), rng.normal(size=k))))
            lines.append(" ".join(parts))
    return write(tmp_path, "\n".join(lines) + "\n", name)


def specs(streams=("x", "y")):
    out = []
    if "x" in streams:
        out.append(dense("x", 3))
    if "y" in streams:
        out.append(sparse("y", 7))
    return out


def record(mb, state) -> dict:
    """Everything a minibatch carries, as plain comparable values, with the state after it."""
    out = {"keys": mb.keys.tolist(), "lengths": mb.lengths.tolist(), "end_of_sweep": mb.end_of_sweep,
           "sweep": mb.sweep, "state": json.loads(json.dumps(state))}
    for name, sb in sorted(mb.streams.items()):
        out[name] = (sb.is_sparse, str(sb.data.dtype), sb.data.shape, sb.data.tobytes(), sb.mask.tobytes(),
                     sb.lengths.tolist())
    for name, v in sorted(mb.extra.items()):
        out["extra." + name] = (str(v.dtype), v.shape, v.tobytes())
    return out


def run(make, size, *, restore_at=(), count=None):
    """The minibatches of ``make()`` at ``size`` samples, each with the state after it; at each
    index in ``restore_at`` the run continues in a fresh source restored from that state."""
    src = make()
    out = []
    while count is None or len(out) < count:
        if len(out) in restore_at:
            state = json.loads(json.dumps(src.get_checkpoint_state()))
            src.close()
            src = make()
            src.restore_from_checkpoint(state)
        mb = src.next_minibatch(size)
        if mb is None:
            break
        out.append(record(mb, src.get_checkpoint_state()))
    src.close()
    return out


def compare(monkeypatch, make, size, **kw):
    """The new path's minibatches equal the reference's; returns them."""
    new = run(make, size, **kw)
    with monkeypatch.context() as m:
        bptt_reference.use_reference(m)
        ref = run(make, size, **kw)
    assert len(new) == len(ref) > 0
    for i, (a, b) in enumerate(zip(new, ref)):
        assert a.keys() == b.keys()
        for field in a:
            assert a[field] == b[field], f"minibatch {i}: {field} differs"
    return new


def reader(path, streams=("x", "y"), **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return CTFReader(path, specs(streams), **kw)


CASES = {
    # name: (corpus kwargs, reader kwargs, source kwargs, minibatch size)
    "in order, dense and sparse": ({}, {"chunk_size": 512}, {"randomize": False, "max_sweeps": 2}, 24),
    "randomized, small window": ({}, {"chunk_size": 400}, {"window": 2, "seed": 3, "max_sweeps": 3}, 40),
    "randomized, sample window": ({}, {"chunk_size": 300}, {"window": 60, "sample_based_window": True,
                                                            "seed": 9, "max_sweeps": 2}, 33),
    "dense only": ({"streams": ("x",)}, {"chunk_size": 256}, {"seed": 1, "max_sweeps": 2}, 16),
    "sparse only": ({"streams": ("y",)}, {"chunk_size": 256}, {"seed": 2, "max_sweeps": 2}, 50),
    "one slot": ({}, {"chunk_size": 700}, {"seed": 4, "max_sweeps": 2}, 5),
    "long steps, short sequences": ({"max_len": 3}, {"chunk_size": 500}, {"seed": 5, "max_sweeps": 2}, 100),
    "dropped sequences": ({"bad_every": 4}, {"chunk_size": 400, "max_errors": 1000}, {"seed": 6, "max_sweeps": 2},
                          30),
    "max samples mid sweep": ({}, {"chunk_size": 600}, {"seed": 7, "max_samples": 700}, 24),
    "epochs": ({}, {"chunk_size": 600}, {"seed": 8, "max_sweeps": 2, "epoch_size": 97}, 24),
    "double precision": ({}, {"chunk_size": 500, "precision": "double"}, {"seed": 10, "max_sweeps": 1}, 24),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("length", [1, 4, 7])
def test_minibatches_equal_the_reference_path(tmp_path, monkeypatch, case, length):
    ckw, rkw, skw, size = CASES[case]
    path = corpus(tmp_path, 60, seed=len(case), **ckw)
    streams = ckw.get("streams", ("x", "y"))
    make = lambda: MinibatchSource(reader(path, streams, **rkw), truncation_length=length, **skw)
    mbs = compare(monkeypatch, make, size)
    if "y" in streams:
        assert all(not m["y"][0] for m in mbs), "BPTT delivers sparse streams dense"


@pytest.mark.parametrize("case", ["in order, dense and sparse", "randomized, small window", "dropped sequences",
                                  "epochs"])
def test_restoring_mid_sequence_continues_like_the_reference(tmp_path, monkeypatch, case):
    ckw, rkw, skw, size = CASES[case]
    path = corpus(tmp_path, 60, seed=11, **ckw)
    make = lambda: MinibatchSource(reader(path, **rkw), truncation_length=6, **skw)
    straight = run(make, size)
    mbs = compare(monkeypatch, make, size, restore_at=(1, 4, 5, 13))
    # restoring changes nothing: the same minibatches as without restores
    assert [{k: v for k, v in m.items() if k != "state"} for m in mbs] == \
           [{k: v for k, v in m.items() if k != "state"} for m in straight]
    assert any(m["state"]["bptt"] for m in mbs), "no checkpoint was taken mid-sequence"


def test_partitions_equal_the_reference(tmp_path, monkeypatch):
    path = corpus(tmp_path, 80, seed=12)
    for index in range(3):
        make = lambda: MinibatchSource(reader(path, chunk_size=400), seed=3, max_sweeps=2, truncation_length=5,
                                       num_data_partitions=3, partition_index=index)
        compare(monkeypatch, make, 20)


def test_cbf_input_equals_the_reference(tmp_path, monkeypatch):
    from recordkit.formats.cbf import CBFReader
    src = reader(corpus(tmp_path, 70, seed=13), chunk_size=300)
    out = tmp_path / "c.cbf"
    with CBFWriter(str(out), specs()) as w:
        for cid in range(len(src.chunks)):
            w.write_chunk(src.load_chunk(cid))
    make = lambda: MinibatchSource(CBFReader(str(out)), seed=2, max_sweeps=2, truncation_length=6)
    compare(monkeypatch, make, 30, restore_at=(3,))


def test_repeated_sparse_indices_are_summed_like_scipy(tmp_path):
    p = write(tmp_path, "0 |y 2:1.5 2:0.25 5:1\n0 |y 1:1 1:-1\n")
    src = MinibatchSource(CTFReader(p, [sparse("y", 7)]), randomize=False, max_sweeps=1, truncation_length=2)
    data = src.next_minibatch(2)["y"].data
    assert data[0, 0].tolist() == [0, 0, 1.75, 0, 0, 1, 0] and data[0, 1].tolist() == [0] * 7


def test_chunks_are_released_as_the_sweep_moves_on(tmp_path):
    path = corpus(tmp_path, 200, seed=14)
    src = MinibatchSource(reader(path, chunk_size=256), randomize=False, max_sweeps=1, truncation_length=4)
    n_chunks = len(src.deserializer.chunks)
    held = []
    for mb in src.minibatches(16):
        held.append(len(set(src.held_chunks()) | set(src._bptt._chunks)))
    # 4 slots hold at most a few chunks between them; before, every chunk read stayed loaded
    assert n_chunks > 100 and max(held) <= 12, (n_chunks, max(held))


def test_a_checkpoint_entry_on_a_dropped_sequence_is_refused(tmp_path):
    path = corpus(tmp_path, 20, seed=15, bad_every=2)
    make = lambda: MinibatchSource(reader(path, max_errors=100), randomize=False, truncation_length=50)
    src = make()
    src.next_minibatch(50)
    state = src.get_checkpoint_state()
    assert state["bptt"]["slots"][0]
    state["bptt"]["slots"][0][0][1] = 1  # position 1 holds sequence 1, which the reader dropped
    with pytest.raises(ValueError, match="bptt.*dropped"):
        make().restore_from_checkpoint(state)


def test_a_checkpoint_offset_past_its_sequence_is_refused(tmp_path):
    p = write(tmp_path, "".join(f"{k} |x 1 2 3\n" * (3 + k % 4) for k in range(6)))
    make = lambda: MinibatchSource(CTFReader(p, [dense("x", 3)]), randomize=False, truncation_length=2)
    src = make()
    src.next_minibatch(2)
    state = src.get_checkpoint_state()
    state["bptt"]["slots"][0][0][2] = 5  # sequence 0 has 3 samples; the index's longest has 6
    with pytest.raises(ValueError, match="bptt.*offset 5"):
        make().restore_from_checkpoint(state)


def bptt_state(tmp_path):
    """A state taken with truncation_length 2 while sequences are split across minibatches."""
    p = write(tmp_path, "".join(f"{k} |x {k} 0 0\n" * (3 + k % 4) for k in range(6)))
    make = lambda length=0: MinibatchSource(CTFReader(p, [dense("x", 3)]), randomize=False, max_sweeps=1,
                                            truncation_length=length)
    src = make(2)
    src.next_minibatch(4)
    state = json.loads(json.dumps(src.get_checkpoint_state()))
    assert any(o for q in state["bptt"]["slots"] for _, _, o in q)
    return make, state


def test_a_bptt_checkpoint_is_refused_by_a_source_without_truncation_length(tmp_path):
    """Restored without truncated BPTT, the sequences the slots had begun were silently dropped."""
    make, state = bptt_state(tmp_path)
    with pytest.raises(UsageError, match="checkpoint field 'truncation_length': the checkpoint was taken with "
                                         "truncation_length 2, this source has no truncated BPTT"):
        make().restore_from_checkpoint(state)
    old = {k: v for k, v in state.items() if k != "truncation_length"}  # a state from before the field
    with pytest.raises(UsageError, match="checkpoint field 'bptt': .* this source has no truncation_length"):
        make().restore_from_checkpoint(old)


@pytest.mark.parametrize("taken, restored", [(2, 4), (2, 0), (0, 2)])
def test_a_checkpoint_resumes_only_with_its_own_truncation_length(tmp_path, taken, restored):
    make, state = bptt_state(tmp_path)
    if not taken:
        src = make()
        src.next_minibatch(4)
        state = src.get_checkpoint_state()
    with pytest.raises(UsageError, match="'truncation_length'"):
        make(restored).restore_from_checkpoint(state)
    same = make(taken)
    same.restore_from_checkpoint(state)
    assert same.next_minibatch(4) is not None


def test_an_old_bptt_checkpoint_still_resumes_with_truncated_bptt(tmp_path):
    make, state = bptt_state(tmp_path)
    a, b = make(2), make(2)
    a.restore_from_checkpoint(state)
    b.restore_from_checkpoint({k: v for k, v in state.items() if k != "truncation_length"})
    for _ in range(4):
        x, y = a.next_minibatch(4), b.next_minibatch(4)
        assert record(x, a.get_checkpoint_state()) == record(y, b.get_checkpoint_state())


I64 = lambda *v: np.array(v, dtype=np.int64)


@pytest.mark.parametrize("call", [
    lambda: _gather.bptt_need(I64(0, 0), 0, I64(0), I64(1), 0, 1),
    lambda: _gather.bptt_need(I64(-1), 4, I64(0), I64(1), 0, 1),
    lambda: _gather.bptt_need(I64(0), 4, I64(0), I64(1), 0, 2),
    lambda: _gather.bptt_need(I64(0), 4, I64(0), I64(1, 2), 0, 1),
    lambda: _gather.bptt_assign(I64(9), 4, I64(1)),
    lambda: _gather.bptt_assign(I64(0), 4, I64(-1)),
    lambda: _gather.bptt_plan(I64(2), I64(3), I64(0), I64(7), 2, 4),
    lambda: _gather.bptt_plan(I64(1, 0), I64(3, 3), I64(0, 0), I64(7, 8), 2, 4),
    lambda: _gather.bptt_plan(I64(0), I64(3), I64(4), I64(7), 1, 4),
    lambda: _gather.bptt_copy_dense([np.zeros((4, 8), np.uint8)], [I64(0, 4)], I64(1), I64(0), I64(0), I64(0),
                                    I64(2), I64(0), np.zeros((4, 8), np.uint8), 4),
    lambda: _gather.bptt_copy_dense([np.zeros((4, 8), np.uint8)], [I64(0, 4)], I64(0), I64(1), I64(0), I64(0),
                                    I64(2), I64(0), np.zeros((4, 8), np.uint8), 4),
    lambda: _gather.bptt_copy_dense([np.zeros((4, 8), np.uint8)], [I64(0, 4)], I64(0), I64(0), I64(3), I64(0),
                                    I64(2), I64(0), np.zeros((4, 8), np.uint8), 4),
    lambda: _gather.bptt_copy_dense([np.zeros((4, 8), np.uint8)], [I64(0, 4)], I64(0), I64(0), I64(0), I64(3),
                                    I64(2), I64(0), np.zeros((4, 8), np.uint8), 4),
    lambda: _gather.bptt_copy_dense([np.zeros((4, 8), np.uint8)], [I64(0, 9)], I64(0), I64(0), I64(0), I64(0),
                                    I64(2), I64(0), np.zeros((4, 8), np.uint8), 4),
    lambda: _gather.bptt_scatter_sparse([np.ones(2, np.float32)], [np.array([0, 9], np.int32)], [I64(0, 1, 2)],
                                        [I64(0, 2)], I64(0), I64(0), I64(0), I64(0), I64(2), I64(0),
                                        np.zeros((4, 7), np.float32), 4),
    lambda: _gather.bptt_scatter_sparse([np.ones(2, np.float32)], [np.array([0, 1], np.int32)], [I64(0, 1, 5)],
                                        [I64(0, 2)], I64(0), I64(0), I64(0), I64(0), I64(2), I64(0),
                                        np.zeros((4, 7), np.float32), 4),
    lambda: _gather.bptt_scatter_sparse([np.ones(2, np.float32)], [np.array([0, 1], np.int32)], [I64(0, 1, 2)],
                                        [I64(0, 2)], I64(0), I64(0), I64(0), I64(0), I64(2), I64(1),
                                        np.zeros((4, 7), np.float32), 4),
])
def test_bptt_kernels_refuse_indices_they_did_not_compute(call):
    with pytest.raises((IndexError, ValueError)):
        call()


def test_streams_of_different_lengths_fail_like_the_reference(tmp_path, monkeypatch):
    # the 7th sequence has 3 samples of x but 2 of y; the slots reach it in the second minibatch
    text = "".join(f"{k} |x 1 2 3 |y 1:1\n" * 2 for k in range(6)) + "6 |x 1 2 3 |y 0:1\n6 |x 1 2 3\n6 |x 1 2 3 |y 0:1\n"
    p = write(tmp_path, text + "7 |x 1 2 3 |y 2:1\n")
    make = lambda: MinibatchSource(CTFReader(p, specs()), randomize=False, truncation_length=2)
    errors = []
    for reference in (False, True):
        with monkeypatch.context() as m:
            if reference:
                bptt_reference.use_reference(m)
            src = make()
            delivered = 0
            with pytest.raises(ValueError, match="same length") as e:
                while src.next_minibatch(4) is not None:
                    delivered += 1
            errors.append((delivered, str(e.value)))
    assert errors[0] == errors[1] and errors[0][0] >= 1 and "[2, 3]" in errors[0][1]


@pytest.mark.parametrize("length", [0, 3])
def test_a_chunk_whose_every_sequence_was_dropped_is_skipped(tmp_path, length):
    # small chunks: some hold only malformed sequences (this raised IndexError in _resolve before,
    # in plain mode as in BPTT)
    path = corpus(tmp_path, 40, seed=16, bad_every=2)
    r = reader(path, chunk_size=200, max_errors=1000)
    src = MinibatchSource(r, randomize=False, max_sweeps=1, truncation_length=length)
    samples = sum(mb.num_samples for mb in src.minibatches(12))
    assert samples == sum(c.num_samples for c in (r.load_chunk(i) for i in range(len(r.chunks))))
