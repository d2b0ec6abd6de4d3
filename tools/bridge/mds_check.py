#!/usr/bin/env python3
"""MosaicML Streaming reads recordkit's MDS output, and recordkit reads MosaicML's.

    python tools/bridge/mds_check.py [--venv /tmp/rk-mds-venv] [--work /tmp/rk-mds-check]

(with recordkit's interpreter). Creates a venv with mosaicml-streaming under /tmp on first use
(its numpy < 2.2 pin keeps it out of recordkit's venv; torch from the local CPU wheel, and an
empty stand-in for torchvision, which ``import streaming`` loads for its vision data sets only:
see ../shared/specs/peer-libraries.md), then:

* ``StreamingDataset(local=DIR, shuffle=False)`` reads every sample of ``recordkit convert --to mds``
  (several shards): ``key`` and the ``feat`` / ``lab.indices`` / ``lab.values`` / ``lab.offsets``
  arrays are compared with ``recordkit cat`` of the source, value by value;
* the same for ``recordkit convert --to mds --engine ray --parts 3`` (sets joined, index.json merged);
* ``streaming.MDSWriter`` writes a data set with the same column layout; ``recordkit cat`` reads it
  (with ``--stream``) and the values are compared.

Writes tools/bridge/results/mds_check.json. Not part of CI.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402


def _read_with_streaming(directory: str, want: list) -> tuple:
    """Every sample of the MDS set in ``directory`` read by ``StreamingDataset``, compared with
    ``want`` (recordkit cat of the source): (samples read, mismatches, values compared)."""
    import numpy as np
    from streaming import StreamingDataset
    ds = StreamingDataset(local=directory, shuffle=False, batch_size=1)
    records, mismatches, values = 0, [], 0
    for i in range(len(ds)):
        s = ds[i]
        r = want[i]
        feat = s["feat"]
        off = s["lab.offsets"]
        lab = [{"indices": s["lab.indices"][a:b].tolist(), "values": s["lab.values"][a:b].tolist()}
               for a, b in zip(off[:-1], off[1:])]
        exp_feat = np.array(r["feat"], dtype=np.float32).reshape(-1, 4)
        exp_lab = [{"indices": x["indices"], "values": np.float32(x["values"]).tolist()} for x in r["lab"]]
        ok = (int(s["key"]) == r["key"] and feat.dtype == np.float32 and np.array_equal(feat, exp_feat)
              and lab == exp_lab)
        values += exp_feat.size + sum(len(x["indices"]) * 2 for x in exp_lab) + 1
        if not ok:
            mismatches.append({"sample": i, "key": r["key"]})
        records += 1
    if records != len(want):
        mismatches.append({"samples_read": records, "expected": len(want)})
    return records, mismatches, values


def check_stage(work: str) -> dict:
    """Runs inside the mosaicml-streaming venv."""
    import numpy as np
    import streaming
    from streaming import MDSWriter
    want = _common.expected(work)
    records, mismatches, values = _read_with_streaming(os.path.join(work, "mds"), want)
    ray_records, ray_mismatches, _ = _read_with_streaming(os.path.join(work, "mds_ray"), want)
    # the other way: MosaicML writes (its writer refuses empty arrays: every sample has entries)
    rng = np.random.default_rng(13)
    theirs = os.path.join(work, "mds_written")
    import shutil
    shutil.rmtree(theirs, ignore_errors=True)  # MosaicML's writer refuses a non-empty directory
    truth = []
    columns = {"key": "uint64", "x": "ndarray:float32", "w.indices": "ndarray:int32", "w.values": "ndarray:float32",
               "w.offsets": "ndarray:int64"}
    with MDSWriter(out=theirs, columns=columns, size_limit=1 << 12) as w:
        for i in range(60):
            n = int(rng.integers(1, 5))
            x = rng.normal(size=(n, 3)).astype(np.float32)
            nnz = rng.integers(1, 4, size=n)
            ind = rng.integers(0, 30, size=int(nnz.sum())).astype(np.int32)
            val = rng.normal(size=len(ind)).astype(np.float32)
            off = np.concatenate([[0], np.cumsum(nnz)]).astype(np.int64)
            w.write({"key": np.uint64(700 + i), "x": x, "w.indices": ind, "w.values": val, "w.offsets": off})
            truth.append({"key": 700 + i, "x": x.tolist(),
                          "w": [{"indices": ind[a:b].tolist(), "values": val[a:b].tolist()}
                                for a, b in zip(off[:-1], off[1:])]})
    with open(os.path.join(work, "mds_truth.json"), "w") as f:
        json.dump(truth, f)
    return {"library": "mosaicml-streaming", "version": streaming.__version__, "samples_read": records,
            "values_compared": int(values), "mismatches": mismatches[:20], "mismatch_count": len(mismatches),
            "ray_joined": {"samples_read": ray_records, "mismatches": ray_mismatches[:20],
                           "mismatch_count": len(ray_mismatches)}}


def readback_stage(work: str) -> dict:
    import numpy as np
    truth = json.load(open(os.path.join(work, "mds_truth.json")))
    out = _common.recordkit("cat", os.path.join(work, "mds_written"), "--stream", "x=dense:3",
                            "--stream", "w=sparse:30")
    got = [json.loads(line) for line in out.splitlines()]
    mismatches = []
    for g, t in zip(got, truth):
        tw = [{"indices": s["indices"], "values": np.float32(s["values"]).tolist()} for s in t["w"]]
        gw = [{"indices": s["indices"], "values": np.float32(s["values"]).tolist()} for s in g["w"]]
        if g["key"] != t["key"] or not np.array_equal(np.float32(g["x"]), np.float32(t["x"])) or gw != tw:
            mismatches.append(t["key"])
    if len(got) != len(truth):
        mismatches.append(f"{len(got)} samples read, {len(truth)} written")
    return {"samples_read": len(got), "mismatches": mismatches}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default="/tmp/rk-mds-venv")
    ap.add_argument("--work", default="/tmp/rk-mds-check")
    ap.add_argument("--stage", choices=["all", "check"], default="all")
    args = ap.parse_args()
    if args.stage == "check":
        print(json.dumps(check_stage(args.work)))
        return 0
    _common.write_stage(args.work, "mds", ["--shard-size", "4000"])
    # the same data written by `--engine ray`: a set per write task, joined (index.json merged)
    ray_out = os.path.join(args.work, "mds_ray")
    import shutil
    shutil.rmtree(ray_out, ignore_errors=True)
    _common.recordkit("convert", os.path.join(args.work, "corpus.ctf"), ray_out, "--to", "mds", "--engine", "ray",
                      "--parts", "3", "--chunk-size", "2000", *_common.STREAMS)
    python = _common.make_venv(args.venv, ["mosaicml-streaming", "torch"], stub_torchvision=True)
    p = subprocess.run([python, os.path.abspath(__file__), "--stage", "check", "--work", args.work],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"MosaicML stage failed:\n{p.stderr[-4000:]}")
    lib = json.loads(p.stdout.strip().splitlines()[-1])
    back = readback_stage(args.work)
    result = {"recordkit_to_mosaicml": lib, "mosaicml_to_recordkit": back,
              "ok": lib["mismatch_count"] == 0 and not back["mismatches"] and lib["samples_read"] > 0
              and lib["ray_joined"]["mismatch_count"] == 0 and lib["ray_joined"]["samples_read"] == lib["samples_read"]}
    print(_common.save("mds_check.json", result))
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
