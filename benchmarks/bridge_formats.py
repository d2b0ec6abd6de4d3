#!/usr/bin/env python3
"""Conversion speed to WebDataset, TFRecord and MDS beside CTF -> CBF on the same corpus,
and reading each format back through MinibatchSource.

    python benchmarks/bridge_formats.py [--data-dir bench-data] [--mb 100] [--repeat 2]
                                        [--only dense,sparse,seq] [--formats webdataset,tfrecord,mds]
                                        [--json OUT.json]

Per corpus (benchmarks/gen_ctf_corpora.py), in one fresh interpreter per corpus, --repeat times each
(best reported), alternating the targets so machine load hits them alike:

* convert: ``recordkit.cli.main.main(["convert", IN, OUT, "--to", X, "--stream", ...])`` from opening
  the input to the published output (fsync included), for X = cbf and each bridge format; MB/s of
  CTF input (MB = 10^6 bytes) and the ratio to CTF -> CBF (goal: >= 0.50x);
* read: ``MinibatchSource(reader, randomize=False, max_sweeps=1)`` over the converted output,
  minibatches of 2048 samples, samples/s (CBF beside it).

Output sizes are reported too: WebDataset's tar members cost 512 bytes of header each and are padded
to 512-byte blocks, which dominates for small sparse samples.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_ctf_corpora as gen  # noqa: E402

FORMATS = ["webdataset", "tfrecord", "mds"]

SNIPPET = textwrap.dedent("""
    import contextlib, io, json, os, resource, shutil, sys, time
    path, outdir, streams, formats, repeat = json.loads(sys.argv[1])
    from recordkit.cli.main import main
    from recordkit.engine.source import MinibatchSource
    stream_args = []
    for s in streams:
        stream_args += ["--stream", "%s=%s:%d:%s" % (s["name"], s["format"], s["dim"], s["alias"])]

    def out_of(fmt):
        return os.path.join(outdir, "bridge-bench." + ("cbf" if fmt == "cbf" else fmt))

    def size(p):
        if os.path.isdir(p):
            return sum(os.path.getsize(os.path.join(p, n)) for n in os.listdir(p))
        return os.path.getsize(p)

    def convert(fmt):
        out = out_of(fmt)
        if os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.remove(out)
        err = io.StringIO()
        c0 = cpu()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            rc = main(["convert", path, out, "--precision", "float", "--to", fmt] + stream_args)
        dt = time.perf_counter() - t0
        if rc:
            sys.exit("convert to %s failed: %s" % (fmt, err.getvalue()))
        return dt, cpu() - c0

    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    def read(fmt):
        out = out_of(fmt)
        if fmt == "cbf":
            from recordkit.formats.cbf import CBFReader
            r = CBFReader(out)
        elif fmt == "webdataset":
            from recordkit.formats.webdataset import WebDatasetReader
            r = WebDatasetReader(out)
        elif fmt == "tfrecord":
            from recordkit.formats.tfrecord import TFRecordReader
            r = TFRecordReader(out)
        else:
            from recordkit.formats.mds import MDSReader
            r = MDSReader(out)
        c0 = cpu()
        t0 = time.perf_counter()
        src = MinibatchSource(r, randomize=False, max_sweeps=1)
        n = 0
        while (mb := src.next_minibatch(2048)) is not None:
            n += int(mb.lengths.sum())
        return time.perf_counter() - t0, n, cpu() - c0

    targets = ["cbf"] + formats
    conv = {f: [] for f in targets}
    conv_cpu = {f: [] for f in targets}
    for _ in range(repeat):
        for f in targets:
            dt, c = convert(f)
            conv[f].append(dt)
            conv_cpu[f].append(c)
    result = {"bytes_in": os.path.getsize(path), "convert_s": conv, "convert_cpu_s": conv_cpu,
              "bytes_out": {f: size(out_of(f)) for f in targets}, "read_s": {}, "samples": {}}
    result["read_cpu_s"] = {}
    for f in targets:
        best = best_cpu = None
        for _ in range(repeat):
            dt, n, c = read(f)
            best = dt if best is None else min(best, dt)
            best_cpu = c if best_cpu is None else min(best_cpu, c)
        result["read_s"][f] = best
        result["read_cpu_s"][f] = best_cpu
        result["samples"][f] = n
    for f in targets:
        out = out_of(f)
        shutil.rmtree(out) if os.path.isdir(out) else os.remove(out)
    print(json.dumps(result))
""")


def run(ctf, outdir, streams, formats, repeat):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps([ctf, outdir, streams, formats, repeat])],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else "failed"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data"))
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--only", default=None, help="comma-separated subset of: dense,sparse,seq")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(gen.GENERATORS)
    formats = args.formats.split(",")
    meta = gen.generate(args.data_dir, args.mb, only=names, force=False)
    rows = []
    print("| corpus | target | convert MB/s (CTF input) | vs CTF->CBF | CPU s | vs CTF->CBF (CPU) | output MB "
          "| read samples/s (MinibatchSource) | read CPU s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in names:
        ctf = gen.corpus_path(args.data_dir, name)
        print(f"[{name}] converting ...", file=sys.stderr, flush=True)
        streams = meta[name]["streams"]
        r = run(ctf, args.data_dir, streams, formats, args.repeat)
        if "error" in r:
            print(f"| {name} | - | error: {r['error']} | | | |")
            continue
        mb = r["bytes_in"] / 1e6
        base = mb / min(r["convert_s"]["cbf"])
        base_cpu = min(r["convert_cpu_s"]["cbf"])
        for f in ["cbf"] + formats:
            speed = mb / min(r["convert_s"][f])
            cpu_s = min(r["convert_cpu_s"][f])
            sps = r["samples"][f] / r["read_s"][f]
            print(f"| {name} | {f} | {speed:.0f} | {speed / base:.2f}x | {cpu_s:.2f} | {base_cpu / cpu_s:.2f}x "
                  f"| {r['bytes_out'][f] / 1e6:.0f} | {sps:,.0f} | {r['read_cpu_s'][f]:.2f} |")
            rows.append({"corpus": name, "target": f, "convert_mb_s": speed, "vs_cbf": speed / base,
                         "convert_cpu_s": cpu_s, "vs_cbf_cpu": base_cpu / cpu_s,
                         "bytes_out": r["bytes_out"][f], "read_samples_s": sps, "read_cpu_s": r["read_cpu_s"][f],
                         "samples": r["samples"][f]})
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
