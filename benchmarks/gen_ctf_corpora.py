#!/usr/bin/env python3
"""Generate three deterministic CTF corpora for the throughput benchmark.

    python benchmarks/gen_ctf_corpora.py OUTDIR [--mb 100] [--seed 1234] [--only dense,sparse,seq]

* ``dense.ctf``  line mode: ``|features`` 100 dense values, ``|labels`` 10 dense values (one-hot-ish)
* ``sparse.ctf`` line mode: ``|x`` ~40 ``i:v`` pairs (dim 100000), ``|y`` ~20 pairs (dim 100000)
* ``seq.ctf``    id mode: sequences of 1..30 lines ``ID |word i:1 |tag j:1`` (word dim 50000, tag dim 100)

Each file is about ``--mb`` MiB (it stops after the first block that reaches the size).
Output is a pure function of (seed, mb): numpy's PCG64 generator, blocks of fixed size.

Speed: numbers are formatted once into lookup tables (``%.6g`` of 2**20 normal draws,
``str(i)`` for every index) and lines are assembled by indexing the tables with numpy and
joining, so a 100 MiB corpus takes a few seconds rather than minutes.

Also writes ``OUTDIR/streams.json`` (the stream declarations of every corpus) and prints them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

MIB = 1 << 20

# Stream declarations, in the form used by both benchmark drivers:
# name, alias (the name in the file), format, dim.
STREAMS = {
    "dense": [
        {"name": "features", "alias": "features", "format": "dense", "dim": 100},
        {"name": "labels", "alias": "labels", "format": "dense", "dim": 10},
    ],
    "sparse": [
        {"name": "x", "alias": "x", "format": "sparse", "dim": 100000},
        {"name": "y", "alias": "y", "format": "sparse", "dim": 100000},
    ],
    "seq": [
        {"name": "word", "alias": "word", "format": "sparse", "dim": 50000},
        {"name": "tag", "alias": "tag", "format": "sparse", "dim": 100},
    ],
}

_VALUE_TABLE_SIZE = 1 << 20


def _value_table(rng) -> np.ndarray:
    """``%.6g`` strings of normal draws, as an object array (indexable by numpy)."""
    vals = rng.standard_normal(_VALUE_TABLE_SIZE)
    return np.array(["%.6g" % v for v in vals.tolist()], dtype=object)


def _index_table(dim: int) -> np.ndarray:
    return np.array([str(i) for i in range(dim)], dtype=object)


def _write_blocks(path: str, target_bytes: int, make_block) -> tuple[int, int, int]:
    """Call make_block() until target_bytes are written; returns (bytes, lines, sequences)."""
    total = lines = seqs = 0
    with open(path + ".tmp", "wb") as f:
        while total < target_bytes:
            data, nl, ns = make_block()
            f.write(data)
            total += len(data)
            lines += nl
            seqs += ns
    os.replace(path + ".tmp", path)
    return total, lines, seqs


def gen_dense(path: str, target_bytes: int, seed: int):
    rng = np.random.default_rng([seed, 1])
    vtab = _value_table(rng)
    block_lines = 4096

    def block():
        feats = vtab[rng.integers(0, _VALUE_TABLE_SIZE, size=(block_lines, 100))]
        # one-hot-ish labels: mostly 0, a 1 at a random class, sometimes a small second value
        labels = np.full((block_lines, 10), "0", dtype=object)
        hot = rng.integers(0, 10, size=block_lines)
        labels[np.arange(block_lines), hot] = "1"
        soft = rng.random(block_lines) < 0.1
        other = (hot + 1 + rng.integers(0, 9, size=block_lines)) % 10
        labels[np.flatnonzero(soft), other[soft]] = "0.5"
        out = [
            "|features " + " ".join(f) + " |labels " + " ".join(lab)
            for f, lab in zip(feats.tolist(), labels.tolist())
        ]
        out.append("")
        return "\n".join(out).encode("ascii"), block_lines, block_lines

    return _write_blocks(path, target_bytes, block)


def _sparse_pairs(rng, nrows, mean_nnz, dim, itab, vtab):
    """Per-row sorted, de-duplicated ``i:v`` tokens; returns (tokens object array, row offsets)."""
    counts = rng.integers(mean_nnz // 2, mean_nnz + mean_nnz // 2 + 1, size=nrows)
    rows = np.repeat(np.arange(nrows), counts)
    idx = rng.integers(0, dim, size=rows.size)
    order = np.lexsort((idx, rows))
    rows, idx = rows[order], idx[order]
    keep = np.ones(rows.size, dtype=bool)
    keep[1:] = (rows[1:] != rows[:-1]) | (idx[1:] != idx[:-1])
    rows, idx = rows[keep], idx[keep]
    vals = vtab[rng.integers(0, _VALUE_TABLE_SIZE, size=rows.size)]
    tokens = itab[idx] + ":" + vals  # elementwise str concatenation on object arrays
    offsets = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=offsets[1:])
    return tokens.tolist(), offsets.tolist()


def gen_sparse(path: str, target_bytes: int, seed: int):
    rng = np.random.default_rng([seed, 2])
    vtab = _value_table(rng)
    itab = _index_table(100000)
    block_lines = 8192

    def block():
        xt, xo = _sparse_pairs(rng, block_lines, 40, 100000, itab, vtab)
        yt, yo = _sparse_pairs(rng, block_lines, 20, 100000, itab, vtab)
        out = [
            "|x " + " ".join(xt[xo[r]:xo[r + 1]]) + " |y " + " ".join(yt[yo[r]:yo[r + 1]])
            for r in range(block_lines)
        ]
        out.append("")
        return "\n".join(out).encode("ascii"), block_lines, block_lines

    return _write_blocks(path, target_bytes, block)


def gen_seq(path: str, target_bytes: int, seed: int):
    rng = np.random.default_rng([seed, 3])
    wtab = np.array(["|word %d:1" % i for i in range(50000)], dtype=object)
    ttab = np.array([" |tag %d:1" % i for i in range(100)], dtype=object)
    block_seqs = 16384
    next_id = [0]

    def block():
        lengths = rng.integers(1, 31, size=block_seqs)
        ids = np.repeat(np.arange(next_id[0], next_id[0] + block_seqs), lengths)
        next_id[0] += block_seqs
        n = ids.size
        idtab = np.array([str(i) + " " for i in range(int(ids[0]), int(ids[-1]) + 1)], dtype=object)
        lines = idtab[ids - ids[0]] + wtab[rng.integers(0, 50000, size=n)] + ttab[rng.integers(0, 100, size=n)]
        out = lines.tolist()
        out.append("")
        return "\n".join(out).encode("ascii"), n, block_seqs

    return _write_blocks(path, target_bytes, block)


GENERATORS = {"dense": gen_dense, "sparse": gen_sparse, "seq": gen_seq}


def corpus_path(outdir: str, name: str) -> str:
    return os.path.join(outdir, name + ".ctf")


def generate(outdir: str, mb: float = 100, seed: int = 1234, only=None, force: bool = True, quiet: bool = False):
    """Generate the corpora (all, or those in ``only``); skip existing ones unless force."""
    os.makedirs(outdir, exist_ok=True)
    meta_path = os.path.join(outdir, "streams.json")
    meta = {}
    if os.path.exists(meta_path):
        with open(meta_path) as f:
            meta = json.load(f).get("corpora", {})
    target = int(mb * MIB)
    for name in only or GENERATORS:
        path = corpus_path(outdir, name)
        prev = meta.get(name, {})
        if (not force and os.path.exists(path) and prev.get("mb") == mb and prev.get("seed") == seed
                and os.path.getsize(path) == prev.get("bytes")):
            continue
        t0 = time.perf_counter()
        nbytes, nlines, nseqs = GENERATORS[name](path, target, seed)
        dt = time.perf_counter() - t0
        meta[name] = {"file": os.path.basename(path), "bytes": nbytes, "lines": nlines, "sequences": nseqs,
                      "mb": mb, "seed": seed, "mode": "id" if name == "seq" else "line", "streams": STREAMS[name]}
        if not quiet:
            print("generated %-11s %8.1f MiB  %9d lines  %8d sequences  in %.1f s"
                  % (os.path.basename(path), nbytes / MIB, nlines, nseqs, dt))
    with open(meta_path, "w") as f:
        json.dump({"corpora": meta}, f, indent=1)
    return meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--mb", type=float, default=100, help="approximate size of each corpus in MiB (default 100)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--only", default=None, help="comma-separated subset of: dense,sparse,seq")
    args = ap.parse_args(argv)
    only = args.only.split(",") if args.only else None
    for name in only or []:
        if name not in GENERATORS:
            ap.error("unknown corpus %r" % name)
    generate(args.outdir, args.mb, args.seed, only)
    print("\nstream declarations (name / alias in file / format / dim):")
    for name in only or GENERATORS:
        decl = ", ".join("%s=%s:%d%s" % (s["name"], s["format"], s["dim"],
                                          "" if s["alias"] == s["name"] else ":" + s["alias"]) for s in STREAMS[name])
        print("  %-11s %s" % (name + ".ctf", decl))
    print("  (also written to %s)" % os.path.join(args.outdir, "streams.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
