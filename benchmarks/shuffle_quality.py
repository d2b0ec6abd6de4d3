"""How close is block randomization to a uniform shuffle?

CNTK's block randomization only swaps sequences within a window of chunks, so that
only the window must be in memory. This script measures, for a data set of
C chunks x M sequences, how the order of one sweep compares with a uniform
random permutation, for a window of the whole data set and for small windows:

* spearman: rank correlation between file position and delivered position
  (0 for a uniform shuffle, 1 for file order);
* displacement: mean |delivered position - file position| / N (1/3 for uniform);
* neighbours: fraction of consecutive deliveries that were within 10 positions of
  each other in the file (about 20/N for uniform);
* chi2/dof: uniformity of where file-position deciles end up, over many seeds
  (about 1 for uniform);
* same chunk: fraction of consecutive deliveries from the same chunk (about 1/C for
  uniform).

Each window of w chunks is compared with a buffer shuffle holding the same memory
(w x M sequences; chunks read in a random order). The metrics live in
recordkit.engine.shuffle_quality, which ``recordkit read --randomize --report`` uses too.

Run: python benchmarks/shuffle_quality.py [--chunks 64] [--per-chunk 250] [--seeds 40]
"""
from __future__ import annotations

import argparse

import numpy as np

from recordkit.engine.shuffle_quality import (block_sweep, buffer_shuffle_order, file_positions, same_chunk,
                                              summarize, uniform_chunks)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--per-chunk", type=int, default=250)
    ap.add_argument("--seeds", type=int, default=40)
    a = ap.parse_args()
    n = a.chunks * a.per_chunk
    chunks = uniform_chunks(a.chunks, a.per_chunk)
    print(f"{a.chunks} chunks x {a.per_chunk} sequences = {n}; {a.seeds} seeds per row")
    print(f"{'order':>28} {'spearman':>9} {'displacement':>13} {'neighbours':>11} {'chi2/dof':>9} {'same chunk':>11}")
    rng = np.random.default_rng(0)
    uniform = [rng.permutation(n) for _ in range(a.seeds)]
    rows = [("uniform permutation", uniform)]
    for w in (None, a.chunks // 2, 8, 2, 1):
        label = "whole data set" if w is None else f"{w} chunks"
        sweeps = [block_sweep(chunks, w, seed=s) for s in range(a.seeds)]
        rows.append((f"block, {label}", [file_positions(o, chunks) for o in sweeps]))
        if w is not None:
            rows.append((f"buffer of {w * a.per_chunk}",
                         [buffer_shuffle_order(chunks, w * a.per_chunk, seed=s) for s in range(a.seeds)]))
    for label, orders in rows:
        m = summarize(orders)
        same = np.mean([same_chunk(np.asarray(o) // a.per_chunk) for o in orders])
        print(f"{label:>28} {m['correlation']:>9.3f} {m['displacement']:>13.3f} {m['neighbours']:>11.4f} "
              f"{m['chi2_per_dof']:>9.2f} {same:>11.4f}")


if __name__ == "__main__":
    main()
