#!/usr/bin/env python3
"""CBF: recordkit CTF->CBF conversion speed, and CBF read throughput against CNTK 2.7.

    python benchmarks/cbf_throughput.py [--data-dir bench-data] [--mb 100] [--skip-oracle]
                                        [--threads 2] [--repeat 3] [--only dense,sparse,seq]
                                        [--ctf2bin-slice-mb 10] [--json OUT.json]

Per corpus (benchmarks/gen_ctf_corpora.py, generated into bench-data/ if missing):

1. convert <corpus>.ctf -> <corpus>.cbf (float) with `recordkit convert ... --stream ...`
   (in a fresh interpreter, timed around the CLI's main(); best of --repeat); MB/s of CTF input;
2. recordkit's CTF read of the same corpus (ctf_throughput.py's snippet), the conversion's goal;
3. the CBF read: CNTK 2.7 (benchmarks/oracle_cbf_read.py under the oracle: MinibatchSource(
   CBFDeserializer), randomize=False, max_sweeps=1, best of several minibatch sizes) vs recordkit
   `CBFReader(path).iter_chunks(threads=2)`, each in a fresh process, best of --repeat;
4. for context, a pure-Python loop doing what CNTK's Scripts/ctf2bin.py does per line (split on
   '|', float()/int() per value, struct.pack) on the first --ctf2bin-slice-mb MiB of the corpus.

See benchmarks/README.md. MB = 10^6 bytes.
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

import ctf_throughput as ctfb  # noqa: E402
import gen_ctf_corpora as gen  # noqa: E402

MIB = 1 << 20

CONVERT_SNIPPET = textwrap.dedent("""
    import json, os, resource, sys, time
    argv, repeat = json.loads(sys.argv[1])
    from recordkit.cli.main import main
    best = None
    for _ in range(repeat):
        if os.path.exists(argv[2]):
            os.remove(argv[2])
        t0 = time.perf_counter()
        rc = main(argv)
        dt = time.perf_counter() - t0
        if rc:
            sys.exit("recordkit convert failed with %s" % rc)
        best = dt if best is None else min(best, dt)
    print(json.dumps({"seconds": best, "bytes_in": os.path.getsize(argv[1]), "bytes_out": os.path.getsize(argv[2]),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))
""")

CBF_READ_SNIPPET = textwrap.dedent("""
    import json, os, resource, sys, time
    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    path, threads, repeat = json.loads(sys.argv[1])
    from recordkit.formats.cbf import CBFReader
    baseline = rss()
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = CBFReader(path)
        n = nseq = 0
        for chunk in r.iter_chunks(threads=threads):
            n += chunk.num_samples
            ns = getattr(chunk, "num_sequences", None)
            nseq += ns if ns is not None else len(chunk)
        dt = time.perf_counter() - t0
        r.close()
        del r, chunk
        if best is None or dt < best[0]:
            best = (dt, n, nseq)
    print(json.dumps({"reader": "recordkit", "seconds": best[0], "samples": best[1], "sequences": best[2],
                      "bytes": os.path.getsize(path), "peak_rss_mb": rss(), "baseline_rss_mb": baseline}))
""")

# What Scripts/ctf2bin.py does per input line (spec section 4), minus file output: split on '|',
# split alias from values, float() each dense value / int(i), float(v) each sparse pair,
# sort the pairs, struct.pack the values. Run on a slice of the corpus.
CTF2BIN_SNIPPET = textwrap.dedent("""
    import json, struct, sys, time
    path, streams, nbytes = json.loads(sys.argv[1])
    with open(path, "rb") as f:
        data = f.read(nbytes)
    data = data[:data.rfind(b"\\n") + 1].decode("ascii")
    by_alias = dict((s["alias"], s) for s in streams)
    t0 = time.perf_counter()
    out = []
    prev = None
    nseq = 0
    for line in data.splitlines():
        prefix, _, rest = line.partition("|")
        prefix = prefix.strip()
        if (prev is None and not prefix) or (prefix and prefix != prev):
            nseq += 1
        prev = prefix or prev
        for piece in ("|" + rest).split("|")[1:]:
            parts = piece.split(None, 1)
            if len(parts) < 2 or parts[0].startswith("#"):
                continue
            s = by_alias[parts[0]]
            vals = parts[1].split()
            if s["format"] == "dense":
                v = [float(x) for x in vals]
                if len(v) != s["dim"]:
                    raise ValueError("dim")
                out.append(struct.pack("%df" % len(v), *v))
            else:
                pairs = []
                for tok in vals:
                    i, _, x = tok.partition(":")
                    i = int(i)
                    if i >= s["dim"]:
                        raise ValueError("index")
                    pairs.append((i, float(x)))
                pairs.sort(key=lambda p: p[0])
                out.append(struct.pack("%df" % len(pairs), *[p[1] for p in pairs]))
                out.append(struct.pack("<%di" % len(pairs), *[p[0] for p in pairs]))
    dt = time.perf_counter() - t0
    print(json.dumps({"seconds": dt, "bytes": len(data), "sequences": nseq}))
""")


def _run(snippet, arg):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", snippet, json.dumps(arg)], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": ctfb._stderr_tail(p.stderr)}
    return ctfb._last_json(p.stdout)


def convert(ctf, cbf, streams, repeat):
    argv = [ "convert", ctf, cbf, "--precision", "float"]
    for s in streams:
        argv += ["--stream", "%s=%s:%d:%s" % (s["name"], s["format"], s["dim"], s["alias"])]
    return _run(CONVERT_SNIPPET, [argv, repeat])


def cbf_streams(path):
    """The streams of a CBF file (name, format, dim), from recordkit's header parse."""
    p = subprocess.run([sys.executable, "-c", "import json,sys; from recordkit.formats.cbf import CBFReader; "
                        "r = CBFReader(sys.argv[1]); print(json.dumps([dict(name=s.name, format=s.format, dim=s.dim) "
                        "for s in r.streams])); print(len(r.chunks))", path], capture_output=True, text=True)
    out = p.stdout.split("\n")
    return json.loads(out[0]), int(out[1])


def run_oracle_cbf(path, streams, mb_sizes, repeat):
    cmd = [ctfb.ORACLE, "python", os.path.join(HERE, "oracle_cbf_read.py"), path, json.dumps(streams),
           "--mb-sizes", mb_sizes, "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": ctfb._stderr_tail(p.stderr)}
    return ctfb._last_json(p.stdout)


def _ok(r):
    return r is not None and "error" not in r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data"))
    ap.add_argument("--mb", type=float, default=100, help="corpus size in MiB when generating (default 100)")
    ap.add_argument("--only", default=None, help="comma-separated subset of: dense,sparse,seq")
    ap.add_argument("--skip-oracle", action="store_true", help="do not run CNTK")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3, help="best of N for every timing (default 3)")
    ap.add_argument("--cntk-mb-sizes", default="128,256,512,1024,4096,16384",
                    help="CNTK minibatch sizes (samples) to try; the fastest is reported")
    ap.add_argument("--ctf2bin-slice-mb", type=float, default=10, help="0 to skip the pure-Python ctf2bin loop")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    names = args.only.split(",") if args.only else list(gen.GENERATORS)
    meta = gen.generate(args.data_dir, args.mb, only=names, force=False)
    skip_reason = "--skip-oracle" if args.skip_oracle else ctfb.oracle_available()
    if skip_reason:
        print("CNTK oracle skipped: %s" % skip_reason)

    rows = []
    for name in names:
        ctf = gen.corpus_path(args.data_dir, name)
        cbf = os.path.splitext(ctf)[0] + ".cbf"
        streams = meta[name]["streams"]
        row = {"corpus": name, "ctf_bytes": os.path.getsize(ctf)}
        print("[%s] convert ..." % name, file=sys.stderr, flush=True)
        row["convert"] = convert(ctf, cbf, streams, args.repeat)
        if not _ok(row["convert"]):
            rows.append(row)
            continue
        row["cbf_bytes"] = os.path.getsize(cbf)
        row["cbf_streams"], row["cbf_chunks"] = cbf_streams(cbf)
        print("[%s] CTF read (recordkit) ..." % name, file=sys.stderr, flush=True)
        row["ctf_read"] = ctfb.run_recordkit(ctf, streams, args.threads, None, args.repeat)
        print("[%s] CBF read ..." % name, file=sys.stderr, flush=True)
        row["cntk"] = None if skip_reason else run_oracle_cbf(cbf, row["cbf_streams"], args.cntk_mb_sizes, args.repeat)
        row["recordkit"] = _run(CBF_READ_SNIPPET, [cbf, args.threads, args.repeat])
        if args.ctf2bin_slice_mb > 0:
            row["ctf2bin_py"] = _run(CTF2BIN_SNIPPET, [ctf, streams, int(args.ctf2bin_slice_mb * MIB)])
        rows.append(row)

    print()
    print("CBF read: CNTK MinibatchSource(CBFDeserializer), best of minibatch sizes %s; recordkit "
          "CBFReader(path).iter_chunks(threads=%d)" % (args.cntk_mb_sizes, args.threads))
    print("best of %d full reads, fresh process per reader; MB/s = 10^6 bytes of CBF per second; RSS = peak MiB"
          % args.repeat)
    hdr = ("corpus", "CBF MiB", "chunks", "CNTK s", "CNTK MB/s", "CNTK RSS", "rk s", "rk MB/s", "rk RSS", "rk/CNTK")
    w = (8, 8, 7, 7, 10, 9, 7, 9, 7, 8)
    print("  ".join(h.rjust(x) for h, x in zip(hdr, w)))
    notes = []
    for row in rows:
        if not _ok(row.get("convert")):
            notes.append("%s: conversion failed: %s" % (row["corpus"], row["convert"].get("error")))
            continue
        c, r = row.get("cntk"), row.get("recordkit")
        mb = row["cbf_bytes"] / 1e6
        cs = c["seconds"] if _ok(c) else None
        rs = r["seconds"] if _ok(r) else None
        cells = (row["corpus"], "%.1f" % (row["cbf_bytes"] / MIB), str(row["cbf_chunks"]),
                 ctfb._num(cs, "%.2f"), ctfb._num(mb / cs if cs else None, "%.0f"),
                 ctfb._num(c["peak_rss_mb"] if cs else None, "%.0f"),
                 ctfb._num(rs, "%.3f"), ctfb._num(mb / rs if rs else None, "%.0f"),
                 ctfb._num(r["peak_rss_mb"] if rs else None, "%.0f"),
                 ctfb._num(cs / rs if cs and rs else None, "%.1fx"))
        print("  ".join(s.rjust(x) for s, x in zip(cells, w)))
        if c and "error" in c:
            notes.append("%s: CNTK failed: %s" % (row["corpus"], c["error"]))
        if r and "error" in r:
            notes.append("%s: recordkit failed: %s" % (row["corpus"], r["error"]))
        if cs and rs and (c["samples"], c["sequences"]) != (r["samples"], r["sequences"]):
            notes.append("%s: counts differ: CNTK %d samples / %d sequences, recordkit %d / %d"
                         % (row["corpus"], c["samples"], c["sequences"], r["samples"], r["sequences"]))
        if cs:
            notes.append("%s: CNTK best minibatch size %d (per size: %s); RSS after import %.0f MiB"
                         % (row["corpus"], c["mb_size"], ", ".join("%s: %.2fs" % kv for kv in c["per_size"].items()),
                            c["baseline_rss_mb"]))
        if rs:
            notes.append("%s: recordkit %d samples, %d sequences; RSS after import %.0f MiB"
                         % (row["corpus"], r["samples"], r["sequences"], r["baseline_rss_mb"]))
    for n in notes:
        print("  note: " + n)

    print()
    print("CTF -> CBF conversion (recordkit convert, float, default 32 MiB chunks; MB/s of CTF input) vs recordkit's "
          "CTF read of the same file (CTFReader.iter_chunks(threads=%d)):" % args.threads)
    hdr = ("corpus", "CTF MiB", "conv s", "conv MB/s", "conv RSS", "CTF read s", "read MB/s", "conv/read",
           "ctf2bin.py-like MB/s")
    w = (8, 8, 7, 10, 9, 11, 10, 10, 21)
    print("  ".join(h.rjust(x) for h, x in zip(hdr, w)))
    for row in rows:
        v, rd, py = row.get("convert"), row.get("ctf_read"), row.get("ctf2bin_py")
        mb = row["ctf_bytes"] / 1e6
        vs = v["seconds"] if _ok(v) else None
        rs = rd["seconds"] if _ok(rd) else None
        cells = (row["corpus"], "%.1f" % (row["ctf_bytes"] / MIB), ctfb._num(vs, "%.2f"),
                 ctfb._num(mb / vs if vs else None, "%.0f"), ctfb._num(v["peak_rss_mb"] if vs else None, "%.0f"),
                 ctfb._num(rs, "%.2f"), ctfb._num(mb / rs if rs else None, "%.0f"),
                 ctfb._num(rs / vs if vs and rs else None, "%.2fx"),
                 ctfb._num(py["bytes"] / 1e6 / py["seconds"] if _ok(py) else None, "%.1f"))
        print("  ".join(s.rjust(x) for s, x in zip(cells, w)))
    if args.ctf2bin_slice_mb > 0:
        print("  note: ctf2bin.py-like = the per-line parse/pack loop of CNTK's Scripts/ctf2bin.py in pure Python "
              "(%s) on the first %g MiB, no file output" % (sys.version.split()[0], args.ctf2bin_slice_mb))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "threads": args.threads, "repeat": args.repeat, "cpus": os.cpu_count()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
