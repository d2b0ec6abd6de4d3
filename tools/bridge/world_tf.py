#!/usr/bin/env python3
"""TensorFlow writes the ``tf.train.Example`` test files of tests/data/world/, and reads recordkit's Examples.

    python tools/bridge/world_tf.py [--venv /tmp/rk-tf-venv] [--work /tmp/rk-world-tf]

(with recordkit's interpreter, e.g. .venv/bin/python). Creates a venv with tensorflow-cpu under
/tmp on first use (1.3 GB), then, in that venv:

* ``tf.io.TFRecordWriter`` writes the files TensorFlow users have, with ``tf.train.Example``
  records built with ``tf.train``: ``tf_example.tfrecord`` (a float_list of 4, an int64 label, a
  scalar float, an int64 id) and ``tf_example_image.tfrecord`` (a PNG from ``tf.io.encode_png``
  as a bytes feature, an int64 label, a float_list of 2); every value the writer was given goes
  to ``tf_example_truth.json``. These go to tests/data/world/ (committed: tests/test_world_data.py
  reads them with no ``--stream`` and compares every value);
* ``tf.data.TFRecordDataset`` + ``tf.io.parse_single_example`` read ``recordkit convert --to
  tfrecord`` of a one-sample CTF corpus (written as Examples) and compare every value with
  ``recordkit cat`` of the source.

Writes tools/bridge/results/world_tf.json. Not part of CI (TensorFlow is too heavy for it).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

WORLD = os.path.join(_common.REPO, "tests", "data", "world")


def write_stage(out: str) -> dict:
    """Runs inside the TensorFlow venv: the files of tests/data/world/ and their truth."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(2024)
    truth = {}

    def feature(kind, values):
        if kind == "float":
            return tf.train.Feature(float_list=tf.train.FloatList(value=values))
        if kind == "int":
            return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))

    rows = []
    with tf.io.TFRecordWriter(os.path.join(out, "tf_example.tfrecord")) as w:
        for i in range(40):
            x = rng.normal(size=4).astype(np.float32).tolist()  # float32 values: what float_list holds
            row = {"x": x, "label": [int(rng.integers(0, 10))], "weight": [float(np.float32(0.25 * i))],
                   "id": [16_777_216 - i if i % 2 else -i]}  # up to 2^24: exact in float32
            ex = tf.train.Example(features=tf.train.Features(feature={
                "x": feature("float", row["x"]), "label": feature("int", row["label"]),
                "weight": feature("float", row["weight"]), "id": feature("int", row["id"])}))
            w.write(ex.SerializeToString())
            rows.append(row)
    truth["tf_example.tfrecord"] = rows
    rows = []
    with tf.io.TFRecordWriter(os.path.join(out, "tf_example_image.tfrecord")) as w:
        for i in range(6):
            pixels = rng.integers(0, 256, size=(2, 3, 3)).astype(np.uint8)
            png = tf.io.encode_png(pixels).numpy()
            row = {"label": [i % 3], "x": [float(i), float(np.float32(i / 3))]}
            ex = tf.train.Example(features=tf.train.Features(feature={
                "image": feature("bytes", [png]), "label": feature("int", row["label"]),
                "x": feature("float", row["x"])}))
            w.write(ex.SerializeToString())
            rows.append(dict(row, image_bytes=len(png)))
    truth["tf_example_image.tfrecord"] = rows
    with open(os.path.join(out, "tf_example_truth.json"), "w") as f:
        json.dump({"writer": f"tensorflow {tf.__version__} tf.io.TFRecordWriter", "files": truth}, f, indent=0)
        f.write("\n")
    return {"version": tf.__version__, "files": {k: len(v) for k, v in truth.items()}}


def check_stage(work: str) -> dict:
    """Runs inside the TensorFlow venv: recordkit's Examples parsed by TensorFlow."""
    import numpy as np
    import tensorflow as tf
    want = _common.expected(work)
    out = os.path.join(work, "examples")
    files = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".tfrecord"))
    spec = {"key": tf.io.FixedLenFeature([1], tf.int64), "feat": tf.io.FixedLenFeature([4], tf.float32),
            "lab": tf.io.FixedLenFeature([1], tf.float32)}
    records, mismatches = 0, []
    for raw, r in zip(tf.data.TFRecordDataset(files), want):
        got = tf.io.parse_single_example(raw, spec)
        ok = (int(got["key"].numpy()[0]) == r["key"]
              and np.array_equal(got["feat"].numpy(), np.float32(r["feat"][0]))
              and np.array_equal(got["lab"].numpy(), np.float32(r["lab"][0])))
        if not ok:
            mismatches.append(r["key"])
        records += 1
    if records != len(want):
        mismatches.append(f"{records} records read, {len(want)} written")
    return {"library": "tensorflow", "version": tf.__version__, "records_read": records, "mismatches": mismatches}


def one_sample_corpus(work: str) -> None:
    """A CTF corpus of one-sample sequences, converted to TFRecord (Examples: ``--tfrecord-kind`` auto)."""
    import numpy as np
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(5)
    path = os.path.join(work, "one.ctf")
    with open(path, "w") as f:
        for k in range(60):
            x = " ".join(f"{v:.6g}" for v in rng.normal(size=4))
            f.write(f"{k} |feat {x} |lab {int(rng.integers(0, 5))}\n")
    streams = ["--stream", "feat=dense:4", "--stream", "lab=dense:1"]
    out = os.path.join(work, "examples")
    shutil.rmtree(out, ignore_errors=True)
    _common.recordkit("convert", path, out, "--to", "tfrecord", "--tfrecord-kind", "example", *streams)
    with open(os.path.join(work, "expected.jsonl"), "w") as f:
        f.write(_common.recordkit("cat", path, *streams))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default="/tmp/rk-tf-venv")
    ap.add_argument("--work", default="/tmp/rk-world-tf")
    ap.add_argument("--stage", choices=["all", "write", "check"], default="all")
    args = ap.parse_args()
    if args.stage == "write":
        print(json.dumps(write_stage(args.work)))
        return 0
    if args.stage == "check":
        print(json.dumps(check_stage(args.work)))
        return 0
    one_sample_corpus(args.work)
    python = _common.make_venv(args.venv, ["tensorflow-cpu", "numpy"])
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    results = {}
    os.makedirs(WORLD, exist_ok=True)
    for stage, where in (("write", WORLD), ("check", args.work)):
        p = subprocess.run([python, os.path.abspath(__file__), "--stage", stage, "--work", where],
                           capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(f"TensorFlow {stage} stage failed:\n{p.stderr[-4000:]}")
        results[stage] = json.loads(p.stdout.strip().splitlines()[-1])
    result = {"tensorflow_wrote": results["write"], "recordkit_examples_to_tensorflow": results["check"],
              "ok": not results["check"]["mismatches"] and results["check"]["records_read"] > 0}
    print(_common.save("world_tf.json", result))
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
