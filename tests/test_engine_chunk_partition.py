"""ChunkPartition: whole chunks per partition, so a randomized reader parses only its own chunks."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from helpers import dense, sparse
from recordkit.errors import UsageError
from recordkit.engine import ChunkPartition
from recordkit.engine.chunk_partition import assign_chunks
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader

STREAMS = [dense("x", 2), sparse("y", 7)]


@pytest.fixture
def files(tmp_path):
    ctf = tmp_path / "d.ctf"
    lines = []
    for k in range(300):
        for t in range(1 + k % 4):
            lines.append(f"{k} |x {k} {t} |y {(k + t) % 7}:1\n")
    ctf.write_text("".join(lines))
    cbf = tmp_path / "d.cbf"
    reader = CTFReader(ctf, STREAMS, chunk_size=500)
    with CBFWriter(cbf, STREAMS, chunk_size=500) as w:
        for chunk in reader.iter_chunks():
            w.write_chunk(chunk)
    return {"ctf": lambda: CTFReader(ctf, STREAMS, chunk_size=500), "cbf": lambda: CBFReader(cbf)}


def test_assignment_is_contiguous_covers_every_chunk_once_and_balances_samples():
    chunks = [ChunkInfo(i, 10, s) for i, s in enumerate([5, 50, 7, 7, 30, 1, 1, 60, 20, 19])]
    for n in (1, 2, 3, 4):
        owner = assign_chunks(chunks, n)
        assert list(owner) == sorted(owner) and set(owner) <= set(range(n))
        totals = np.bincount(owner, weights=[c.num_samples for c in chunks], minlength=n)
        assert abs(totals - totals.sum() / n).max() <= max(c.num_samples for c in chunks)


@pytest.mark.parametrize("fmt", ["ctf", "cbf"])
@pytest.mark.parametrize("n", [2, 3])
def test_randomized_partitions_are_disjoint_complete_and_parse_only_their_own_chunks(files, fmt, n):
    every = {int(s.key): s["x"].tolist() for s in files[fmt]()}
    seen = {}
    for i in range(n):
        inner = files[fmt]()
        loaded = []
        original = inner.load_chunk

        @functools.wraps(original)  # keeps the reader's signature: whether it takes threads= is asked of it
        def counting(cid, *a, **kw):
            loaded.append(cid)
            return original(cid, *a, **kw)
        inner.load_chunk = counting
        if hasattr(inner, "load_chunks"):  # several small chunks at once (CBF)
            batch = inner.load_chunks
            inner.load_chunks = lambda cids, batch=batch: loaded.extend(cids) or batch(cids)
        part = ChunkPartition(inner, n, i)
        source = MinibatchSource(part, randomize=True, window=3, seed=5, max_sweeps=2)
        per_sweep = [[], []]
        while (mb := source.next_minibatch(32)) is not None:
            sweeps = mb.sweeps if mb.sweeps is not None else np.full(len(mb.keys), mb.sweep)
            for k, sweep in zip(mb.keys, sweeps):
                per_sweep[sweep].append(int(k))
        assert set(loaded) == set(part.inner_chunk_ids)  # nothing of the other partitions was parsed
        for sweep in per_sweep:
            assert len(sweep) == len(set(sweep))  # nothing twice within a sweep
        assert set(per_sweep[0]) == set(per_sweep[1]) and per_sweep[0] != per_sweep[1]
        for k in per_sweep[0]:
            assert k not in seen, f"key {k} in partitions {seen.get(k)} and {i}"
            seen[k] = i
    assert set(seen) == set(every)


def test_partition_keeps_the_optional_protocol_parts_of_what_it_wraps(files):
    part = ChunkPartition(files["cbf"](), 2, 1)
    inner = files["cbf"]()
    first = part.inner_chunk_ids[0]
    assert part.chunks[0].id == 0 and part.chunks[0].num_samples == inner.chunks[first].num_samples
    assert part.sequence_lengths(0).tolist() == inner.sequence_lengths(first).tolist()
    assert part.load_chunk(0).keys.tolist() == inner.load_chunk(first).keys.tolist()

    class Minimal:  # only the required protocol
        streams = STREAMS
        chunks = [ChunkInfo(0, 1, 1), ChunkInfo(1, 1, 1)]

        def load_chunk(self, chunk_id):
            raise AssertionError("not called")

    from recordkit.engine.deserializer import keys_are_ids, sequence_lengths, takes_threads
    p = ChunkPartition(Minimal(), 2, 0)
    # what the wrapped one cannot tell, the partition cannot either (the protocol's answers, not errors)
    assert sequence_lengths(p, 0) is None and not keys_are_ids(p) and not p._inner_takes_threads
    assert takes_threads(files["cbf"]()) == ChunkPartition(files["cbf"](), 2, 0)._inner_takes_threads


def test_more_partitions_than_chunks_is_a_usage_error(files):
    reader = files["cbf"]()
    n = len(reader.chunks) + 1
    empty = sorted(set(range(n)) - set(assign_chunks(reader.chunks, n).tolist()))[0]
    with pytest.raises(UsageError, match=f"leaves partition {empty} empty"):
        ChunkPartition(reader, n, empty)
    with pytest.raises(UsageError, match="partition index"):
        ChunkPartition(reader, 2, 2)


def test_cli_read_partition_by_chunks_splits_the_samples(tmp_path, capsys):
    import json
    from recordkit.cli.main import main
    p = tmp_path / "d.ctf"
    p.write_text("".join(f"{k} |x {k} 1\n" for k in range(3000)))
    got = []
    for i in range(3):
        assert main(["read", str(p), "--mb-size", "64", "--stream", "x=dense:2", "--chunk-size", "2000",
                     "--randomize", "--partitions", "3", "--partition-index", str(i), "--partition-by", "chunks",
                     "--json"]) == 0
        got.append(json.loads(capsys.readouterr().out)["samples"])
    assert sum(got) == 3000 and max(got) - min(got) <= 2 * 2000 // 12  # within a chunk (~167 lines of 12 bytes)


@pytest.fixture
def halves(tmp_path):
    """whole.cbf: 40 one-sample sequences in 10 chunks; half.cbf: 20 in 5 chunks, the size of one
    of whole.cbf's two ChunkPartitions (so the fingerprints of the two agree)."""
    from helpers import write_valued_cbf
    return (write_valued_cbf(tmp_path / "whole.cbf", 40, longest=1, chunk_size=64),
            write_valued_cbf(tmp_path / "half.cbf", 20, longest=1, chunk_size=64))


def chunk_state(halves):
    """(a maker of whole.cbf's ChunkPartition readers, a maker of sources over half.cbf, reader 1's
    source after one minibatch and its state)."""
    whole, half = halves
    part = lambda i: MinibatchSource(ChunkPartition(CBFReader(whole), 2, i), randomize=False, max_sweeps=1)
    plain = lambda: MinibatchSource(CBFReader(half), randomize=False, max_sweeps=1)
    a = part(1)
    a.next_minibatch(4)
    return part, plain, a, a.get_checkpoint_state()


def test_a_chunk_partition_checkpoint_resumes_only_on_its_own_reader(halves):
    part, _, a, state = chunk_state(halves)
    with pytest.raises(ValueError, match="'chunk_partition': the checkpoint was taken on ChunkPartition 1 of 2, "
                                         "this source reads 0 of 2; to change the number of readers"):
        part(0).restore_from_checkpoint(state)
    c = part(1)
    c.restore_from_checkpoint(state)
    assert [k for mb in c.minibatches(4) for k in mb.keys.tolist()] == \
        [k for mb in a.minibatches(4) for k in mb.keys.tolist()]


def test_a_chunk_partition_checkpoint_and_a_whole_data_checkpoint_are_not_interchangeable(halves):
    """The fingerprints agree (half.cbf is the size of one reader's chunks): the field tells."""
    part, plain, _, state = chunk_state(halves)
    with pytest.raises(UsageError, match="'chunk_partition': the checkpoint was taken on ChunkPartition 1 of 2, "
                                         "this source reads no ChunkPartition"):
        plain().restore_from_checkpoint(state)
    b = plain()
    b.next_minibatch(4)
    with pytest.raises(UsageError, match="'chunk_partition': missing: .* this source reads 0 of 2"):
        part(0).restore_from_checkpoint(b.get_checkpoint_state())
