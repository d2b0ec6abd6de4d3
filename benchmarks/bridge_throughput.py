#!/usr/bin/env python3
"""The bridge's speed: conversion MB/s per target format beside CTF -> CBF, and reading
Parquet back through MinibatchSource beside pyarrow's own ``iter_batches``.

    python benchmarks/bridge_throughput.py [--data-dir bench-data] [--mb 100] [--repeat 3]
                                           [--only dense,sparse,seq] [--targets cbf,parquet,hf] [--json OUT]

Per corpus (benchmarks/gen_ctf_corpora.py, generated into --data-dir if missing), in one fresh
interpreter per corpus, alternating the targets so that machine load hits all alike, --repeat
times each, best reported:

* convert: ``recordkit.cli.main.main(["convert", IN, OUT, "--to", T, "--precision", "float",
  "--stream", ...])``: the command a user runs, from opening the input to the output renamed into
  place (fsync included); MB/s of CTF input (10^6 bytes), and the ratio to CTF -> CBF (goal >= 0.50);
* read: the Parquet file just written, once through ``MinibatchSource(ParquetDeserializer(path),
  randomize=False, max_sweeps=1).next_minibatch(1024)`` until the end (every stream gathered into
  minibatches: dense padded + mask, sparse CSR), once through ``pyarrow.parquet.ParquetFile(path)
  .iter_batches(1024)`` converted to NumPy (``to_numpy`` of every leaf, the least a consumer needs);
  the ratio engine/pyarrow time (goal <= 1.5); and the CBF conversion through the same
  MinibatchSource, which shows what the engine itself costs (packing minibatches of 1024 samples:
  for ``seq``, ~15 samples per sequence, 15x more minibatches than pyarrow's batches of 1024 rows).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_ctf_corpora as gen  # noqa: E402

SNIPPET = textwrap.dedent("""
    import contextlib, io, json, os, shutil, sys, time
    path, outdir, streams, targets, repeat = json.loads(sys.argv[1])
    from recordkit.cli.main import main
    stream_args = []
    for s in streams:
        stream_args += ["--stream", "%s=%s:%d:%s" % (s["name"], s["format"], s["dim"], s["alias"])]
    ext = {"cbf": ".cbf", "parquet": ".parquet", "ctf": ".ctf"}

    def out_of(t):
        return os.path.join(outdir, "bench-" + t + ext.get(t, ""))

    def convert(t):
        out = out_of(t)
        if os.path.isdir(out):
            shutil.rmtree(out)
        elif os.path.exists(out):
            os.remove(out)
        err = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            rc = main(["convert", path, out, "--to", t, "--precision", "float", *stream_args])
        dt = time.perf_counter() - t0
        if rc:
            sys.exit("recordkit convert --to %s failed with %s: %s" % (t, rc, err.getvalue()))
        return dt

    def size(p):
        if os.path.isdir(p):
            return sum(os.path.getsize(os.path.join(p, n)) for n in os.listdir(p))
        return os.path.getsize(p)

    def read_engine(p, cls=None, size=1024):
        from recordkit.engine.source import MinibatchSource
        from recordkit.formats.parquet import ParquetDeserializer
        t0 = time.perf_counter()
        n = samples = 0
        with (cls or ParquetDeserializer)(p) as r, MinibatchSource(r, randomize=False, max_sweeps=1) as src:
            while (mb := src.next_minibatch(size)) is not None:
                n += mb.num_sequences
                samples += mb.num_samples
        read_engine.samples = samples
        return time.perf_counter() - t0, n

    def read_pyarrow(p):
        import pyarrow as pa, pyarrow.parquet as pq
        def leaves(a):
            while True:
                if isinstance(a, pa.StructArray):
                    for f in a.flatten():
                        yield from leaves(f)
                    return
                if pa.types.is_list(a.type) or pa.types.is_fixed_size_list(a.type) or pa.types.is_large_list(a.type):
                    a = a.flatten()
                    continue
                yield a
                return
        t0 = time.perf_counter()
        n = 0
        f = pq.ParquetFile(p)
        for batch in f.iter_batches(1024):
            for col in batch.columns:
                for leaf in leaves(col):
                    leaf.to_numpy(zero_copy_only=False)
            n += batch.num_rows
        return time.perf_counter() - t0, n

    import pyarrow  # imported once up front (as in a running job), not timed in the first conversion
    conv = {t: [] for t in targets}
    reads = {"engine": [], "pyarrow": [], "engine_cbf": [], "engine_rows": []}
    for _ in range(repeat):
        for t in targets:
            conv[t].append(convert(t))
        if "parquet" in targets:
            dt, n1 = read_engine(out_of("parquet"))
            reads["engine"].append(dt)
            # like for like: minibatches of as many samples as 1024 sequences hold on average, so the
            # engine delivers about as many sequences per minibatch as pyarrow's 1024-row batches
            rows_size = max(1024, round(1024 * read_engine.samples / n1))
            dt, _ = read_engine(out_of("parquet"), size=rows_size)
            reads["engine_rows"].append(dt)
            dt, n2 = read_pyarrow(out_of("parquet"))
            reads["pyarrow"].append(dt)
            assert n1 == n2, (n1, n2)
            from recordkit.formats.cbf import CBFReader
            dt, n3 = read_engine(out_of("cbf"), CBFReader)
            reads["engine_cbf"].append(dt)
            assert n1 == n3, (n1, n3)
    print(json.dumps({"convert_s": conv, "read_s": reads, "bytes_in": os.path.getsize(path),
                      "bytes_out": {t: size(out_of(t)) for t in targets}}))
    for t in targets:
        p = out_of(t)
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
""")


def run(ctf, outdir, streams, targets, repeat):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps([ctf, outdir, streams, targets, repeat])],
                       capture_output=True, text=True, env=env)
    if p.returncode != 0:
        lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
        return {"error": lines[-1] if lines else "failed"}
    for line in reversed(p.stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": "no result"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data"))
    ap.add_argument("--mb", type=float, default=100, help="corpus size in MiB when generating (default 100)")
    ap.add_argument("--only", default=None, help="comma-separated subset of: dense,sparse,seq")
    ap.add_argument("--targets", default="cbf,parquet,hf", help="formats to convert to (cbf first: the baseline)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else list(gen.GENERATORS)
    targets = args.targets.split(",")
    if targets[0] != "cbf":
        targets = ["cbf"] + [t for t in targets if t != "cbf"]
    meta = gen.generate(args.data_dir, args.mb, only=names, force=False)
    rows = []
    for name in names:
        print("[%s] convert to %s x%d ..." % (name, ", ".join(targets), args.repeat), file=sys.stderr, flush=True)
        outdir = os.path.join(args.data_dir, "bridge-out")
        os.makedirs(outdir, exist_ok=True)
        r = run(gen.corpus_path(args.data_dir, name), outdir, meta[name]["streams"], targets, args.repeat)
        shutil.rmtree(outdir, ignore_errors=True)
        r["corpus"] = name
        rows.append(r)

    print()
    print("convert = `recordkit convert IN OUT --to T --precision float --stream ...` (main(); fsync + rename "
          "included); best of %d, alternating; MB/s of CTF input (10^6 bytes)" % args.repeat)
    hdr = ["corpus", "CTF MB"] + ["%s MB/s" % t for t in targets] + ["%s/cbf" % t for t in targets[1:]] + \
          ["%s MB" % t for t in targets]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        if "error" in r:
            print("| %s | failed: %s |" % (r["corpus"], r["error"]))
            continue
        mb = r["bytes_in"] / 1e6
        best = {t: min(r["convert_s"][t]) for t in targets}
        cells = [r["corpus"], "%.1f" % mb] + ["%.0f" % (mb / best[t]) for t in targets] + \
                ["%.2f" % (best["cbf"] / best[t]) for t in targets[1:]] + \
                ["%.1f" % (r["bytes_out"][t] / 1e6) for t in targets]
        print("| " + " | ".join(cells) + " |")
    if "parquet" in targets:
        print()
        print("read the Parquet output: MinibatchSource(ParquetDeserializer).next_minibatch(1024) vs "
              "pyarrow ParquetFile.iter_batches(1024) + to_numpy of every leaf; best of %d" % args.repeat)
        print("(engine over CBF: the same MinibatchSource reading the CBF conversion, the engine's own cost)")
        print("(engine, 1024 sequences: minibatches of 1024 x the mean sequence length in samples, as many "
              "sequences as pyarrow's batches of 1024 rows)")
        print("| corpus | engine s | pyarrow s | engine/pyarrow | engine, 1024 sequences s | that/pyarrow "
              "| engine over CBF s |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            if "error" in r:
                continue
            e, p, c = min(r["read_s"]["engine"]), min(r["read_s"]["pyarrow"]), min(r["read_s"]["engine_cbf"])
            q = min(r["read_s"]["engine_rows"])
            print("| %s | %.3f | %.3f | %.2f | %.3f | %.2f | %.3f |" % (r["corpus"], e, p, e / p, q, q / p, c))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "repeat": args.repeat, "cpus": os.cpu_count()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
