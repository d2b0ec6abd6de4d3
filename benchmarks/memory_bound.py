"""Peak memory of a full randomized sweep under ``--max-memory``, and how close
``recordkit plan``'s estimate comes.

    python benchmarks/gen_ctf_corpora.py bench-data --mb 100           # once
    python benchmarks/memory_bound.py bench-data [--only dense,seq] [--bounds 64MB,128MB,256MB]

Per corpus: ``recordkit read`` in file order, randomized without a bound (``--max-memory none``,
i.e. the whole data set as the window, CNTK's composite default), and randomized with each
bound; every run in a fresh interpreter that reports its own peak resident set from
/proc/self/status VmHWM (not ru_maxrss, which a child inherits from its parent on Linux).
``recordkit plan`` with the same arguments gives the estimate. A row passes when the bounded
peak is at most the file-order peak + the bound. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD = (
    "import sys, json\n"
    "from recordkit.cli.main import main\n"
    "main(sys.argv[1:])\n"
    "for line in open('/proc/self/status').read().splitlines():\n"
    "    if line.startswith('VmHWM:'):\n"
    "        print(json.dumps({'peak': int(line.split()[1]) * 1024}), file=sys.stderr)\n")


def run(args):
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "src"))
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD, *args, "--json"], capture_output=True, text=True, env=env)
    if p.returncode:
        raise SystemExit(f"failed: {' '.join(args)}\n{p.stderr}")
    return json.loads(p.stdout), json.loads(p.stderr.strip().splitlines()[-1])["peak"], time.perf_counter() - t


def mib(n):
    return f"{n / 2 ** 20:.0f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("datadir")
    ap.add_argument("--only", default="dense,seq")
    ap.add_argument("--bounds", default="64MB,128MB,256MB")
    ap.add_argument("--mb-size", default="1024")
    ap.add_argument("--chunk-size", default=None, help="index chunk size (default: recordkit's 32 MiB)")
    a = ap.parse_args()
    meta = json.load(open(os.path.join(a.datadir, "streams.json")))["corpora"]
    print("| corpus | MiB | chunks | read | window used | plan estimate MiB | peak RSS MiB | file-order peak + M "
          "| within |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in a.only.split(","):
        m = meta[name]
        base = [os.path.join(a.datadir, m["file"]), "--mb-size", a.mb_size]
        for s in m["streams"]:
            base += ["--stream", f"{s['name']}={s['format']}:{s['dim']}:{s['alias']}"]
        if a.chunk_size:
            base += ["--chunk-size", a.chunk_size]
        runs = [("file order", []), ("randomized, no bound", ["--randomize", "--max-memory", "none"])]
        runs += [(f"randomized, --max-memory {b}", ["--randomize", "--max-memory", b]) for b in a.bounds.split(",")]
        file_peak = None
        for label, extra in runs:
            plan, _, _ = run(["plan", *base, *extra])
            got, peak, secs = run(["read", *base, *extra])
            assert got["samples"] == plan["timeline"]["samples_read"]
            if file_peak is None:
                file_peak = peak
            mem = got["memory"]
            bound = mem["max_memory"] if "--max-memory" in extra and extra[-1] != "none" else None
            limit = f"{mib(file_peak + bound)}" if bound else ""
            ok = ("yes" if peak <= file_peak + bound else "**no**") if bound else ""
            window = mem["window"] if mem["randomize"] else "-"
            window = "whole" if mem["randomize"] and (window is None or window >= plan["chunks"]["count"]) else window
            print(f"| {name} | {m['bytes'] / 2 ** 20:.0f} | {plan['chunks']['count']} | {label} | {window} | "
                  f"{mib(plan['memory']['estimated_peak_bytes'])} | {mib(peak)} | {limit} | {ok} |", flush=True)


if __name__ == "__main__":
    main()
