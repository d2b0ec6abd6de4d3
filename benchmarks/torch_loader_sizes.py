"""DataLoader workers vs the direct loop at several minibatch sizes.

    .venv/bin/python benchmarks/torch_loader_sizes.py [--cbf bench-data/dense.cbf] [--sizes 1024,8192,32768]
                                                       [--rounds 4] [--sweeps 5]

Does a larger minibatch (fewer items for the same data) bring worker processes near the direct
loop? For each size, ``rounds`` interleaved rounds of: the direct loop, 1 fork worker, 2 fork
workers (``torch_loader.run_direct`` / ``run_loader``); prints each one's median steady-state
samples/s relative to the direct loop's median, and the median epoch times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_loader as tl  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cbf", default="bench-data/dense.cbf")
    ap.add_argument("--sizes", default="1024,8192,32768")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--sweeps", type=int, default=5)
    args = ap.parse_args(argv)
    tl.SWEEPS = args.sweeps
    import torch  # noqa: F401  (imported once, outside every timing)
    print(f"{args.cbf}, {args.sweeps} sweeps an epoch, medians of {args.rounds} interleaved rounds")
    print(f"{'mb':>6} {'direct samples/s':>17} {'1 worker':>9} {'2 workers':>10} {'epoch s direct / 1 / 2':>24}")
    for mb in (int(x) for x in args.sizes.split(",")):
        runs = {"direct": [], 1: [], 2: []}
        for _ in range(args.rounds):
            runs["direct"].append(tl.run_direct(args.cbf, mb))
            for k in (1, 2):
                runs[k].append(tl.run_loader(args.cbf, mb, workers=k, context="fork")[0])
        steady = {k: statistics.median(r["steady"] for r in v) for k, v in runs.items()}
        epoch = {k: statistics.median(r["total"] for r in v) for k, v in runs.items()}
        print(f"{mb:6d} {steady['direct']:17,.0f} {steady[1] / steady['direct']:9.2f} "
              f"{steady[2] / steady['direct']:10.2f} "
              f"{epoch['direct']:10.3f} / {epoch[1]:.3f} / {epoch[2]:.3f}", flush=True)


if __name__ == "__main__":
    main()
