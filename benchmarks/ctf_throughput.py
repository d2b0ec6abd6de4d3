#!/usr/bin/env python3
"""CTF read throughput: recordkit's CTFReader against CNTK 2.7's C++ reader.

    python benchmarks/ctf_throughput.py [--data-dir bench-data] [--mb 100] [--skip-oracle]
                                        [--threads 2] [--chunk-size SIZE] [--rss-chunk-sizes 4M,32M]
                                        [--only dense,sparse,seq] [--json OUT.json]

See benchmarks/README.md. Every measurement runs in a fresh subprocess so each peak RSS
(ru_maxrss) belongs to one reader only.
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

ORACLE = os.environ.get("CNTK_ORACLE", "/work/shared/tools/cntk-oracle")
MIB = 1 << 20

# Runs in a fresh interpreter (sys.executable, i.e. the venv recordkit is installed in).
RECORDKIT_SNIPPET = textwrap.dedent("""
    import json, os, resource, sys, time
    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    path, streams, threads, chunk_size, repeat = json.loads(sys.argv[1])
    from recordkit import StreamSpec
    from recordkit.formats.ctf import CTFReader
    specs = [StreamSpec(name=s["name"], format=s["format"], dim=s["dim"], alias=s["alias"]) for s in streams]
    baseline = rss()
    kw = {} if chunk_size is None else {"chunk_size": chunk_size}
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = CTFReader(path, specs, precision="float", **kw)
        n = nseq = 0
        for chunk in r.iter_chunks(threads=threads):
            n += chunk.num_samples
            ns = getattr(chunk, "num_sequences", None)
            nseq += ns if ns is not None else len(chunk)
        dt = time.perf_counter() - t0
        close = getattr(r, "close", None)
        if close is not None:
            close()
        del r, chunk
        if best is None or dt < best[0]:
            best = (dt, n, nseq)
    print(json.dumps({"reader": "recordkit", "seconds": best[0], "samples": best[1], "sequences": best[2],
                      "bytes": os.path.getsize(path), "peak_rss_mb": rss(), "baseline_rss_mb": baseline}))
""")


def parse_size(text: str | None) -> int | None:
    if text is None or text == "":
        return None
    t = text.strip().lower().removesuffix("ib").removesuffix("b")
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(t[-1:], 1)
    if t[-1:] in "kmg":
        t = t[:-1]
    return int(float(t) * mult)


def fmt_size(n: int | None) -> str:
    if n is None:
        return "default"
    return "%g MiB" % (n / MIB) if n >= MIB else "%d B" % n


def oracle_available() -> str | None:
    """None if the oracle can run, else the reason it cannot."""
    if not os.path.exists(ORACLE):
        return "%s not found" % ORACLE
    try:
        p = subprocess.run([ORACLE, "python", "-c", "import cntk"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot run %s: %s" % (ORACLE, e)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["?"])[-1]
        return "`%s python -c 'import cntk'` failed (%s); run `%s setup`" % (ORACLE, tail, ORACLE)
    return None


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON result in output")


def run_oracle(path, streams, mb_sizes, repeat):
    cmd = [ORACLE, "python", os.path.join(HERE, "oracle_ctf_read.py"), path, json.dumps(streams),
           "--mb-sizes", mb_sizes, "--repeat", str(repeat)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": _stderr_tail(p.stderr)}
    return _last_json(p.stdout)


def run_recordkit(path, streams, threads, chunk_size, repeat):
    arg = json.dumps([path, streams, threads, chunk_size, repeat])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", RECORDKIT_SNIPPET, arg], capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": _stderr_tail(p.stderr)}
    return _last_json(p.stdout)


def _stderr_tail(err: str) -> str:
    lines = [ln for ln in err.strip().splitlines() if ln.strip() and not ln.startswith("WARNING:")]
    return lines[-1] if lines else "failed"


def _num(x, fmt):
    return "-" if x is None else fmt % x


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data"))
    ap.add_argument("--mb", type=float, default=100, help="corpus size in MiB when generating (default 100)")
    ap.add_argument("--only", default=None, help="comma-separated subset of: dense,sparse,seq")
    ap.add_argument("--skip-oracle", action="store_true", help="do not run CNTK")
    ap.add_argument("--threads", type=int, default=2, help="recordkit iter_chunks(threads=...) (default 2)")
    ap.add_argument("--chunk-size", default=None, help="CTFReader(chunk_size=...) for the main table, e.g. 4M (default: reader default)")
    ap.add_argument("--rss-chunk-sizes", default="4M,32M",
                    help="extra recordkit runs (one each) showing peak RSS per chunk size; '' to skip (default 4M,32M)")
    ap.add_argument("--repeat", type=int, default=3, help="timed reads per reader (CNTK: per minibatch size), best is reported (default 3)")
    ap.add_argument("--cntk-mb-sizes", default="512,1024,4096,16384",
                    help="CNTK minibatch sizes (samples) to try; the fastest is reported")
    ap.add_argument("--json", default=None, help="also write all results to this JSON file")
    args = ap.parse_args(argv)

    names = args.only.split(",") if args.only else list(gen.GENERATORS)
    meta = gen.generate(args.data_dir, args.mb, only=names, force=False)
    chunk_size = parse_size(args.chunk_size)

    skip_reason = "--skip-oracle" if args.skip_oracle else oracle_available()
    if skip_reason:
        print("CNTK oracle skipped: %s" % skip_reason)

    results = []
    for name in names:
        path = gen.corpus_path(args.data_dir, name)
        streams = meta[name]["streams"]
        print("[%s] %.1f MiB ..." % (name, os.path.getsize(path) / MIB), file=sys.stderr, flush=True)
        row = {"corpus": name, "bytes": os.path.getsize(path)}
        row["cntk"] = None if skip_reason else run_oracle(path, streams, args.cntk_mb_sizes, args.repeat)
        row["recordkit"] = run_recordkit(path, streams, args.threads, chunk_size, args.repeat)
        results.append(row)

    hdr = ("corpus", "MiB", "CNTK s", "CNTK MB/s", "CNTK RSS", "rk s", "rk MB/s", "rk RSS", "rk/CNTK speed")
    print()
    print("recordkit: CTFReader(precision='float'%s).iter_chunks(threads=%d); CNTK: next_minibatch, best of sizes %s"
          % ("" if chunk_size is None else ", chunk_size=%d" % chunk_size, args.threads, args.cntk_mb_sizes))
    print("times: best of %d full reads incl. indexing; MB = 10^6 bytes; RSS = peak RSS in MiB (process total)" % args.repeat)
    print()
    widths = (8, 7, 8, 10, 9, 8, 9, 8, 13)
    print("  ".join(h.rjust(w) for h, w in zip(hdr, widths)))
    notes = []
    for row in results:
        c, r = row["cntk"], row["recordkit"]
        mb = row["bytes"] / 1e6
        cs = c.get("seconds") if c and "error" not in c else None
        rs = r.get("seconds") if r and "error" not in r else None
        cells = (
            row["corpus"], "%.1f" % (row["bytes"] / MIB),
            _num(cs, "%.2f"), _num(mb / cs if cs else None, "%.1f"),
            _num(c.get("peak_rss_mb") if cs else None, "%.0f"),
            _num(rs, "%.2f"), _num(mb / rs if rs else None, "%.1f"),
            _num(r.get("peak_rss_mb") if rs else None, "%.0f"),
            _num(cs / rs if cs and rs else None, "%.2fx"),
        )
        print("  ".join(s.rjust(w) for s, w in zip(cells, widths)))
        if c and "error" in c:
            notes.append("%s: CNTK failed: %s" % (row["corpus"], c["error"]))
        if r and "error" in r:
            notes.append("%s: recordkit failed: %s" % (row["corpus"], r["error"]))
        if cs and rs and c["samples"] != r["samples"]:
            notes.append("%s: sample counts differ: CNTK %d, recordkit %d" % (row["corpus"], c["samples"], r["samples"]))
        if cs and rs and r.get("sequences") and c["sequences"] != r["sequences"]:
            notes.append("%s: sequence counts differ: CNTK %d, recordkit %d" % (row["corpus"], c["sequences"], r["sequences"]))
        if cs:
            notes.append("%s: CNTK best minibatch size %d (per size: %s); RSS after import %.0f MiB"
                         % (row["corpus"], c["mb_size"], ", ".join("%s: %.2fs" % kv for kv in c["per_size"].items()),
                            c["baseline_rss_mb"]))
        if rs:
            notes.append("%s: recordkit samples %d, RSS after import %.0f MiB" % (row["corpus"], r["samples"], r["baseline_rss_mb"]))
    for n in notes:
        print("  note: " + n)

    rss_rows = []
    sizes = [parse_size(s) for s in args.rss_chunk_sizes.split(",") if s.strip()]
    if sizes and any(row["recordkit"] and "error" not in row["recordkit"] for row in results):
        print()
        print("recordkit peak RSS by chunk size (one read each, threads=%d):" % args.threads)
        print("  " + "  ".join(h.rjust(w) for h, w in zip(("corpus", "chunk", "seconds", "peak RSS", "RSS-import"), (8, 10, 8, 9, 10))))
        for name in names:
            path = gen.corpus_path(args.data_dir, name)
            for cs in sizes:
                r = run_recordkit(path, meta[name]["streams"], args.threads, cs, 1)
                rss_rows.append({"corpus": name, "chunk_size": cs, "result": r})
                if "error" in r:
                    print("  %8s  %10s  failed: %s" % (name, fmt_size(cs), r["error"]))
                    continue
                print("  " + "  ".join(s.rjust(w) for s, w in zip(
                    (name, fmt_size(cs), "%.2f" % r["seconds"], "%.0f MiB" % r["peak_rss_mb"],
                     "%.0f MiB" % (r["peak_rss_mb"] - r["baseline_rss_mb"])), (8, 10, 8, 9, 10))))

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "rss_by_chunk_size": rss_rows, "threads": args.threads,
                       "chunk_size": chunk_size, "cpus": os.cpu_count()}, f, indent=1)
    return 0


if __name__ == "__main__":
    if shutil.which(sys.executable) is None:
        sys.exit("cannot find the current interpreter")
    sys.exit(main())
