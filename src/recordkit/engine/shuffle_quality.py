"""How well a sweep's order mixes, measured on the order alone (no data decoded).

Block randomization only swaps sequences within a window of chunks, so that only the
window must be in memory; a small window saves memory and mixes less. These pure
functions over orders let a user (``recordkit read --randomize --report``) and
``benchmarks/shuffle_quality.py`` see how far an order is from a uniform shuffle:

* displacement: mean |delivered position - file position| / N. 0 for file order,
  about 1/3 for a uniform random permutation, 1/2 for the reversed order.
* correlation: of the delivered position with the file position. Both are ranks
  (each a permutation of 0..N-1), so Pearson and Spearman coincide: 1 for file
  order, about 0 for a uniform shuffle, -1 reversed.
* neighbours: fraction of consecutive deliveries within ``distance`` file positions
  of each other (about 2 x distance / N for a uniform shuffle).
* same chunk: fraction of consecutive deliveries from the same chunk. Block
  randomization shuffles the chunks first, so displacement and correlation are near a
  uniform shuffle's for any window; this locality is what a small window keeps (about
  1 for a window of 1 chunk; sum over chunks of (n_c / N)^2 for a uniform shuffle).
* decile chi2 / dof: over many orders, how uniformly file-position deciles spread
  over delivered-position deciles (about 1 for uniform shuffles).

A file position is the sequence's index in file order: the sequences of all chunks
before its chunk (chunk-id order, as ``NoRandomizer`` delivers them) plus its index
inside its chunk.
"""
from __future__ import annotations

import numpy as np

from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer, SweepOrder

# windows a report compares with the chosen one, in chunks (None: the whole data set)
REPORT_WINDOWS = (1, 4, 16, 64, None)


def file_positions(order: SweepOrder, chunks) -> np.ndarray:
    """The file position of the sequence delivered at each step of ``order``.

    ``chunks``: the ChunkInfo list the order was made from (any id order)."""
    chunks = list(chunks)
    if not chunks:
        return np.zeros(0, np.int64)
    ids = np.array([c.id for c in chunks], dtype=np.int64)
    counts = np.array([c.num_sequences for c in chunks], dtype=np.int64)
    by_id = np.argsort(ids, kind="stable")
    base = np.zeros(int(ids.max()) + 1, dtype=np.int64)
    base[ids[by_id]] = np.concatenate([[0], np.cumsum(counts[by_id])[:-1]])
    return base[np.asarray(order.chunk, np.int64)] + np.asarray(order.index, np.int64)


def displacement(file_pos) -> float:
    """Mean |delivered position - file position| / N (0: file order; ~1/3: uniform)."""
    file_pos = np.asarray(file_pos, dtype=np.float64)
    n = len(file_pos)
    if n == 0:
        return 0.0
    return float(np.abs(file_pos - np.arange(n)).mean() / n)


def correlation(file_pos) -> float:
    """Correlation of delivered position with file position (Pearson = Spearman here: both
    are ranks). 1.0 for fewer than two sequences, where any order is file order."""
    file_pos = np.asarray(file_pos, dtype=np.float64)
    n = len(file_pos)
    if n < 2:
        return 1.0
    d = np.arange(n, dtype=np.float64) - (n - 1) / 2
    f = file_pos - file_pos.mean()
    denom = np.sqrt((f * f).sum() * (d * d).sum())
    return float((f * d).sum() / denom) if denom > 0 else 1.0


def neighbours(file_pos, distance: int = 10) -> float:
    """Fraction of consecutive deliveries within ``distance`` file positions of each other."""
    file_pos = np.asarray(file_pos, dtype=np.int64)
    if len(file_pos) < 2:
        return 1.0
    return float(np.mean(np.abs(np.diff(file_pos)) <= distance))


def same_chunk(chunk_ids) -> float:
    """Fraction of consecutive deliveries from the same chunk (``SweepOrder.chunk``)."""
    chunk_ids = np.asarray(chunk_ids, dtype=np.int64)
    if len(chunk_ids) < 2:
        return 1.0
    return float(np.mean(chunk_ids[1:] == chunk_ids[:-1]))


def uniform_same_chunk(chunks) -> float:
    """``same_chunk`` expected of a uniform shuffle: the chance that two random sequences share
    a chunk, sum of (n_c / N)^2."""
    counts = np.array([c.num_sequences for c in chunks], dtype=np.float64)
    total = counts.sum()
    return float(((counts / total) ** 2).sum()) if total > 0 else 1.0


def decile_chi2(orders) -> float:
    """Chi-square per degree of freedom of the 10 x 10 table (file decile, delivered decile)
    summed over ``orders`` (file positions, each of the same length N >= 10); ~1 for uniform."""
    hist = np.zeros((10, 10))
    for file_pos in orders:
        file_pos = np.asarray(file_pos, dtype=np.int64)
        n = len(file_pos)
        np.add.at(hist, (file_pos * 10 // n, np.arange(n) * 10 // n), 1)
    expected = hist.sum() / 100
    return float(((hist - expected) ** 2 / expected).sum() / 81)


def summarize(orders) -> dict:
    """The mean of each metric over ``orders`` (file positions), and the decile chi2/dof."""
    orders = [np.asarray(o) for o in orders]
    return {"correlation": float(np.mean([correlation(o) for o in orders])),
            "displacement": float(np.mean([displacement(o) for o in orders])),
            "neighbours": float(np.mean([neighbours(o) for o in orders])),
            "chi2_per_dof": decile_chi2(orders)}


def uniform_chunks(num_chunks: int, per_chunk: int) -> list:
    """``num_chunks`` chunks of ``per_chunk`` single-sample sequences (for benchmarks and tests)."""
    return [ChunkInfo(i, per_chunk, per_chunk) for i in range(num_chunks)]


def block_sweep(chunks, window, seed: int = 0, sweep: int = 0, sample_based: bool = False) -> SweepOrder:
    """CNTK block randomization's sweep ``sweep`` (window in chunks, or in samples with
    ``sample_based``; None = the whole data set)."""
    return BlockRandomizer(list(chunks), window=window, sample_based=sample_based, seed=seed).sweep(sweep)


def block_order(chunks, window, seed: int = 0, sweep: int = 0, sample_based: bool = False) -> np.ndarray:
    """File positions of ``block_sweep``."""
    chunks = list(chunks)
    return file_positions(block_sweep(chunks, window, seed, sweep, sample_based), chunks)


def buffer_shuffle_order(chunks, buffer: int, seed: int = 0) -> np.ndarray:
    """File positions of a streaming shuffle of the same memory as a window of chunks: chunks
    read in a random order, each sequence entering a buffer of ``buffer`` sequences from which a
    random one is delivered once it is full (torchdata's/WebDataset's shuffle buffer with a
    shard shuffle)."""
    chunks = sorted(chunks, key=lambda c: c.id)
    rng = np.random.default_rng(seed)
    counts = np.array([c.num_sequences for c in chunks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)])
    stream = np.concatenate([np.arange(starts[k], starts[k + 1]) for k in rng.permutation(len(chunks))]) \
        if len(chunks) else np.zeros(0, np.int64)
    buffer = max(1, int(buffer))
    out = np.empty(len(stream), dtype=np.int64)
    held = list(stream[:buffer])
    picks = rng.random(len(stream))
    n_out = 0
    for k in range(buffer, len(stream)):
        j = int(picks[n_out] * len(held))
        out[n_out] = held[j]
        held[j] = stream[k]
        n_out += 1
    rest = rng.permutation(len(held))
    out[n_out:] = np.asarray(held, dtype=np.int64)[rest] if held else out[n_out:]
    return out


def window_report(chunks, *, seed: int = 0, sweep: int = 0, chosen=None, chosen_sample_based: bool = False,
                  randomize: bool = True, windows=REPORT_WINDOWS, order: SweepOrder | None = None) -> dict:
    """How sweep ``sweep`` of ``chunks`` mixes under the chosen window and under ``windows``
    (in chunks; None = the whole data set), computed from randomizer orders alone.

    Returns {"sequences", "chunks", "sweep", "seed", "order": the chosen order's row,
    "windows": [rows]}; a row is {"window", "window_unit", "displacement", "correlation", "same_chunk"}, window
    None meaning the whole data set (file order when not ``randomize``). Windows of at least the
    number of chunks all give the whole data set's order, so they are one row. ``order``: the
    chosen sweep's order when the caller already has it (a source's randomizer), so the chosen
    row measures exactly the order that was read."""
    chunks = list(chunks)
    n_chunks = len(chunks)

    def row(window, unit, order: SweepOrder):
        file_pos = file_positions(order, chunks)
        return {"window": window, "window_unit": unit, "displacement": round(displacement(file_pos), 4),
                "correlation": round(correlation(file_pos), 4), "same_chunk": round(same_chunk(order.chunk), 4)}

    def canonical(w):  # windows covering every chunk give the whole data set's order
        return None if w is None or w >= n_chunks else max(int(w), 1)

    given = order
    if randomize:
        unit = "samples" if chosen_sample_based and chosen is not None else "chunks"
        chosen_w = chosen if unit == "samples" else canonical(chosen)
        picked = row(chosen_w, unit, given if given is not None else
                    block_sweep(chunks, chosen_w, seed, sweep, sample_based=unit == "samples"))
    else:
        unit, chosen_w = "file order", None
        picked = row(None, unit,
                     given if given is not None else NoRandomizer(sorted(chunks, key=lambda c: c.id)).sweep(0))
    rows, seen = [], set()
    for w in windows:
        w = canonical(w)
        if w in seen:
            continue
        seen.add(w)
        if unit == "chunks" and w == chosen_w:
            rows.append(dict(picked, chosen=True))
        else:
            rows.append(dict(row(w, "chunks", block_sweep(chunks, w, seed, sweep)), chosen=False))
    if unit != "chunks":  # sample-based or file order: the chosen row comes first
        rows.insert(0, dict(picked, chosen=True))
    elif chosen_w not in seen:
        rows.append(dict(picked, chosen=True))
    rows.sort(key=lambda r: (r["window_unit"] != "file order", r["window_unit"] == "chunks",
                             float("inf") if r["window"] is None else r["window"]))
    return {"sequences": int(sum(c.num_sequences for c in chunks)), "chunks": n_chunks, "sweep": int(sweep),
            "seed": int(seed) + int(sweep), "randomize": bool(randomize), "uniform_same_chunk": round(uniform_same_chunk(chunks), 4),
            "order": picked, "windows": rows}


def describe_window(row) -> str:
    """A report row's window for people: "file order", "whole data set", "4 chunks", "50000 samples"."""
    if row["window_unit"] == "file order":
        return "file order"
    if row["window"] is None:
        return "whole data set"
    return f"{row['window']} {row['window_unit']}"
