#!/usr/bin/env python3
"""CTF -> CBF conversion speed against recordkit's own CTF read throughput.

    python benchmarks/convert_throughput.py [--data-dir bench-data] [--mb 100] [--repeat 3]
                                            [--only dense,sparse,seq] [--threads 2] [--json OUT.json]

Per corpus (benchmarks/gen_ctf_corpora.py, generated into --data-dir if missing), in one fresh
interpreter, alternating the two so that machine load hits both alike, --repeat times each:

* read:    ``CTFReader(path, streams, precision="float").iter_chunks(threads=2)``, counting samples
           (exactly what benchmarks/ctf_throughput.py times for recordkit), index scan included;
* convert: ``recordkit.cli.main.main(["convert", IN, OUT, "--precision", "float", "--stream", ...])``,
           the CLI/API path, from opening the input to the renamed output (fsync included).

Both are reported as MB/s of CTF input (MB = 10^6 bytes), best of --repeat, and the ratio
convert/read (the goal: >= 1.00x); also the least process CPU time (user + sys) of each, which
varies less than wall time when other processes share the two cores. See benchmarks/README.md.
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

MIB = 1 << 20

SNIPPET = textwrap.dedent("""
    import contextlib, io, json, os, resource, sys, time
    path, out, streams, threads, repeat = json.loads(sys.argv[1])
    from recordkit import StreamSpec
    from recordkit.formats.ctf import CTFReader
    from recordkit.cli.main import main
    specs = [StreamSpec(name=s["name"], format=s["format"], dim=s["dim"], alias=s["alias"]) for s in streams]
    argv = ["convert", path, out, "--precision", "float"]
    for s in streams:
        argv += ["--stream", "%s=%s:%d:%s" % (s["name"], s["format"], s["dim"], s["alias"])]

    def cpu():
        u = resource.getrusage(resource.RUSAGE_SELF)
        return u.ru_utime + u.ru_stime

    def read():
        c0 = cpu()
        t0 = time.perf_counter()
        r = CTFReader(path, specs, precision="float")
        n = 0
        for chunk in r.iter_chunks(threads=threads):
            n += chunk.num_samples
        dt = time.perf_counter() - t0
        r.close()
        return dt, cpu() - c0, n

    def convert():
        if os.path.exists(out):
            os.remove(out)
        err = io.StringIO()
        c0 = cpu()
        t0 = time.perf_counter()
        with contextlib.redirect_stderr(err):
            rc = main(argv)
        dt = time.perf_counter() - t0
        if rc:
            sys.exit("recordkit convert failed with %s: %s" % (rc, err.getvalue()))
        return dt, cpu() - c0

    reads, converts, read_cpu, convert_cpu, samples = [], [], [], [], None
    for _ in range(repeat):
        dt, c, samples = read()
        reads.append(dt)
        read_cpu.append(c)
        dt, c = convert()
        converts.append(dt)
        convert_cpu.append(c)
    print(json.dumps({"read_s": reads, "convert_s": converts, "read_cpu_s": read_cpu, "convert_cpu_s": convert_cpu,
                      "samples": samples,
                      "bytes_in": os.path.getsize(path), "bytes_out": os.path.getsize(out),
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0}))
""")


def run(ctf, cbf, streams, threads, repeat):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-c", SNIPPET, json.dumps([ctf, cbf, streams, threads, repeat])],
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
    ap.add_argument("--threads", type=int, default=2, help="CTFReader.iter_chunks(threads=...) for the read (default 2)")
    ap.add_argument("--repeat", type=int, default=3, help="timed reads and conversions each, best reported (default 3)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)

    names = args.only.split(",") if args.only else list(gen.GENERATORS)
    meta = gen.generate(args.data_dir, args.mb, only=names, force=False)
    rows = []
    for name in names:
        ctf = gen.corpus_path(args.data_dir, name)
        cbf = os.path.join(args.data_dir, name + ".convert-bench.cbf")
        print("[%s] read + convert x%d ..." % (name, args.repeat), file=sys.stderr, flush=True)
        r = run(ctf, cbf, meta[name]["streams"], args.threads, args.repeat)
        r["corpus"] = name
        rows.append(r)
        if os.path.exists(cbf):
            os.remove(cbf)

    print()
    print("CTF read = CTFReader(precision='float').iter_chunks(threads=%d); convert = `recordkit convert IN OUT.cbf "
          "--precision float --stream ...` (main(), fsync + rename included)" % args.threads)
    print("best of %d each, alternating, one fresh process per corpus; MB/s = 10^6 bytes of CTF input per second"
          % args.repeat)
    hdr = ("corpus", "CTF MiB", "read s", "read MB/s", "conv s", "conv MB/s", "conv/read", "read CPU s",
           "conv CPU s", "CBF MiB", "RSS MiB")
    w = (8, 8, 7, 10, 7, 10, 10, 11, 11, 8, 8)
    print("  ".join(h.rjust(x) for h, x in zip(hdr, w)))
    for r in rows:
        if "error" in r:
            print("  %8s  failed: %s" % (r["corpus"], r["error"]))
            continue
        mb = r["bytes_in"] / 1e6
        rs, cs = min(r["read_s"]), min(r["convert_s"])
        cells = (r["corpus"], "%.1f" % (r["bytes_in"] / MIB), "%.3f" % rs, "%.0f" % (mb / rs), "%.3f" % cs,
                 "%.0f" % (mb / cs), "%.2fx" % (rs / cs), "%.3f" % min(r["read_cpu_s"]),
                 "%.3f" % min(r["convert_cpu_s"]), "%.1f" % (r["bytes_out"] / MIB), "%.0f" % r["peak_rss_mb"])
        print("  ".join(s.rjust(x) for s, x in zip(cells, w)))
    for r in rows:
        if "error" not in r:
            print("  note: %s: all read s %s; all convert s %s" % (
                r["corpus"], " ".join("%.3f" % x for x in r["read_s"]), " ".join("%.3f" % x for x in r["convert_s"])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "threads": args.threads, "repeat": args.repeat, "cpus": os.cpu_count()}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
