#!/usr/bin/env python3
"""OFRecord: read and write throughput of recordkit vs OneFlow 0.9 and a plain protobuf loop.

    .venv/bin/python benchmarks/ofrecord_throughput.py [--data-dir bench-data/ofrecord_mnist]
        [--records 60000] [--batch-size 256] [--repeat 2] [--write-records 20000] [--skip-oracle]
        [--profile-batches 60] [--json OUT.json]

Data set (generated once into --data-dir, gitignored bench-data/, with recordkit's OFRecordWriter):
MNIST-like, --records records of ``images`` = 784 float32 (uniform random) and ``labels`` = one int64
(the docs tutorial's int64_feature; OneFlow's image-classification converters use int32 instead),
round robin over 4 parts part-00000..part-00003 (~190 MB). numpy PCG64, seed 60000.

Read, one epoch each, batches of --batch-size, records/s (each in a fresh process, best of --repeat):

1. OneFlow 0.9.0: benchmarks/oracle_ofrecord_read.py under /work/shared/tools/oneflow-oracle (best of
   max(4, --repeat) reads in one process: its first read, with thread start-up, is 3-10x slower)
   (C++ OFRecordReader + two OFRecordRawDecoders, eager, CPU, .numpy() per batch; ceil(N/B) batches);
2. the plain Python loop of the OneFlow docs (read the 8-byte length, ParseFromString, np.array of
   the float list and the label), stacked into batches of B: (2a) in recordkit's venv with the
   protobuf package installed there (upb backend) and recordkit's schema classes; (2b) under the
   oracle with OneFlow's record_pb2 (protobuf 3.20.3, cpp backend);
3. recordkit: ``OFRecordReader(dir, batch_size=B, epochs=1)`` + ``decoders.raw_decode(batch, "images",
   (784,), np.float32)`` and ``raw_decode(batch, "labels", (), np.int64)`` (falls back to np.stack of
   the feature values when the decoders module is missing).

Write (--write-records records, same content, into a temp dir under --data-dir, best of --repeat):
recordkit ``OFRecordWriter(dir, 4)`` + ``write({"images": float32 array, "labels": int})`` vs the
Python loop of OneFlow's tools (build OFRecord(feature={...}) with FloatList/Int64List, SerializeToString,
struct.pack("q") + payload, round robin over 4 files). records/s and MB/s of file bytes written.

Finally a cProfile of recordkit's read over --profile-batches batches (top entries by tottime).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ORACLE = "/work/shared/tools/oneflow-oracle"
DIM = 784

GEN_SNIPPET = textwrap.dedent("""
    import json, sys, time, numpy as np
    out, n, seed = json.loads(sys.argv[1])
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    rng = np.random.default_rng(seed)
    with OFRecordWriter(out, 4) as w:
        for start in range(0, n, 1000):
            imgs = rng.random((min(1000, n - start), %d), dtype=np.float32)
            labs = rng.integers(0, 10, len(imgs))
            for x, y in zip(imgs, labs):
                w.write({"images": x, "labels": int(y)})
""" % DIM)

RK_BATCHES_SNIPPET = textwrap.dedent("""
    import json, sys, time, numpy as np
    d, bs, repeat, n_expected = json.loads(sys.argv[1])
    from recordkit.formats.ofrecord.reader import OFRecordReader
    spec = {"images": ((%d,), np.float32), "labels": ((), np.int64)}
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = 0
        for b in OFRecordReader(d, batch_size=bs, epochs=1, rank=0, world_size=1).batches(spec):
            n += len(b["labels"])
        times.append(time.perf_counter() - t0)
    assert n == n_expected, (n, n_expected)
    print(json.dumps({"seconds": min(times), "per_repeat": times, "records": n}))
""" % DIM)

RK_READ_SNIPPET = textwrap.dedent("""
    import json, math, sys, time, numpy as np
    d, bs, repeat, n_expected = json.loads(sys.argv[1])
    from recordkit.formats.ofrecord.reader import OFRecordReader
    try:
        from recordkit.compat.oneflow import ops as decoders
    except ImportError:
        decoders = None
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = 0
        for batch in OFRecordReader(d, batch_size=bs, epochs=1, rank=0, world_size=1):
            if decoders is not None:
                x = decoders.raw_decode(batch, "images", (%d,), np.float32)
                y = decoders.raw_decode(batch, "labels", (), np.int64)
            else:
                x = np.stack([r["images"].value for r in batch]); y = np.stack([r["labels"].value[0] for r in batch])
            n += len(x)
        times.append(time.perf_counter() - t0)
    assert n == n_expected, (n, n_expected)
    print(json.dumps({"seconds": min(times), "per_repeat": times, "records": n, "decoders": decoders is not None}))
""" % DIM)

PY_LOOP_SNIPPET = textwrap.dedent("""
    import json, os, struct, sys, time, numpy as np
    d, bs, repeat, n_expected, which = json.loads(sys.argv[1])
    if which == "oneflow":
        saved, sys.stdout = sys.stdout, sys.stderr
        import oneflow.core.record.record_pb2 as pb
        sys.stdout = saved
    else:
        from recordkit.formats.ofrecord import schema as pb
    from google.protobuf.internal import api_implementation
    import google.protobuf
    parts = sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("part-"))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        n = 0
        imgs, labs = [], []
        for p in parts:
            with open(p, "rb") as f:
                while True:
                    head = f.read(8)
                    if not head:
                        break
                    (length,) = struct.unpack("q", head)
                    rec = pb.OFRecord()
                    rec.ParseFromString(f.read(length))
                    imgs.append(np.array(rec.feature["images"].float_list.value, dtype=np.float32))
                    labs.append(rec.feature["labels"].int64_list.value[0])
                    if len(imgs) == bs:
                        x = np.stack(imgs); y = np.array(labs, dtype=np.int64); n += len(x); imgs, labs = [], []
        if imgs:
            x = np.stack(imgs); n += len(x)
        times.append(time.perf_counter() - t0)
    assert n == n_expected, (n, n_expected)
    print(json.dumps({"seconds": min(times), "per_repeat": times, "records": n,
                      "protobuf": google.protobuf.__version__ + " " + api_implementation.Type()}))
""")

WRITE_SNIPPET = textwrap.dedent("""
    import json, os, shutil, struct, sys, time, numpy as np
    tmp, n, repeat, which = json.loads(sys.argv[1])
    rng = np.random.default_rng(7)
    imgs = rng.random((n, %d), dtype=np.float32)
    labs = rng.integers(0, 10, n).tolist()
    times = []
    for _ in range(repeat):
        out = os.path.join(tmp, which)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        t0 = time.perf_counter()
        if which == "recordkit":
            from recordkit.formats.ofrecord.writer import OFRecordWriter
            with OFRecordWriter(out, 4) as w:
                for x, y in zip(imgs, labs):
                    w.write({"images": x, "labels": y})
        else:
            from recordkit.formats.ofrecord import schema as pb
            files = [open(os.path.join(out, "part-%%05d" %% k), "wb") for k in range(4)]
            for i, (x, y) in enumerate(zip(imgs, labs)):
                rec = pb.OFRecord(feature={"images": pb.Feature(float_list=pb.FloatList(value=x.tolist())),
                                           "labels": pb.Feature(int64_list=pb.Int64List(value=[y]))})
                s = rec.SerializeToString()
                files[i %% 4].write(struct.pack("q", len(s)) + s)
            for f in files:
                f.close()
        times.append(time.perf_counter() - t0)
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    print(json.dumps({"seconds": min(times), "per_repeat": times, "records": n, "bytes": size}))
""" % DIM)

PROFILE_SNIPPET = textwrap.dedent("""
    import cProfile, io, itertools, json, pstats, sys, numpy as np
    d, bs, nb = json.loads(sys.argv[1])
    from recordkit.formats.ofrecord.reader import OFRecordReader
    from recordkit.compat.oneflow import ops as decoders
    def run():
        for batch in itertools.islice(OFRecordReader(d, batch_size=bs, epochs=1, rank=0, world_size=1), nb):
            decoders.raw_decode(batch, "images", (%d,), np.float32)
            decoders.raw_decode(batch, "labels", (), np.int64)
    pr = cProfile.Profile()
    pr.enable(); run(); pr.disable()
    s = io.StringIO()
    st = pstats.Stats(pr, stream=s)
    total = st.total_tt
    rows = []
    for (fn, line, name), (cc, nc, tt, ct, callers) in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:12]:
        rows.append({"function": "%%s:%%d(%%s)" %% (fn.replace(sys.prefix, "<venv>").split("/src/")[-1], line, name),
                     "ncalls": nc, "tottime": tt, "cumtime": ct, "share": tt / total})
    print(json.dumps({"total": total, "records": nb * bs, "top": rows}))
""" % DIM)


def run_json(cmd, arg, env=None) -> dict:
    p = subprocess.run(cmd + [json.dumps(arg)] if arg is not None else cmd, capture_output=True, text=True,
                       cwd=REPO, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "ofrecord_mnist"))
    ap.add_argument("--records", type=int, default=60000)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--write-records", type=int, default=20000)
    ap.add_argument("--profile-batches", type=int, default=60)
    ap.add_argument("--skip-oracle", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(REPO, "src"), os.environ.get("PYTHONPATH", "")]))
    py = [sys.executable, "-c"]
    d = a.data_dir
    stamp = os.path.join(d, "bench.json")
    meta = {"records": a.records, "dim": DIM, "parts": 4, "seed": 60000, "labels": "int64"}
    if not (os.path.exists(stamp) and json.load(open(stamp)) == meta):
        shutil.rmtree(d, ignore_errors=True)
        print(f"generating {d} ({a.records} records) ...", flush=True)
        run_json(py + [GEN_SNIPPET + "\nprint('{}')"], [d, a.records, 60000], env)
        json.dump(meta, open(stamp, "w"))
    size = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.startswith("part-"))
    res = {"data_dir": d, "bytes": size, "records": a.records, "batch_size": a.batch_size}
    print(f"data set: {a.records} records, 4 parts, {size / 1e6:.1f} MB; batches of {a.batch_size}", flush=True)

    nb = math.ceil(a.records / a.batch_size)
    rows = []
    if not a.skip_oracle:
        r = run_json([ORACLE, "python", os.path.join(HERE, "oracle_ofrecord_read.py"), d, "--records", str(a.records),
                      "--batch-size", str(a.batch_size), "--repeat", str(max(4, a.repeat))], None)
        rows.append(("OneFlow 0.9.0 C++ reader + 2 raw decoders (.numpy())", r["seconds"], r["records_pulled"]))
        res["oneflow"] = r
        r = run_json([ORACLE, "python", "-c", PY_LOOP_SNIPPET], [d, a.batch_size, a.repeat, a.records, "oneflow"])
        rows.append((f"Python loop, OneFlow record_pb2 (protobuf {r['protobuf']})", r["seconds"], r["records"]))
        res["pyloop_oneflow"] = r
    r = run_json(py + [PY_LOOP_SNIPPET], [d, a.batch_size, a.repeat, a.records, "recordkit"], env)
    rows.append((f"Python loop, protobuf {r['protobuf']}", r["seconds"], r["records"]))
    res["pyloop_venv"] = r
    r = run_json(py + [RK_READ_SNIPPET], [d, a.batch_size, a.repeat, a.records], env)
    rows.append(("recordkit OFRecordReader + raw_decode (records path)" if r["decoders"]
                 else "recordkit OFRecordReader + np.stack", r["seconds"], r["records"]))
    res["recordkit"] = r
    r = run_json(py + [RK_BATCHES_SNIPPET], [d, a.batch_size, a.repeat, a.records], env)
    rows.append(("recordkit OFRecordReader.batches (compiled wire decoder)", r["seconds"], r["records"]))
    res["recordkit_batches"] = r

    base = rows[0][2] / rows[0][1]
    print(f"\nRead, one epoch ({nb} batches of {a.batch_size}):\n")
    print("| reader | s | records/s | MB/s | vs first row |\n|---|---:|---:|---:|---:|")
    for name, s, n in rows:
        print(f"| {name} | {s:.2f} | {n / s:,.0f} | {size * n / a.records / s / 1e6:.0f} | {n / s / base:.2f}x |")
    res["read_table"] = [{"reader": n_, "seconds": s, "records_per_s": n / s} for n_, s, n in rows]

    tmp = tempfile.mkdtemp(prefix="write-", dir=os.path.dirname(d))
    try:
        w_rows = []
        for which, label in (("recordkit", "recordkit OFRecordWriter(dir, 4).write({...})"),
                             ("pyloop", "Python loop: OFRecord(...).SerializeToString() + struct.pack('q')")):
            r = run_json(py + [WRITE_SNIPPET], [tmp, a.write_records, a.repeat, which], env)
            w_rows.append((label, r))
            res["write_" + which] = r
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nWrite, {a.write_records} records of 784 float32 + int64 label, 4 parts:\n")
    print("| writer | s | records/s | MB/s | vs Python loop |\n|---|---:|---:|---:|---:|")
    loop_rate = w_rows[1][1]["records"] / w_rows[1][1]["seconds"]
    for label, r in w_rows:
        rate = r["records"] / r["seconds"]
        print(f"| {label} | {r['seconds']:.2f} | {rate:,.0f} | {r['bytes'] / r['seconds'] / 1e6:.0f} | {rate / loop_rate:.2f}x |")

    if a.profile_batches:
        try:
            r = run_json(py + [PROFILE_SNIPPET], [d, a.batch_size, a.profile_batches], env)
        except RuntimeError as e:
            print(f"\n(profile skipped: {e})")
        else:
            res["profile"] = r
            print(f"\ncProfile, recordkit read of {r['records']} records (total {r['total']:.2f} s under the profiler), "
                  f"top entries by own time:\n")
            print("| function | calls | own s | own share | cum s |\n|---|---:|---:|---:|---:|")
            for t in r["top"]:
                print(f"| `{t['function']}` | {t['ncalls']} | {t['tottime']:.3f} | {t['share']:.0%} | {t['cumtime']:.3f} |")
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
