"""Whole processes, as a user runs them: `recordkit read`/`stats` vs CNTK 2.7 reading the same file.

    .venv/bin/python benchmarks/whole_process.py [--data-dir bench-data] [--repeat 3]

Each command is a fresh process timed from start to exit (interpreter start, imports, opening,
reading, exit), best of --repeat, side by side in one run:

* ``recordkit --version`` (start-up alone);
* ``recordkit stats FILE`` and ``recordkit read FILE --mb-size 1024`` (file order, one sweep);
* CNTK 2.7: ``benchmarks/oracle_minibatch_read.py FILE --mb 1024 --repeat 1`` under
  ``/work/shared/tools/cntk-oracle python`` (Python 3.6 + cntk: its interpreter start and
  ``import cntk`` included, as a CNTK user pays them).

On the dense, sparse and seq CBF files (converted from the CTF corpora when missing) and the
dense CTF. The ratio is CNTK's time over recordkit's `read` time (goal: >= 2).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORACLE = os.environ.get("CNTK_ORACLE", "/work/shared/tools/cntk-oracle")
STREAMS = {"dense": [("features", "dense", 100), ("labels", "dense", 10)],
           "sparse": [("x", "sparse", 100000), ("y", "sparse", 100000)],
           "seq": [("word", "sparse", 50000), ("tag", "sparse", 100)]}


def timed(cmd, repeat):
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        dt = time.perf_counter() - t0
        best = dt if best is None or dt < best else best
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="bench-data")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rk = [sys.executable, "-m", "recordkit.cli.main"]
    print(f"recordkit --version: {timed(rk + ['--version'], a.repeat):.3f} s")
    print(f"{'file':22s} {'stats s':>8s} {'read s':>8s} {'CNTK s':>8s} {'CNTK/read':>9s}")
    for name, streams in STREAMS.items():
        ctf = os.path.join(a.data_dir, f"{name}.ctf")
        cbf = os.path.join(a.data_dir, f"{name}.cbf")
        decl = [x for n, f, d in streams for x in ("--stream", f"{n}={f}:{d}")]
        if not os.path.exists(cbf):
            subprocess.run(rk + ["convert", ctf, cbf, *decl], check=True, stderr=subprocess.DEVNULL)
        for path, fmt, args in ((cbf, "cbf", []), (ctf, "ctf", decl)):
            if fmt == "ctf" and name != "dense":
                continue
            stats = timed(rk + ["stats", path, *args], a.repeat)
            read = timed(rk + ["read", path, *args, "--mb-size", "1024"], a.repeat)
            oracle = None
            if os.path.exists(ORACLE):
                spec = json.dumps([{"name": n, "format": f, "dim": d} for n, f, d in streams])
                oracle = timed([ORACLE, "python", os.path.join(HERE, "oracle_minibatch_read.py"), path, spec,
                                "--format", fmt, "--mb", "1024", "--repeat", "1"], a.repeat)
            print(f"{os.path.basename(path):22s} {stats:8.3f} {read:8.3f} "
                  f"{oracle if oracle is not None else float('nan'):8.3f} "
                  f"{(oracle / read) if oracle else float('nan'):9.2f}")


if __name__ == "__main__":
    main()
