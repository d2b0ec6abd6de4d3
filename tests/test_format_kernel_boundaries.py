"""The format codecs' compiled kernels check the spans, counts and stream descriptions they are
handed at their boundary: a lying index or a caller's mistake is an IndexError/ValueError, never a read of
other memory or a signal. Each case runs in a child process, so a crash fails the test rather
than the test run."""

import numpy as np
import pytest

from helpers import refused_in_a_child
from recordkit.formats.cbf import _kernel as cbf_kernel
from recordkit.formats.ctf import _kernel as ctf_kernel
from recordkit.formats.ofrecord import _kernel as of_kernel

SETUP = """
import numpy as np
from recordkit.formats.cbf import _kernel as cbf
from recordkit.formats.ctf import _kernel as ctf
from recordkit.formats.ofrecord import _kernel as of
u64 = lambda *v: np.array(v, dtype=np.uint64)
i64 = lambda *v: np.array(v, dtype=np.int64)
text = np.frombuffer(b"0 |x 1 2\\n1 |x 3 4\\n", dtype=np.uint8)
parser = ctf.ChunkParser([b"x"], [False], [2], False, -1)
dense_part = (np.zeros(16, np.uint8), None, None, i64(0, 1, 2))      # 2 sequences of 1 sample, dim 2
sparse_part = (np.zeros(8, np.uint8), np.zeros(2, np.int32), i64(0, 1, 2), i64(0, 1, 2))
record = np.frombuffer(b"\\x0a\\x00", dtype=np.uint8)
"""

BAD_CALLS = {
    "ctf parse: span past the buffer": "parser.parse(text, 0, u64(0, 9), u64(9, 500), u64(0, 1), 0)",
    "ctf parse: offset before the base": "parser.parse(text, 100, u64(0), u64(9), u64(0), 0)",
    "ctf parse: huge size wraps around": "parser.parse(text, 0, u64(9), u64(2**64 - 5), u64(0), 0)",
    "ctf parse: arrays differ in length": "parser.parse(text, 0, u64(0, 9), u64(9), u64(0, 1), 0)",
    "ctf parse_cbf: span past the buffer": "parser.parse_cbf(text, 0, u64(0), u64(10**6), u64(0), 0)",
    "ctf parser: zero dim": "ctf.ChunkParser([b'x'], [False], [0], False, -1)",
    "ctf parser: dim past 2^31-1": "ctf.ChunkParser([b'x'], [False], [2**40], False, -1)",
    "ctf parser: lists differ": "ctf.ChunkParser([b'x', b'y'], [False], [2], False, -1)",
    "ctf parser: mb stream out of range": "ctf.ChunkParser([b'x'], [False], [2], False, 5)",
    "ctf make_chunks: lengths differ": "ctf.make_chunks(u64(0, 10), u64(10), 100)",
    "ctf format_sparse_rows: indptr past the values":
        "ctf.format_sparse_rows(i64(0, 5), i64(1), np.zeros(1), False)",
    "ctf format_sparse_rows: decreasing indptr":
        "ctf.format_sparse_rows(i64(0, 1, 0), i64(1), np.zeros(1), False)",
    "ctf format_sparse_rows: negative indptr":
        "ctf.format_sparse_rows(i64(-100, 1), i64(1), np.zeros(1), False)",
    "ctf format_sparse_rows: indices and values differ":
        "ctf.format_sparse_rows(i64(0, 1), i64(1, 2), np.zeros(1), False)",
    "cbf decode: lists differ": "cbf.decode_chunk(np.zeros(16, np.uint8), 1, [False], [2, 3], [4])",
    "cbf decode: zero dim": "cbf.decode_chunk(np.zeros(16, np.uint8), 1, [False], [0], [4])",
    "cbf decode: element size": "cbf.decode_chunk(np.zeros(16, np.uint8), 1, [False], [2], [3])",
    "cbf decode: negative sequences": "cbf.decode_chunk(np.zeros(16, np.uint8), -1, [False], [2], [4])",
    "cbf encode: offsets past the values":
        "cbf.encode_chunk(np.ones(2, np.uint32), [[(np.zeros(16, np.uint8), None, None, i64(0, 1, 90))]], [False], [2], [4])",
    "cbf encode: decreasing offsets":
        "cbf.encode_chunk(np.ones(2, np.uint32), [[(np.zeros(16, np.uint8), None, None, i64(0, 2, 1))]], [False], [2], [4])",
    "cbf encode: negative offset":
        "cbf.encode_chunk(np.ones(1, np.uint32), [[(np.zeros(16, np.uint8), None, None, i64(-3, 1))]], [False], [2], [4])",
    "cbf encode: empty offsets":
        "cbf.encode_chunk(np.ones(0, np.uint32), [[(np.zeros(16, np.uint8), None, None, i64())]], [False], [2], [4])",
    "cbf encode: indptr past the values":
        "cbf.encode_chunk(np.ones(2, np.uint32), [[(np.zeros(8, np.uint8), np.zeros(2, np.int32), i64(0, 1, 900), i64(0, 1, 2))]], [True], [5], [4])",
    "cbf encode: offsets past indptr":
        "cbf.encode_chunk(np.ones(2, np.uint32), [[(np.zeros(8, np.uint8), np.zeros(2, np.int32), i64(0, 1, 2), i64(0, 1, 7))]], [True], [5], [4])",
    "cbf encode: columns and streams differ":
        "cbf.encode_chunk(np.ones(2, np.uint32), [[dense_part], [dense_part]], [False], [2], [4])",
    "ofrecord decode: record past the buffer": "of.decode_numeric(record, i64(0), i64(900), b'x', 1, 'float32', 0)",
    "ofrecord decode: negative offset": "of.decode_numeric(record, i64(-50), i64(2), b'x', 1, 'float32', 0)",
    "ofrecord decode: negative length": "of.decode_numeric(record, i64(0), i64(-2), b'x', 1, 'float32', 0)",
    "ofrecord decode: arrays differ": "of.decode_numeric(record, i64(0, 0), i64(2), b'x', 1, 'float32', 0)",
    "ofrecord decode: negative K": "of.decode_numeric(record, i64(0), i64(2), b'x', -4, 'float32', 0)",
    "ofrecord decode_rows: record past the buffer":
        "of.decode_rows(record, i64(0), i64(900), b'x', 1, 0, np.zeros((1, 1), np.float32), 0)",
    "ofrecord decode_rows: rows past the output":
        "of.decode_rows(record, i64(0, 0), i64(2, 2), b'x', 1, 0, np.zeros((3, 1), np.float32), 2)",
    "ofrecord decode_rows: negative row": "of.decode_rows(record, i64(0), i64(2), b'x', 1, 0, np.zeros((3, 1), np.float32), -1)",
    "ofrecord decode_rows: output of another width":
        "of.decode_rows(record, i64(0), i64(2), b'x', 4, 0, np.zeros((3, 1), np.float32), 0)",
    "ofrecord decode_rows: output not contiguous":
        "of.decode_rows(record, i64(0), i64(2), b'x', 1, 0, np.zeros((3, 2), np.float32)[:, :1], 0)",
    "ofrecord decode_rows: output of another dtype":
        "of.decode_rows(record, i64(0), i64(2), b'x', 1, 0, np.zeros((3, 1), np.int16), 0)",
    "ofrecord decode_rows: output read-only":
        "of.decode_rows(record, i64(0), i64(2), b'x', 1, 0, np.frombuffer(bytes(4), np.float32).reshape(1, 1), 0)",
    "ofrecord feature_kinds: past the buffer": "of.feature_kinds(record, 1, 10**9, [b'x'])",
    "ofrecord feature_kinds: negative offset": "of.feature_kinds(record, -8, 2, [b'x'])",
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_out_of_range_input_is_a_clear_error_in_a_living_process(case):
    refused_in_a_child(SETUP, BAD_CALLS[case], case)


def test_valid_input_still_passes_every_checked_entry_point():
    u64 = lambda *v: np.array(v, dtype=np.uint64)
    i64 = lambda *v: np.array(v, dtype=np.int64)
    text = np.frombuffer(b"0 |x 1 2\n1 |x 3 4\n", dtype=np.uint8)
    parser = ctf_kernel.ChunkParser([b"x"], [False], [2], False, -1)
    kept, columns, errors, *_ = parser.parse(text, 0, u64(0, 9), u64(9, 9), u64(0, 1), 0)
    assert kept.tolist() == [0, 1] and not errors
    assert np.asarray(columns[0][0]).tolist() == [[1, 2], [3, 4]]
    assert ctf_kernel.format_sparse_rows(i64(0, 1, 1), i64(3), np.array([2.5]), False) == [b"3:2.5", b""]
    dense = (np.arange(16, dtype=np.uint8), None, None, i64(0, 1, 2))
    chunk = cbf_kernel.encode_chunk(np.ones(2, np.uint32), [[dense]], [False], [2], [4])
    meta, arrays, problem = cbf_kernel.decode_chunk(chunk, 2, [False], [2], [4])
    assert problem is None and meta.tolist() == [1, 1] and bytes(arrays[0][0]) == bytes(range(16))
    sparse = (np.arange(8, dtype=np.uint8), np.array([1, 4], np.int32), i64(0, 1, 2), i64(0, 1, 2))
    chunk = cbf_kernel.encode_chunk(np.ones(2, np.uint32), [[sparse]], [True], [5], [4])
    _, arrays, problem = cbf_kernel.decode_chunk(chunk, 2, [True], [5], [4])
    assert problem is None and arrays[0][1].tolist() == [1, 4] and arrays[0][2].tolist() == [0, 1, 2]
    record = np.frombuffer(b"\x0a\x00", dtype=np.uint8)
    assert of_kernel.feature_kinds(record, 0, 0, [b"x"]) == [-2]
