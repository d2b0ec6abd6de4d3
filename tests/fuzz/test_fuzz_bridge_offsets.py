"""Fuzz the sparse offsets of the modern bridge formats (WebDataset ``NAME.offsets.npy``, MDS
``NAME.offsets`` columns): any stored integer type, any values. Reading must give exactly the
samples the offsets describe when they are CSR row pointers (0, never falling back, ending at the
entries stored), and a ``RecordkitError`` otherwise; never another sample's entries, never a
traceback. Data sets written by hand (as other tools write them), read in this process."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, example, given, settings, strategies as st

from bridge_corpus import mds_ndarray, npy_bytes, write_mds, write_tar
from recordkit import StreamSpec
from recordkit.errors import RecordkitError

DTYPES = ["uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64"]
STREAM = [StreamSpec("x", "sparse", 10)]
INDICES = np.array([1, 2, 3, 4], np.int32)
VALUES = np.array([1.0, 2.0, 3.0, 4.0], np.float32)

offsets_lists = st.lists(st.one_of(st.integers(-3, 6), st.sampled_from([127, 128, 255, 256, 2**31, 2**63, 2**64 - 1])),
                         min_size=0, max_size=5)


def fuzz_settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def stored(values, dtype) -> np.ndarray:
    """``values`` as the writer would store them in ``dtype`` (wrapping, as a careless cast does)."""
    return np.array([v % (1 << 64) for v in values], np.uint64).astype(dtype)


def expected(off: np.ndarray, nnz: int):
    """The samples (indices, values) the offsets describe, or None when they are not row pointers."""
    o = [int(x) for x in off]
    if not o or o[0] != 0 or o[-1] != nnz or any(b < a for a, b in zip(o, o[1:])):
        return None
    return [(INDICES[a:b].tolist(), VALUES[a:b].tolist()) for a, b in zip(o, o[1:])]


def delivered(reader) -> list:
    out = []
    for info in reader.chunks:
        col = reader.load_chunk(info.id).columns["x"]
        for j in range(col.num_samples):
            ind, val = col.sample(j)
            out.append((ind.tolist(), val.tolist()))
    return out


def check(read, off: np.ndarray) -> None:
    want = expected(off, len(INDICES))
    try:
        got = read()
    except RecordkitError:
        assert want is None, f"valid offsets {off.tolist()} refused"
        return
    assert want is not None, f"offsets {off.tolist()} ({off.dtype}) accepted: read {got}"
    assert got == [([7], [7.0])] + want


@fuzz_settings(60)
@given(values=offsets_lists, dtype=st.sampled_from(DTYPES))
@example(values=[0, 4, 0, 4], dtype="uint64")  # unsigned: np.diff never goes negative
@example(values=[0, 100, -100, 4], dtype="int8")  # narrow signed: the steps wrap around
def test_webdataset_sparse_offsets_give_their_samples_or_a_recordkit_error(values, dtype):
    from recordkit.formats.webdataset import WebDatasetReader
    off = stored(values, dtype)
    with tempfile.TemporaryDirectory() as d:
        members = []
        for key, (ind, val, o) in enumerate([(np.array([7], np.int32), np.array([7.0], np.float32),
                                              np.array([0, 1], dtype)), (INDICES, VALUES, off)]):
            members += [(f"{key:04d}.x.indices.npy", npy_bytes(ind)), (f"{key:04d}.x.offsets.npy", npy_bytes(o)),
                        (f"{key:04d}.x.values.npy", npy_bytes(val))]
        write_tar(Path(d) / "shard-0000.tar", members)

        def read():
            with WebDatasetReader(d, STREAM) as r:
                return delivered(r)
        check(read, off)


@fuzz_settings(60)
@given(values=offsets_lists, dtype=st.sampled_from(DTYPES))
@example(values=[0, 4, 0, 4], dtype="uint64")
@example(values=[0, 100, -100, 4], dtype="int8")
def test_mds_sparse_offsets_give_their_samples_or_a_recordkit_error(values, dtype):
    from recordkit.formats.mds import MDSReader
    off = stored(values, dtype)
    with tempfile.TemporaryDirectory() as d:
        columns = [("x.indices", "ndarray:int32"), ("x.offsets", f"ndarray:{dtype}"), ("x.values", "ndarray:float32")]
        write_mds(d, columns, [[mds_ndarray(np.array([7], np.int32)), mds_ndarray(np.array([0, 1], dtype)),
                                mds_ndarray(np.array([7.0], np.float32))],
                               [mds_ndarray(INDICES), mds_ndarray(off), mds_ndarray(VALUES)]])

        def read():
            with MDSReader(d, STREAM) as r:
                return delivered(r)
        check(read, off)
