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
  (about 1 for uniform).

Run: python benchmarks/shuffle_quality.py [--chunks 64] [--per-chunk 250] [--seeds 40]
"""
from __future__ import annotations

import argparse

import numpy as np

from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.randomizer import BlockRandomizer


def order_of(chunks, per_chunk, window, seed):
    r = BlockRandomizer([ChunkInfo(i, per_chunk, per_chunk) for i in range(chunks)], window=window, seed=seed)
    o = r.sweep(0)
    return o.chunk * per_chunk + o.index  # file position of the sequence delivered at each step


def metrics(orders, n):
    spearman, displacement, neighbours = [], [], []
    hist = np.zeros((10, 10))
    for file_pos in orders:
        delivered = np.arange(n)
        spearman.append(np.corrcoef(file_pos, delivered)[0, 1])
        displacement.append(np.abs(file_pos - delivered).mean() / n)
        neighbours.append(np.mean(np.abs(np.diff(file_pos)) <= 10))
        np.add.at(hist, (file_pos * 10 // n, delivered * 10 // n), 1)
    expected = hist.sum() / 100
    chi2 = ((hist - expected) ** 2 / expected).sum() / 81
    return np.mean(spearman), np.mean(displacement), np.mean(neighbours), chi2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=64)
    ap.add_argument("--per-chunk", type=int, default=250)
    ap.add_argument("--seeds", type=int, default=40)
    a = ap.parse_args()
    n = a.chunks * a.per_chunk
    print(f"{a.chunks} chunks x {a.per_chunk} sequences = {n}; {a.seeds} seeds per row")
    print(f"{'window':>22} {'spearman':>9} {'displacement':>13} {'neighbours':>11} {'chi2/dof':>9}")
    rng = np.random.default_rng(0)
    uniform = [rng.permutation(n) for _ in range(a.seeds)]
    rows = [("uniform permutation", uniform)]
    for w in (None, a.chunks // 2, 8, 2, 1):
        label = "whole data set" if w is None else f"{w} chunks"
        rows.append((label, [order_of(a.chunks, a.per_chunk, w, s) for s in range(a.seeds)]))
    for label, orders in rows:
        s, d, nb, c = metrics(orders, n)
        print(f"{label:>22} {s:>9.3f} {d:>13.3f} {nb:>11.4f} {c:>9.2f}")


if __name__ == "__main__":
    main()
