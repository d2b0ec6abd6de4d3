"""The minibatch loop on the dense corpus vs pyarrow iterating the same data from Parquet.

    .venv/bin/python benchmarks/loop_vs_pyarrow.py [--cbf bench-data/dense.cbf] [--mb 1024] [--repeat 5]

In one process, best of --repeat each, file order, minibatches of --mb samples:

* ``cntk.io loop``: ``recordkit.compat.cntk.MinibatchSource(CBFDeserializer(path), randomize=False)``
  and ``next_minibatch(mb)`` until empty, values taken as NumPy arrays (``.asarray()``), as a
  cntk.io script does;
* ``engine loop``: ``MinibatchSource(CBFReader(path), randomize=False).next_minibatch(mb)``;
* ``pyarrow``: ``pq.ParquetFile(path).iter_batches(mb)`` over an uncompressed Parquet file holding
  the same values (``features`` fixed_size_list<float32>[100], ``labels`` [10]), each batch's
  columns to (rows, dim) NumPy arrays (``flatten().to_numpy()``, zero copy).

The variants run interleaved (one run of each, --repeat times), so page cache and machine load
treat them alike.

The ratios are to pyarrow (goal: within 1.5x). The Parquet file is written once beside the CBF.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np


def best(fn, repeat):
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        out = (dt, n) if out is None or dt < out[0] else out
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cbf", default="bench-data/dense.cbf")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    import pyarrow as pa
    import pyarrow.parquet as pq
    from recordkit.compat import cntk as C
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.cbf import CBFReader

    flat = os.path.splitext(a.cbf)[0] + ".lists.parquet"
    if not os.path.exists(flat):
        with CBFReader(a.cbf) as r:
            cols = {}
            for c in r.iter_chunks():
                for name in ("features", "labels"):
                    cols.setdefault(name, []).append(np.asarray(c.columns[name].values, np.float32))
        table = pa.table({name: pa.FixedSizeListArray.from_arrays(pa.array(np.concatenate(v).reshape(-1)), dim)
                          for (name, v), dim in zip(cols.items(), (100, 10))})
        pq.write_table(table, flat + ".tmp", compression="NONE", row_group_size=1 << 16)
        os.replace(flat + ".tmp", flat)

    def cntk_loop():
        src = C.MinibatchSource(C.CBFDeserializer(a.cbf, C.StreamDefs(
            features=C.StreamDef(field="features", shape=100), labels=C.StreamDef(field="labels", shape=10))),
            randomize=False, max_sweeps=1)
        n = 0
        while True:
            mb = src.next_minibatch(a.mb)
            if not mb:
                return n
            x = mb[src.streams.features].asarray()
            mb[src.streams.labels].asarray()
            n += len(x)

    def engine_loop():
        src = MinibatchSource(CBFReader(a.cbf), randomize=False, max_sweeps=1)
        n = 0
        while (m := src.next_minibatch(a.mb)) is not None:
            n += m.num_samples
        src.close()
        return n

    def arrow_loop():
        n = 0
        for batch in pq.ParquetFile(flat).iter_batches(batch_size=a.mb):
            x = batch.column(0).flatten().to_numpy().reshape(len(batch), 100)
            batch.column(1).flatten().to_numpy().reshape(len(batch), 10)
            n += len(x)
        return n

    variants = [("pyarrow iter_batches -> numpy", arrow_loop), ("engine loop (MinibatchSource)", engine_loop),
                ("cntk.io loop (compat.cntk)", cntk_loop)]
    results = {name: None for name, _ in variants}
    for _ in range(a.repeat):
        for name, fn in variants:
            r = best(fn, 1)
            results[name] = r if results[name] is None or r[0] < results[name][0] else results[name]
    rows = list(results.items())
    base = rows[0][1][0]
    print(f"{a.cbf} (CBF {os.path.getsize(a.cbf) / 1e6:.1f} MB) vs {flat} ({os.path.getsize(flat) / 1e6:.1f} MB), "
          f"minibatches of {a.mb}, best of {a.repeat}")
    for name, (dt, n) in rows:
        print(f"  {name:32s} {dt:7.3f} s  {n:>8} samples  {dt / base:5.2f}x pyarrow's time")


if __name__ == "__main__":
    main()
