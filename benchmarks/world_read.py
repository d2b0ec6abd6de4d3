#!/usr/bin/env python3
"""Reading speed of the layouts other tools write, streams inferred: recordkit beside the tools' own readers.

    python benchmarks/world_read.py [--records 50000] [--dim 128] [--repeat 3] [--tf-venv /tmp/rk-tf-venv]
                                    [--data-dir bench-data/world] [--json OUT.json]

Two data sets of the same records (``x``: DIM float32 values, ``label``: an integer 0..9):

* a TFRecord of ``tf.train.Example`` written by the ``tfrecord`` package (the bytes
  ``tf.io.TFRecordWriter`` writes): float_list ``x``, int64_list ``label``;
* a WebDataset shard written by ``webdataset.TarWriter``: ``KEY.npy`` (DIM,) and ``KEY.cls``.

Each is read in full, --repeat times (best reported), records/s and MB/s of file bytes:

* recordkit, no ``--stream`` (streams inferred): ``MinibatchSource(recordkit.open(PATH),
  randomize=False, max_sweeps=1)``, minibatches of 256 samples, values as float32 arrays;
* TFRecord: ``tf.data.TFRecordDataset(PATH).batch(256).map(tf.io.parse_example)`` in the
  TensorFlow venv (CRC checks on) when ``--tf-venv`` has TensorFlow; else, and always beside it,
  the ``tfrecord`` package's ``tfrecord_loader`` (per record, NumPy arrays);
* WebDataset: ``webdataset.WebDataset(PATH, shardshuffle=False).decode().to_tuple("npy", "cls")``.

The load average is recorded before and after: the figures are only comparable within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "src"))

TF_SNIPPET = """
import json, sys, time
import tensorflow as tf
path, dim, repeat = json.loads(sys.argv[1])
spec = {"x": tf.io.FixedLenFeature([dim], tf.float32), "label": tf.io.FixedLenFeature([1], tf.int64)}
best, n = None, 0
for _ in range(repeat):
    t0 = time.perf_counter()
    n = 0
    for b in tf.data.TFRecordDataset(path).batch(256).map(lambda r: tf.io.parse_example(r, spec)):
        n += int(b["x"].shape[0])
    dt = time.perf_counter() - t0
    best = dt if best is None else min(best, dt)
print(json.dumps({"seconds": best, "records": n, "version": tf.__version__}))
"""


def make_data(directory: str, records: int, dim: int) -> tuple[str, str]:
    import numpy as np
    import tfrecord
    import webdataset as wds
    os.makedirs(directory, exist_ok=True)
    tfr = os.path.join(directory, f"examples-{records}-{dim}.tfrecord")
    wdir = os.path.join(directory, f"wds-{records}-{dim}")
    shard = os.path.join(wdir, "train-000000.tar")
    rng = np.random.default_rng(1)
    if not os.path.exists(tfr) or not os.path.exists(shard):
        x = rng.normal(size=(records, dim)).astype(np.float32)
        labels = rng.integers(0, 10, size=records)
        w = tfrecord.TFRecordWriter(tfr + ".tmp")
        for i in range(records):
            w.write({"x": (x[i].tolist(), "float"), "label": (int(labels[i]), "int")})
        w.close()
        os.replace(tfr + ".tmp", tfr)
        os.makedirs(wdir, exist_ok=True)
        with wds.TarWriter(shard + ".tmp") as sink:
            for i in range(records):
                sink.write({"__key__": f"{i:08d}", "npy": x[i], "cls": int(labels[i])})
        os.replace(shard + ".tmp", shard)
    return tfr, wdir


def best_of(repeat: int, fn) -> tuple[float, int]:
    best, n = None, 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = fn()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, n


def recordkit_read(path: str) -> int:
    import recordkit
    from recordkit.engine.source import MinibatchSource
    n = 0
    with recordkit.open(path) as reader, MinibatchSource(reader, randomize=False, max_sweeps=1) as source:
        while True:
            mb = source.next_minibatch(256)
            if mb is None:
                break
            n += len(mb.keys)
    return n


def tfrecord_package_read(path: str) -> int:
    import tfrecord
    return sum(1 for _ in tfrecord.tfrecord_loader(path, None, {"x": "float", "label": "int"}))


def webdataset_read(directory: str) -> int:
    import webdataset as wds
    shard = os.path.join(directory, "train-000000.tar")
    return sum(1 for _ in wds.WebDataset(shard, shardshuffle=False).decode().to_tuple("npy", "cls"))


def tf_read(python: str, path: str, dim: int, repeat: int):
    p = subprocess.run([python, "-c", TF_SNIPPET, json.dumps([path, dim, repeat])], capture_output=True, text=True,
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES=""))
    if p.returncode:
        raise SystemExit(f"tf.data failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=50000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tf-venv", default="/tmp/rk-tf-venv")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "world"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    load_before = os.getloadavg()
    tfr, wdir = make_data(args.data_dir, args.records, args.dim)
    sizes = {"tfrecord": os.path.getsize(tfr), "webdataset": os.path.getsize(os.path.join(wdir, "train-000000.tar"))}
    rows = []

    def add(fmt, reader, seconds, n):
        if n != args.records:
            raise SystemExit(f"{reader} read {n} records of {args.records}")
        rows.append({"format": fmt, "reader": reader, "seconds": round(seconds, 4),
                     "records_per_s": round(n / seconds), "mb_per_s": round(sizes[fmt] / seconds / 1e6, 1)})

    add("tfrecord", "recordkit (inferred)", *best_of(args.repeat, lambda: recordkit_read(tfr)))
    python = os.path.join(args.tf_venv, "bin", "python")
    if os.path.exists(python):
        got = tf_read(python, tfr, args.dim, args.repeat)
        add("tfrecord", f"tf.data + parse_example (TF {got['version']})", got["seconds"], got["records"])
    add("tfrecord", "tfrecord package loader", *best_of(args.repeat, lambda: tfrecord_package_read(tfr)))
    add("webdataset", "recordkit (inferred)", *best_of(args.repeat, lambda: recordkit_read(wdir)))
    add("webdataset", "webdataset .decode().to_tuple", *best_of(args.repeat, lambda: webdataset_read(wdir)))
    result = {"records": args.records, "dim": args.dim, "bytes": sizes, "rows": rows,
              "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()],
              "date": time.strftime("%Y-%m-%d", time.gmtime())}
    print(f"{args.records} records of x: {args.dim} float32 + an integer label; TFRecord {sizes['tfrecord'] / 1e6:.1f} MB, "
          f"WebDataset {sizes['webdataset'] / 1e6:.1f} MB; load {result['load_before']} -> {result['load_after']}")
    print("| format | reader | s | records/s | MB/s |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['format']} | {r['reader']} | {r['seconds']:.2f} | {r['records_per_s']:,} | {r['mb_per_s']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
