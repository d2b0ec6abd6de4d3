#!/usr/bin/env python3
"""TensorFlow reads recordkit's TFRecord output, and recordkit reads TensorFlow's.

    python tools/bridge/tf_check.py [--venv /tmp/rk-tf-venv] [--work /tmp/rk-tf-check]

(with recordkit's interpreter, e.g. .venv/bin/python). Creates a venv with tensorflow-cpu under
/tmp on first use (1.3 GB), then:

* ``tf.data.TFRecordDataset`` (which checks both CRCs of every record) +
  ``tf.io.parse_single_sequence_example`` read every record of ``recordkit convert --to tfrecord``
  (three parts): the key, the dense feature list (samples x 4) and the sparse ``lab.indices`` /
  ``lab.values`` feature lists are compared with ``recordkit cat`` of the source, value by value;
* ``tf.io.TFRecordWriter`` writes SequenceExamples built with ``tf.train``; ``recordkit cat`` reads
  them (with ``--stream``) and the values are compared.

Writes tools/bridge/results/tf_check.json. Not part of CI (TensorFlow is too heavy for it).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def check_stage(work: str) -> dict:
    """Runs inside the TensorFlow venv."""
    import numpy as np
    import tensorflow as tf
    want = _common.expected(work)
    out = os.path.join(work, "tfrecord")
    files = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".tfrecord"))
    ctx = {"key": tf.io.FixedLenFeature([1], tf.int64)}
    seq = {"feat": tf.io.FixedLenSequenceFeature([4], tf.float32),
           "lab.indices": tf.io.RaggedFeature(tf.int64), "lab.values": tf.io.RaggedFeature(tf.float32)}
    records, mismatches, values = 0, [], 0
    for raw, r in zip(tf.data.TFRecordDataset(files), want):
        c, s = tf.io.parse_single_sequence_example(raw, context_features=ctx, sequence_features=seq)
        key = int(np.int64(c["key"].numpy()[0]).view(np.uint64))
        feat = s["feat"].numpy()
        ind, val = s["lab.indices"], s["lab.values"]
        lab = [{"indices": list(i), "values": list(v)} for i, v in zip(ind.to_list(), val.to_list())]
        exp_feat = np.array(r["feat"], dtype=np.float32).reshape(-1, 4)
        exp_lab = [{"indices": x["indices"], "values": np.float32(x["values"]).tolist()} for x in r["lab"]]
        ok = key == r["key"] and feat.shape == exp_feat.shape and np.array_equal(feat, exp_feat) and lab == exp_lab
        values += exp_feat.size + sum(len(x["indices"]) * 2 for x in exp_lab) + 1
        if not ok:
            mismatches.append({"record": records, "key": r["key"]})
        records += 1
    if records != len(want):
        mismatches.append({"records_read": records, "expected": len(want)})
    # the other way: TensorFlow writes, recordkit reads (next stage)
    rng = np.random.default_rng(11)
    theirs = os.path.join(work, "tf_written.tfrecord")
    truth = []
    with tf.io.TFRecordWriter(theirs) as w:
        for i in range(50):
            n = int(rng.integers(1, 5))
            x = rng.normal(size=(n, 3)).astype(np.float32)
            ids = [sorted(rng.integers(0, 30, size=int(rng.integers(0, 4))).tolist()) for _ in range(n)]
            vals = [rng.normal(size=len(a)).astype(np.float32).tolist() for a in ids]
            ex = tf.train.SequenceExample()
            ex.context.feature["key"].int64_list.value.append(500 + i)
            for row in x:
                ex.feature_lists.feature_list["x"].feature.add().float_list.value.extend(row.tolist())
            for a, v in zip(ids, vals):
                ex.feature_lists.feature_list["w.indices"].feature.add().int64_list.value.extend(a)
                ex.feature_lists.feature_list["w.values"].feature.add().float_list.value.extend(v)
            w.write(ex.SerializeToString())
            truth.append({"key": 500 + i, "x": x.tolist(), "w": [{"indices": a, "values": v} for a, v in zip(ids, vals)]})
    with open(os.path.join(work, "tf_truth.json"), "w") as f:
        json.dump(truth, f)
    return {"library": "tensorflow", "version": tf.__version__, "records_read": records,
            "values_compared": int(values), "mismatches": mismatches[:20], "mismatch_count": len(mismatches)}


def readback_stage(work: str) -> dict:
    import numpy as np
    truth = json.load(open(os.path.join(work, "tf_truth.json")))
    out = _common.recordkit("cat", os.path.join(work, "tf_written.tfrecord"), "--stream", "x=dense:3",
                            "--stream", "w=sparse:30")
    got = [json.loads(line) for line in out.splitlines()]
    mismatches = []
    for g, t in zip(got, truth):
        tw = [{"indices": s["indices"], "values": np.float32(s["values"]).tolist()} for s in t["w"]]
        gw = [{"indices": s["indices"], "values": np.float32(s["values"]).tolist()} for s in g["w"]]
        if g["key"] != t["key"] or not np.array_equal(np.float32(g["x"]), np.float32(t["x"])) or gw != tw:
            mismatches.append(t["key"])
    if len(got) != len(truth):
        mismatches.append(f"{len(got)} records read, {len(truth)} written")
    return {"records_read": len(got), "mismatches": mismatches}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default="/tmp/rk-tf-venv")
    ap.add_argument("--work", default="/tmp/rk-tf-check")
    ap.add_argument("--stage", choices=["all", "check"], default="all")
    args = ap.parse_args()
    if args.stage == "check":
        print(json.dumps(check_stage(args.work)))
        return 0
    _common.write_stage(args.work, "tfrecord", ["--parts", "3"])
    python = _common.make_venv(args.venv, ["tensorflow-cpu", "numpy"])
    p = subprocess.run([python, os.path.abspath(__file__), "--stage", "check", "--work", args.work],
                       capture_output=True, text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    if p.returncode:
        raise SystemExit(f"TensorFlow stage failed:\n{p.stderr[-4000:]}")
    tf_result = json.loads(p.stdout.strip().splitlines()[-1])
    back = readback_stage(args.work)
    result = {"recordkit_to_tensorflow": tf_result, "tensorflow_to_recordkit": back,
              "ok": tf_result["mismatch_count"] == 0 and not back["mismatches"] and tf_result["records_read"] > 0}
    print(_common.save("tf_check.json", result))
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
