"""The built-in sample job behind ``make demo``: write a small CTF corpus, read it back,
and read it as randomized minibatches.

The corpus looks like a part-of-speech tagging set:
id-mode sequences of 1-12 words, each word a sparse one-hot over a vocabulary plus a
dense 4-value feature vector, and a sparse one-hot tag per word. It exercises the
writer, the index, chunking, dense and sparse parsing, and exact round trip.
"""
from __future__ import annotations

import os
import time

import numpy as np
import scipy.sparse as sp

from recordkit.engine.streams import StreamSpec

DEMO_STREAMS = [
    StreamSpec("word", "sparse", 5000, alias="w"),
    StreamSpec("features", "dense", 4, alias="f"),
    StreamSpec("tag", "sparse", 12, alias="t"),
]


def make_sequences(n: int, seed: int = 7):
    """``n`` reproducible sequences as (key, {stream: data}) pairs."""
    rng = np.random.default_rng(seed)
    for key in range(n):
        length = int(rng.integers(1, 13))
        words = rng.integers(0, 5000, size=length)
        tags = rng.integers(0, 12, size=length)
        ones = np.ones(length, dtype=np.float32)
        rows = np.arange(length)
        yield key * 10, {
            "word": sp.csr_matrix((ones, (rows, words)), shape=(length, 5000)),
            "features": rng.normal(size=(length, 4)).astype(np.float32).round(4),
            "tag": sp.csr_matrix((ones, (rows, tags)), shape=(length, 12)),
        }


def run(directory: str, n: int = 2000, echo=print) -> dict:
    from recordkit.formats.ctf import CTFReader, write_ctf
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "demo.ctf")
    written = list(make_sequences(n))
    t0 = time.perf_counter()
    write_ctf(path, DEMO_STREAMS, written)
    t_write = time.perf_counter() - t0
    size = os.path.getsize(path)
    echo(f"wrote {len(written)} sequences to {path} ({size / 1024:.1f} KiB) in {t_write * 1000:.0f} ms")
    with open(path) as f:
        head = [next(f).rstrip("\n") for _ in range(3)]
    echo("first lines:")
    for line in head:
        echo("  " + (line if len(line) < 100 else line[:97] + "..."))

    t0 = time.perf_counter()
    with CTFReader(path, DEMO_STREAMS, chunk_size=64 << 10) as reader:
        chunks = list(reader.iter_chunks(threads=2))
        t_parse = time.perf_counter() - t0
        read = [(s.key, s.data) for chunk in chunks for s in chunk]
    mismatches = _mismatches(written, read)
    samples = {s.name: sum(d[s.name].shape[0] for _, d in read) for s in DEMO_STREAMS}
    echo(f"read back {len(read)} sequences in {len(chunks)} chunks; parsing took {t_parse * 1000:.0f} ms")
    for s in DEMO_STREAMS:
        echo(f"  {s.name:<9} {s.format:<6} dim {s.dim:<5} samples {samples[s.name]}")
    echo("round trip: " + ("identical" if mismatches == 0 else f"{mismatches} sequences differ"))

    from recordkit.engine.source import MinibatchSource
    with CTFReader(path, DEMO_STREAMS, chunk_size=64 << 10) as reader, \
            MinibatchSource(reader, randomize=True, window=4, seed=1, max_sweeps=2) as source:
        sizes = [(mb.num_sequences, mb.num_samples) for mb in source.minibatches(256)]
    echo(f"minibatches of <= 256 samples, block-randomized (4-chunk window), 2 sweeps: {len(sizes)} minibatches, "
         f"{sum(n for n, _ in sizes)} sequences, {sum(m for _, m in sizes)} samples; "
         f"first: {sizes[0][0]} sequences / {sizes[0][1]} samples")
    result = {"path": path, "sequences": len(read), "chunks": len(chunks), "mismatches": mismatches,
              "minibatches": len(sizes)}
    result.update(_bridge(path, directory, read, echo))
    return result


def _bridge(path: str, directory: str, read, echo) -> dict:
    """The bridge: the corpus converted to Parquet (when pyarrow is installed: ``pip install
    'recordkit[parquet]'``) and to WebDataset shards (no optional dependency: tar members written
    directly), each read back through the engine."""
    import importlib.util
    if importlib.util.find_spec("pyarrow") is None:
        echo("bridge: skipped (pip install 'recordkit[parquet]' to convert to Parquet)")
        return {}
    out = os.path.join(directory, "demo.parquet")
    t_conv, back, n_mb, groups = _convert_and_read_back(path, out, window=4)
    mismatches = _mismatches(read, back)
    echo(f"bridge: converted to {out} ({os.path.getsize(out) / 1024:.1f} KiB, {groups} row groups) in "
         f"{t_conv * 1000:.0f} ms; read back through the engine: {len(back)} sequences, {n_mb} randomized "
         f"minibatches; " + ("identical" if mismatches == 0 else f"{mismatches} sequences differ"))
    result = {"parquet": out, "parquet_mismatches": mismatches}
    out = os.path.join(directory, "demo_wds")
    t_conv, back, n_mb, shards = _convert_and_read_back(path, out, window=2, to="webdataset", parts=4)
    mismatches = _mismatches(read, back)
    echo(f"bridge: converted to {out}/ ({shards} WebDataset tar shards) in {t_conv * 1000:.0f} ms; read back "
         f"through the engine: {len(back)} sequences, {n_mb} randomized minibatches; "
         + ("identical" if mismatches == 0 else f"{mismatches} sequences differ"))
    return {**result, "webdataset": out, "webdataset_mismatches": mismatches}


def _convert_and_read_back(path: str, out: str, *, window: int, to: str | None = None, **options) -> tuple:
    """``path`` converted to ``out`` (``to``, else by its extension), then read back through the
    registry's reader: (seconds to convert, the sequences read back, randomized minibatches of 256
    in one sweep with a ``window``-chunk window, the output's chunks)."""
    import warnings
    import recordkit
    from recordkit.engine.source import MinibatchSource
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recordkit.convert(path, out, to, streams=DEMO_STREAMS, chunk_size=64 << 10, **options)
    t_conv = time.perf_counter() - t0
    with recordkit.open(out) as reader:
        back = [(s.key, s.data) for c in reader.iter_chunks() for s in c]
        with MinibatchSource(reader, randomize=True, window=window, seed=1, max_sweeps=1) as source:
            n_mb = sum(1 for _ in source.minibatches(256))
        chunks = len(reader.chunks)
    return t_conv, back, n_mb, chunks


def _mismatches(written, read) -> int:
    """Sequences that differ in key or values, and those only one side has."""
    return sum(1 for (k1, d1), (k2, d2) in zip(written, read)
               if k1 != k2 or any(_differs(d1[name], d2[name]) for name in d1)) + abs(len(written) - len(read))


def _differs(a, b) -> bool:
    if sp.issparse(a):
        return (a != b).nnz != 0 or a.shape != b.shape
    return a.shape != b.shape or not np.array_equal(a, b)
