#!/usr/bin/env python3
"""recordkit reading its own TFRecord output beside tf.data reading the same files.

    python benchmarks/tfrecord_vs_tfdata.py [--mb 100] [--only dense,seq] [--rounds 5]
                                            [--tf-venv /tmp/tfvenv] [--data-dir bench-data/tfdata]

For each corpus of ``gen_ctf_corpora.py`` (``dense``: 100 + 10 dense float values a sample,
one-sample sequences, written as ``tf.train.Example``; ``seq``: sparse one-hot sequences of 1..30
samples, written as ``tf.train.SequenceExample``), ``recordkit convert --to tfrecord`` writes a
TFRecord directory once. Then, in fresh processes, rounds alternating the contenders, one full
read each, timed from opening the files:

* ``recordkit``: ``MinibatchSource(recordkit.open(DIR), randomize=False, max_sweeps=1)`` in
  minibatches of 1024 samples (CRCs checked);
* ``tf.data``: ``tf.data.TFRecordDataset(FILES).batch(1024).map(parse, AUTOTUNE)`` with
  ``tf.io.parse_example`` (dense, ``FixedLenFeature``) or ``tf.io.parse_sequence_example``
  (seq, ``VarLenFeature`` per feature list) in the TensorFlow venv ``--tf-venv``, every batch
  iterated (what a Keras ``fit`` pulls).

Best and median of --rounds per contender and the ratio recordkit / tf.data (goal <= 0.8), with
the load average before each round: only figures from one run on an idle machine compare.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

RECORDKIT_SNIPPET = """
import json, sys, time
import recordkit
from recordkit.engine.source import MinibatchSource
path, = json.loads(sys.argv[1])
t0 = time.perf_counter()
n = 0
with recordkit.open(path) as reader, MinibatchSource(reader, randomize=False, max_sweeps=1) as source:
    while True:
        mb = source.next_minibatch(1024)
        if mb is None:
            break
        n += len(mb.keys)
print(json.dumps({"seconds": time.perf_counter() - t0, "sequences": n}))
"""

TF_SNIPPET = """
import json, sys, time
import tensorflow as tf
files, streams, kind = json.loads(sys.argv[1])
t0 = time.perf_counter()
dense = tf.io.FixedLenFeature if kind == "example" else tf.io.FixedLenSequenceFeature
spec = {}
for s in streams:
    if s["format"] == "dense":
        spec[s["name"]] = dense([s["dim"]], tf.float32)
    else:
        spec[s["name"] + ".indices"] = tf.io.VarLenFeature(tf.int64)
        spec[s["name"] + ".values"] = tf.io.VarLenFeature(tf.float32)
if kind == "example":
    parse = lambda r: tf.io.parse_example(r, spec)
else:
    parse = lambda r: tf.io.parse_sequence_example(r, sequence_features=spec)
n = 0
for batch in tf.data.TFRecordDataset(files).batch(1024).map(parse, num_parallel_calls=tf.data.AUTOTUNE):
    n += 1
print(json.dumps({"seconds": time.perf_counter() - t0, "batches": n, "version": tf.__version__}))
"""


def prepare(data_dir: str, corpus: str, mb: int) -> tuple[str, list[dict], str]:
    """The corpus converted to a TFRecord directory (made once): its path, streams and record kind."""
    ctf_dir = os.path.join(data_dir, f"ctf-{mb}")
    ctf = os.path.join(ctf_dir, f"{corpus}.ctf")
    if not os.path.exists(ctf):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_ctf_corpora.py"), ctf_dir, "--mb", str(mb),
                        "--only", corpus], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(ctf_dir, "streams.json")) as f:
        streams = json.load(f)["corpora"][corpus]["streams"]
    out = os.path.join(data_dir, f"{corpus}-{mb}.tfrecord")
    if not os.path.exists(out):
        args = [sys.executable, "-m", "recordkit.cli.main", "convert", ctf, out, "--to", "tfrecord"]
        for s in streams:
            args += ["--stream", f"{s['name']}={s['format']}:{s['dim']}:{s['alias']}"]
        subprocess.run(args, check=True, env=dict(os.environ, PYTHONPATH=os.path.join(REPO, "src")))
    with open(os.path.join(out, "__recordkit__.json")) as f:
        kind = json.load(f).get("kind", "sequence")
    return out, streams, kind


def run(cmd: list[str], env: dict | None = None) -> dict:
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"{cmd[:3]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--only", default="dense,seq")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tf-venv", default="/tmp/tfvenv")
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "tfdata"))
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    tf_python = os.path.join(args.tf_venv, "bin", "python")
    if not os.path.exists(tf_python):
        raise SystemExit(f"no TensorFlow venv at {args.tf_venv} (pip install tensorflow-cpu there)")
    # both sides import compiled bytecode, as installed packages do (TensorFlow's was compiled at
    # install; a machine that sets PYTHONDONTWRITEBYTECODE would have recordkit's modules compiled
    # from source in every timed process: ~40 ms of a 0.2 s read)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    rk_env = dict(base, PYTHONPATH=os.path.join(REPO, "src"))
    tf_env = dict(base, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    results = {}
    for corpus in args.only.split(","):
        path, streams, kind = prepare(args.data_dir, corpus, args.mb)
        files = sorted(glob.glob(os.path.join(path, "part-*.tfrecord")))
        size = sum(os.path.getsize(f) for f in files)
        times: dict[str, list[float]] = {"recordkit": [], "tf.data": []}
        loads = []
        version = None
        for _ in range(args.rounds + 1):   # the first round warms the page cache and is not counted
            loads.append(round(os.getloadavg()[0], 2))
            rk = run([sys.executable, "-c", RECORDKIT_SNIPPET, json.dumps([path])], rk_env)
            tf = run([tf_python, "-c", TF_SNIPPET, json.dumps([files, streams, kind])], tf_env)
            version = tf["version"]
            times["recordkit"].append(rk["seconds"])
            times["tf.data"].append(tf["seconds"])
        row = {"kind": kind, "mb": round(size / 1e6, 1), "load": loads[1:], "tf": version}
        for who, ts in times.items():
            ts = ts[1:]
            row[who] = {"best": round(min(ts), 3), "median": round(statistics.median(ts), 3)}
        row["ratio_best"] = round(row["recordkit"]["best"] / row["tf.data"]["best"], 2)
        row["ratio_median"] = round(row["recordkit"]["median"] / row["tf.data"]["median"], 2)
        results[corpus] = row
        print(f"{corpus} ({kind}, {row['mb']} MB, TF {version}, load {loads[1:]}): "
              f"recordkit best {row['recordkit']['best']} s median {row['recordkit']['median']} s; "
              f"tf.data best {row['tf.data']['best']} s median {row['tf.data']['median']} s; "
              f"recordkit / tf.data {row['ratio_best']} best, {row['ratio_median']} median (goal <= 0.8)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": time.strftime("%Y-%m-%d", time.gmtime()), "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
