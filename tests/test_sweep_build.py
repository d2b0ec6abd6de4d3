"""build_sweep's bookkeeping (which positions use each chunk, its first and last use) equals
what the plain definitions give, for shares of random orders (chunk ids small and large)."""
import numpy as np
import pytest

from recordkit.engine.sweep import build_sweep, cumulative


def _reference(chunk, lo, hi):
    share = chunk[lo:hi]
    by_chunk = {int(c): np.flatnonzero(share == c) for c in np.unique(share)}
    last_use = {c: lo + int(p[-1]) for c, p in by_chunk.items()}
    first = sorted((int(p[0]), c) for c, p in by_chunk.items())
    return by_chunk, last_use, [c for _, c in first], [lo + p for p, _ in first]


@pytest.mark.parametrize("n_chunks", [1, 3, 40, 70000])
@pytest.mark.parametrize("bounds", [(0, None), (5, 300), (17, 18)])
def test_build_sweep_groups_positions_by_chunk_with_first_and_last_use(n_chunks, bounds):
    rng = np.random.default_rng(n_chunks)
    n = 1000
    chunk = rng.integers(0, n_chunks, n).astype(np.int64)
    seq = rng.integers(0, 50, n).astype(np.int64)
    lo, hi = bounds[0], bounds[1] if bounds[1] is not None else n
    sweep = build_sweep(0, chunk, seq, cumulative(np.ones(n, np.int64)), lo, hi)
    by_chunk, last_use, first_use, first_pos = _reference(chunk, lo, hi)
    used = {int(c) for c in np.flatnonzero(sweep.last_use >= 0)}
    assert used == by_chunk.keys()
    for c, rel in by_chunk.items():
        positions, _ = sweep.positions_of(np.array([c]))
        assert positions.tolist() == rel.tolist()
        assert int(sweep.last_use[c]) == last_use[c]
        assert int(sweep.first_at[c]) == lo + int(rel[0])
    assert sweep.first_use.tolist() == first_use
    assert sweep.first_pos.tolist() == first_pos
    assert sweep.first_use.dtype == chunk.dtype


def test_build_sweep_of_an_empty_share_uses_no_chunk():
    chunk = np.array([2, 0, 1], dtype=np.int64)
    sweep = build_sweep(0, chunk, chunk, cumulative(np.ones(3, np.int64)), 1, 1)
    assert not (sweep.last_use >= 0).any() and len(sweep.first_use) == 0
    assert len(sweep.positions_of(np.array([0, 1, 2]))[0]) == 0
