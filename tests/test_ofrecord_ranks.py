"""OFRecordReader with more ranks than part files: the ranks split the data set at
record boundaries using the parts' indexes, so every record is read exactly once per epoch and the
shares differ by at most one record; with at least as many parts as ranks OneFlow's whole-part split
is kept. Ranks are simulated: one reader per rank in this process."""
from __future__ import annotations

import os
import struct
import warnings

import numpy as np
import pytest

from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.dataset import part_paths, sidecar_path
from recordkit.formats.ofrecord.reader import OFRecordReader, balanced_split
from recordkit.formats.ofrecord.writer import OFRecordWriter, frame


def write_uneven(d, sizes):
    """Parts with the given record counts (records numbered 0.. in part order), written by hand so
    that sizes can be uneven and zero."""
    d.mkdir(parents=True, exist_ok=True)
    label = 0
    for p, n in enumerate(sizes):
        data = b""
        for _ in range(n):
            data += frame(codec.encode({"label": label, "x": np.full(label % 5 + 1, label, np.float32)}))
            label += 1
        (d / f"part-{p}").write_bytes(data)
    return d, label


def epoch_shares(d, ranks, *, epochs=1, **kw):
    """Per rank, per epoch: the labels read, in order."""
    out = []
    for r in range(ranks):
        reader = OFRecordReader(d, 3, epochs=epochs, rank=r, world_size=ranks, **kw)
        flat = [int(rec["label"].value[0]) for batch in reader for rec in batch]
        per = reader.records_per_epoch()
        out.append([flat[e * per:(e + 1) * per] for e in range(epochs)] if epochs > 1 else [flat])
        assert len(flat) == per * epochs
    return out


@pytest.mark.parametrize("sizes", [[10], [7, 3], [1, 1, 1], [5, 0, 9, 2], [13, 1], [0, 4], [3, 3, 3, 3]])
@pytest.mark.parametrize("ranks", [1, 2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize("sidecar", [False, True])
def test_every_record_once_per_epoch_and_shares_within_one_record(tmp_path, sizes, ranks, sidecar):
    d, total = write_uneven(tmp_path / "d", sizes)
    if total < ranks:
        with pytest.raises(ValueError, match="every rank needs at least one record"):
            OFRecordReader(d, 3, rank=0, world_size=ranks, index_sidecar=sidecar)
        return
    shares = epoch_shares(d, ranks, index_sidecar=sidecar)
    got = [x for rank in shares for x in rank[0]]
    assert sorted(got) == list(range(total))           # every record exactly once across ranks
    lengths = [len(rank[0]) for rank in shares]
    if ranks > len(sizes):                               # split at record boundaries: as even as can be
        assert max(lengths) - min(lengths) <= 1 and min(lengths) >= 1
        assert got == list(range(total))                 # contiguous runs, in part order, rank after rank
    else:                                                # OneFlow's meaning: whole parts per rank
        for r, rank in enumerate(shares):
            parts = list(balanced_split(len(sizes), ranks, r))
            want = list(range(sum(sizes[:parts[0]]), sum(sizes[:parts[-1] + 1]))) if parts else []
            assert rank[0] == want
    if sidecar:  # the readers wrote and then used the sidecar indexes
        assert all(os.path.exists(sidecar_path(p)) for p in part_paths(d) if os.path.getsize(p))


@pytest.mark.parametrize("parts,ranks", [(1, 2), (2, 3), (2, 5), (3, 4), (3, 8), (4, 7)])
def test_shuffle_after_epoch_keeps_every_epoch_exact_across_ranks(tmp_path, parts, ranks):
    d, total = write_uneven(tmp_path / "d", [5 + 3 * p for p in range(parts)])
    shares = epoch_shares(d, ranks, epochs=3, shuffle_after_epoch=True)
    for e in range(3):
        got = [x for rank in shares for x in rank[e]]
        assert sorted(got) == list(range(total)), f"epoch {e}"
        lengths = [len(rank[e]) for rank in shares]
        assert max(lengths) - min(lengths) <= 1


def test_shares_are_runs_inside_and_across_parts(tmp_path):
    d, _ = write_uneven(tmp_path / "d", [4, 6])
    paths = part_paths(d)
    runs = [OFRecordReader(d, 1, rank=r, world_size=3).shares_for_epoch(0) for r in range(3)]
    assert runs == [[(paths[0], 0, 4)], [(paths[1], 0, 3)], [(paths[1], 3, 6)]]
    r = OFRecordReader(d, 1, rank=1, world_size=4)  # 10 records / 4 ranks: 3, 3, 2, 2
    assert r.shares_for_epoch(0) == [(paths[0], 3, 4), (paths[1], 0, 2)] and r.records_per_epoch() == 3
    assert r.parts_for_epoch(0) == paths


def test_batches_decoder_reads_the_same_share(tmp_path):
    d, total = write_uneven(tmp_path / "d", [9, 2])
    seen = []
    for r in range(4):
        for b in OFRecordReader(d, 2, epochs=1, rank=r, world_size=4).batches({"label": ((), np.int64)}):
            seen.extend(b["label"].tolist())
    assert sorted(seen) == list(range(total))


def test_endless_stream_of_a_rank_wraps_to_its_own_share(tmp_path):
    d, _ = write_uneven(tmp_path / "d", [5])
    it = iter(OFRecordReader(d, 2, rank=1, world_size=3))   # share: records 2, 3
    assert [[int(x["label"].value[0]) for x in next(it)] for _ in range(3)] == [[2, 3], [2, 3], [2, 3]]


def test_a_broken_part_is_reported_by_exactly_one_rank(tmp_path):
    d, _ = write_uneven(tmp_path / "d", [4, 4])
    with open(d / "part-0", "ab") as f:
        f.write(struct.pack("<q", 1000) + b"cut")  # a frame cut off after the 4 intact ones
    counts = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for r in range(3):
            reader = OFRecordReader(d, 10, epochs=1, rank=r, world_size=3, max_errors=5)
            list(reader)
            counts.append(reader.budget.count)
    assert counts == [0, 1, 0]  # rank 1 reads part-0's last intact record: it reports the cut frame


def test_written_sets_split_for_more_ranks_than_parts(tmp_path):
    with OFRecordWriter(tmp_path / "d", 2) as w:
        for i in range(11):
            w.write({"label": i})
    shares = epoch_shares(tmp_path / "d", 6, index_sidecar=True)
    assert sorted(x for s in shares for x in s[0]) == list(range(11))
    assert sorted(len(s[0]) for s in shares) == [1, 2, 2, 2, 2, 2]
