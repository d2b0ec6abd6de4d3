#!/usr/bin/env python3
"""Reading data sets the peers wrote, in the layouts recordkit infers with no ``--stream``, beside
each peer's own reader on the same files.

    python benchmarks/world_columns.py [--rows 200000] [--dim 64] [--repeat 3] [--data-dir bench-data/world]
                                       [--mds-python /tmp/rk-world-mds-venv/bin/python] [--json OUT.json]

The data (written once, reused): ``--rows`` rows of a float32 embedding of ``--dim`` values and an
int64 label, by

* pyarrow ``write_table``: ``emb`` ``fixed_size_list<float>[DIM]``, ``label`` int64 (``world.parquet``);
* ``datasets.Dataset.from_dict({"emb": X, "label": y}).save_to_disk`` (``world_hf``: ``list<float>``);
* Streaming's ``MDSWriter`` with ``{"emb": "ndarray:float32:DIM", "label": "int"}`` (``world_mds``),
  run by ``--mds-python``: a venv with mosaicml-streaming (its numpy < 2.2 pin keeps it out of
  recordkit's venv; ``tools/bridge/``). Without it the MDS rows are left out.

Each reader decodes every row into NumPy arrays (embedding rows and labels), best of ``--repeat``,
the readers alternating so machine load hits them alike:

* recordkit: ``recordkit.open(PATH)`` (streams inferred) and ``load_chunk`` of every chunk;
* pyarrow: ``ParquetFile.iter_batches(8192)``, ``emb`` values and ``label`` ``to_numpy``;
* datasets: ``load_from_disk(PATH).with_format("numpy")``, ``ds.iter(batch_size=8192)``;
* Streaming: ``StreamingDataset(local=PATH, shuffle=False, batch_size=1)``, every sample by index
  (its reader hands out samples one at a time), in ``--mds-python``; recordkit on the same set.

Prints rows/s per reader and recordkit's time as a multiple of the peer's.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "src"))

import numpy as np  # noqa: E402

MDS_WRITE = textwrap.dedent("""
    import sys, numpy as np
    from streaming import MDSWriter
    out, rows, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    x = np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)
    with MDSWriter(out=out, columns={"emb": f"ndarray:float32:{dim}", "label": "int"}) as w:
        for i in range(rows):
            w.write({"emb": x[i], "label": i % 10})
""")

MDS_READ = textwrap.dedent("""
    import sys, time, numpy as np
    from streaming import StreamingDataset
    path, repeat = sys.argv[1], int(sys.argv[2])
    best = None
    for _ in range(repeat):
        t = time.perf_counter()
        ds = StreamingDataset(local=path, shuffle=False, batch_size=1)
        total = 0.0
        for i in range(len(ds)):
            s = ds[i]
            total += float(s["emb"][0]) + s["label"]
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    print(best)
""")


def make_data(d: str, rows: int, dim: int, mds_python: str | None) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq
    os.makedirs(d, exist_ok=True)
    x = np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)
    y = np.arange(rows, dtype=np.int64) % 10
    paths = {"parquet": os.path.join(d, "world.parquet"), "hf": os.path.join(d, "world_hf"),
             "mds": os.path.join(d, "world_mds")}
    if not os.path.exists(paths["parquet"]):
        pq.write_table(pa.table({"emb": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), dim),
                                 "label": pa.array(y)}), paths["parquet"])
    if not os.path.exists(paths["hf"]):
        import datasets
        datasets.disable_progress_bars()
        datasets.Dataset.from_dict({"emb": x, "label": y}).save_to_disk(paths["hf"])
    if mds_python and not os.path.exists(paths["mds"]):
        subprocess.run([mds_python, "-c", MDS_WRITE, paths["mds"], str(rows), str(dim)], check=True)
    if not os.path.exists(paths["mds"]):
        del paths["mds"]
    return paths


def read_recordkit(path: str) -> float:
    import recordkit
    total = 0.0
    with recordkit.open(path) as r:
        for c in r.chunks:
            chunk = r.load_chunk(c.id)
            total += float(chunk.columns["emb"].values[:1].sum()) + float(chunk.columns["label"].values.sum())
    return total


def read_pyarrow(path: str) -> float:
    import pyarrow.parquet as pq
    total = 0.0
    f = pq.ParquetFile(path)
    for b in f.iter_batches(batch_size=8192):
        emb = b.column(0)
        x = emb.values.to_numpy().reshape(len(emb), -1)
        y = b.column(1).to_numpy()
        total += float(x[:1].sum()) + float(y.sum())
    return total


def read_datasets(path: str) -> float:
    import datasets
    ds = datasets.load_from_disk(path).with_format("numpy")
    total = 0.0
    for b in ds.iter(batch_size=8192):
        total += float(b["emb"][:1].sum()) + float(b["label"].sum())
    return total


def best_of(fn, path, repeat) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(path)
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "world"))
    ap.add_argument("--mds-python", default="/tmp/rk-world-mds-venv/bin/python")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    mds_python = args.mds_python if os.path.exists(args.mds_python) else None
    d = os.path.join(args.data_dir, f"{args.rows}x{args.dim}")
    paths = make_data(d, args.rows, args.dim, mds_python)
    pairs = [("parquet", "pyarrow", read_pyarrow), ("hf", "datasets", read_datasets)]
    results = {}
    for kind, peer, fn in pairs:
        rk, other = [], []
        for _ in range(args.repeat):  # alternating: load hits both alike
            rk.append(best_of(read_recordkit, paths[kind], 1))
            other.append(best_of(fn, paths[kind], 1))
        results[kind] = {"peer": peer, "recordkit_s": min(rk), "peer_s": min(other)}
    if "mds" in paths:
        rk = [best_of(read_recordkit, paths["mds"], 1) for _ in range(args.repeat)]
        out = subprocess.run([mds_python, "-c", MDS_READ, paths["mds"], str(args.repeat)], check=True,
                             capture_output=True, text=True).stdout
        results["mds"] = {"peer": "streaming", "recordkit_s": min(rk), "peer_s": float(out.strip().splitlines()[-1])}
    print(f"{args.rows} rows, emb float32[{args.dim}] + int64 label; best of {args.repeat}")
    print(f"{'data set':<10} {'peer':<10} {'recordkit rows/s':>17} {'peer rows/s':>13} {'recordkit time / peer':>22}")
    for kind, r in results.items():
        print(f"{kind:<10} {r['peer']:<10} {args.rows / r['recordkit_s']:>17,.0f} {args.rows / r['peer_s']:>13,.0f} "
              f"{r['recordkit_s'] / r['peer_s']:>21.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": args.rows, "dim": args.dim, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
