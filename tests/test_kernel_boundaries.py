"""The engine's compiled kernels check the indices and counts they are handed:
out-of-range input is a clear IndexError/ValueError, never a read of other memory or a signal.
Each case runs in a child process, so a crash fails the test rather than the test run."""

import numpy as np
import pytest

from helpers import refused_in_a_child
from recordkit.engine import _gather, _randomize

SETUP = """
import numpy as np
from recordkit.engine import _gather, _randomize
i64 = lambda *v: np.array(v, dtype=np.int64)
rows = [np.arange(24, dtype=np.uint8).reshape(6, 4)]      # one chunk: 6 samples of 4 bytes
offs = [i64(0, 2, 5, 6)]                                  # 3 sequences
vals, ind, ptr = [np.zeros(8, np.uint8)], [np.zeros(2, np.int32)], [i64(0, 1, 1, 2)]
soffs = [i64(0, 1, 3)]                                    # 2 sequences over 3 samples
cols = _gather.ChunkColumns(i64(10, 11, 12), i64(2, 3, 1), [("dense", rows[0], offs[0], 4)])
scols = _gather.ChunkColumns(i64(10, 11), i64(1, 2), [("sparse", vals[0], ind[0], ptr[0], soffs[0], 4)])
"""

BAD_CALLS = {
    "padded: negative sequence": "_gather.gather_padded(rows, offs, i64(0), i64(-1), 4)",
    "padded: sequence past the chunk": "_gather.gather_padded(rows, offs, i64(0), i64(3), 4)",
    "padded: negative slot": "_gather.gather_padded(rows, offs, i64(-1), i64(0), 4)",
    "padded: slot past the chunks": "_gather.gather_padded(rows, offs, i64(1), i64(0), 4)",
    "padded: offsets past the rows": "_gather.gather_padded(rows, [i64(0, 2, 500, 6)], i64(0), i64(1), 4)",
    "padded: decreasing offsets": "_gather.gather_padded(rows, [i64(0, 4, 2, 6)], i64(0), i64(1), 4)",
    "padded: row size": "_gather.gather_padded(rows, offs, i64(0), i64(0), 8)",
    "padded: lengths differ": "_gather.gather_padded(rows, offs, i64(0, 0), i64(0), 4)",
    "padded: frame past the rows": "_gather.gather_padded(rows, [None], i64(0), i64(6), 4)",
    "padded: negative frame": "_gather.gather_padded(rows, [None, offs[0]], i64(1, 0), i64(0, -1), 4)",
    "sparse: negative sequence": "_gather.gather_sparse(vals, ind, ptr, soffs, i64(0), i64(-1000), 4)",
    "sparse: slot past the chunks": "_gather.gather_sparse(vals, ind, ptr, soffs, i64(7), i64(0), 4)",
    "sparse: indptr past the values": "_gather.gather_sparse(vals, ind, [i64(0, 1, 1, 2000)], soffs, i64(0), i64(1), 4)",
    "sparse: offsets past the samples": "_gather.gather_sparse(vals, ind, ptr, [i64(0, 1, 30)], i64(0), i64(1), 4)",
    "sparse: decreasing indptr": "_gather.gather_sparse(vals, ind, [i64(0, 2, 1, 2)], [i64(0, 3)], i64(0), i64(0), 4)",
    "items: negative sequence": "_gather.gather_items([i64(5, 6)], i64(0), i64(-2))",
    "items: sequence past the end": "_gather.gather_items([i64(5, 6)], i64(0), i64(2))",
    "items: slot past the arrays": "_gather.gather_items([i64(5, 6)], i64(3), i64(0))",
    # the arrays themselves (reached through the NumPy C API): type, dimensions, byte order
    "items: int32 slots": "_gather.gather_items([i64(5, 6)], i64(0).astype(np.int32), i64(0))",
    "items: float items": "_gather.gather_items([np.zeros(2)], i64(0), i64(0))",
    "sparse: byte-swapped indptr": "_gather.gather_sparse(vals, ind, [i64(0, 1, 1, 2).astype('>i8')], soffs, i64(0), i64(0), 4)",
    "sparse: int64 indices": "_gather.gather_sparse(vals, [np.zeros(2, np.int64)], ptr, soffs, i64(0), i64(0), 4)",
    "padded: one-dimensional rows": "_gather.gather_padded([np.zeros(24, np.uint8)], offs, i64(0), i64(0), 4)",
    "padded: strided rows": "_gather.gather_padded([np.zeros((6, 8), np.uint8)[:, ::2]], offs, i64(0), i64(0), 4)",
    "pick: negative start": "_gather.pick_run(i64(0, 1), i64(1, 1), -5, 2, 0, 10, False, -1)",
    "pick: end past the positions": "_gather.pick_run(i64(0, 1), i64(1, 1), 0, 50, 0, 10, False, -1)",
    "pick: lengths differ": "_gather.pick_run(i64(0, 1), i64(1), 0, 2, 0, 10, False, -1)",
    "shuffle: window past the chunks": "_randomize.shuffle_sequences(i64(2, 2), i64(0, 0), i64(2, 9), 1)",
    "shuffle: window without its chunk": "_randomize.shuffle_sequences(i64(2, 2), i64(1, 1), i64(2, 2), 1)",
    "shuffle: negative count": "_randomize.shuffle_sequences(i64(-2, 2), i64(0, 0), i64(2, 2), 1)",
    "shuffle: bounds differ": "_randomize.shuffle_sequences(i64(2, 2), i64(0), i64(2, 2), 1)",
    "chunks: negative count": "_randomize.shuffle_chunks(-3, 1)",
    "draws: negative count": "_randomize.mt19937_64_draws(1, -1)",
    "pack: negative sequence": "_gather.pack([cols], i64(0), i64(-1))",
    "pack: sequence past the chunk": "_gather.pack([cols], i64(0), i64(3))",
    "pack: slot past the chunks": "_gather.pack([cols], i64(1), i64(0))",
    "pack: a pick and no chunks": "_gather.pack([], i64(0), i64(0))",
    "pack: lengths differ": "_gather.pack([cols], i64(0, 0), i64(0))",
    "pack: streams laid out differently": "_gather.pack([cols, scols], i64(0), i64(0))",
    "pack: offsets past the rows": "_gather.pack([_gather.ChunkColumns(i64(1, 2), i64(1, 1), "
                                   "[('dense', rows[0], i64(0, 2, 500), 4)])], i64(0), i64(1))",
    "pack: sparse offsets past the samples": "_gather.pack([_gather.ChunkColumns(i64(1, 2), i64(1, 1), "
                                            "[('sparse', vals[0], ind[0], ptr[0], i64(0, 1, 30), 4)])], i64(0), i64(1))",
    "columns: keys and lengths differ": "_gather.ChunkColumns(i64(1, 2), i64(1), [])",
    "columns: row size": "_gather.ChunkColumns(i64(1), i64(1), [('dense', rows[0], offs[0], 8)])",
    "columns: unknown kind": "_gather.ChunkColumns(i64(1), i64(1), [('ragged', rows[0], offs[0], 4)])",
    "columns: zero itemsize": "_gather.ChunkColumns(i64(1), i64(1), [('sparse', vals[0], ind[0], ptr[0], soffs[0], 0)])",
    "columns: int64 indices": "_gather.ChunkColumns(i64(1), i64(1), [('sparse', vals[0], i64(0, 0), ptr[0], soffs[0], 4)])",
    "take: position past the share": "_gather.take_picks(i64(5), 0, i64(0, 0, 0), i64(0, 1), i64(1, 1), None, 0)",
    "take: negative position": "_gather.take_picks(i64(-1), 0, i64(0, 0, 0), i64(0, 1), i64(1, 1), None, 0)",
    "take: share past the sweep": "_gather.take_picks(i64(1), 2, i64(0, 0, 0), i64(0, 1), i64(1, 1), None, 0)",
    "take: orig differs": "_gather.take_picks(i64(1), 0, i64(0, 0, 0), i64(0, 1), i64(1, 1), i64(4), 0)",
}


def test_arrays_that_are_not_numpy_arrays_are_refused_with_a_type_error():
    with pytest.raises(TypeError, match="slot: expected a NumPy array, got list"):
        _gather.gather_items([np.zeros(2, np.int64)], [0], np.zeros(1, np.int64))
    with pytest.raises(TypeError, match="ChunkColumns"):
        _gather.pack([np.zeros(2, np.int64)], np.zeros(1, np.int64), np.zeros(1, np.int64))


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_out_of_range_input_is_a_clear_error_in_a_living_process(case):
    refused_in_a_child(SETUP, BAD_CALLS[case], case)


def test_valid_input_is_still_gathered():
    i64 = lambda *v: np.array(v, dtype=np.int64)
    rows = [np.arange(24, dtype=np.uint8).reshape(6, 4)]
    out, lengths, T = _gather.gather_padded(rows, [i64(0, 2, 5, 6)], i64(0, 0), i64(1, 2), 4)
    assert T == 3 and lengths.tolist() == [3, 1]
    np.testing.assert_array_equal(out[:3], rows[0][2:5])
    np.testing.assert_array_equal(out[3], rows[0][5])
    assert not out[4:].any()
    # frames (no offsets): sequence j is row j, from two chunks at once
    out, lengths, T = _gather.gather_padded(rows + [rows[0][::-1].copy()], [None, None], i64(1, 0), i64(0, 4), 4)
    assert T == 1 and lengths.tolist() == [1, 1]
    np.testing.assert_array_equal(out, np.stack([rows[0][5], rows[0][4]]))
    v, ix, p, lens, so = _gather.gather_sparse([np.arange(8, dtype=np.uint8)], [np.array([3, 7], np.int32)],
                                              [i64(0, 1, 1, 2)], [i64(0, 1, 3)], i64(0, 0, 0), i64(1, 0, 1), 4)
    assert lens.tolist() == [2, 1, 2] and so.tolist() == [0, 2, 3, 5]
    assert p.tolist() == [0, 0, 1, 2, 2, 3] and ix.tolist() == [7, 3, 7]
    # pack: keys, lengths and their sum, and each stream as its own gather gives it
    dense_cols = _gather.ChunkColumns(i64(10, 11, 12), i64(2, 3, 1), [("dense", rows[0], i64(0, 2, 5, 6), 4)])
    keys, lens, total, outs = _gather.pack([dense_cols], i64(0, 0), i64(1, 2))
    assert keys.tolist() == [11, 12] and lens.tolist() == [3, 1] and total == 4
    ref = _gather.gather_padded(rows, [i64(0, 2, 5, 6)], i64(0, 0), i64(1, 2), 4)
    assert all(np.array_equal(a, b) for a, b in zip(outs[0], ref))
    keys, lens, total, outs = _gather.pack([], i64(), i64())
    assert keys.tolist() == [] and total == 0 and outs == []
    src, idx = _randomize.shuffle_sequences(i64(2, 2), i64(0, 0), i64(2, 2), 1)
    assert sorted(zip(src.tolist(), idx.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
