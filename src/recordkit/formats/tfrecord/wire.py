"""Protocol-buffer wire encoding of ``tf.train.SequenceExample`` feature lists, column-wise.

Building one ``Feature`` message per sample through the protobuf package costs microseconds
per sample; a corpus of short one-hot sequences has millions of samples. Here the feature
lists of a whole chunk are encoded at once: dense samples (all the same size) with NumPy, the
ragged per-sample messages of sparse streams and the varints of their indices by a compiled
kernel (``_kernel.pyx``) into one flat array. Per record only a handful of
byte strings are joined. The bytes parse with the protobuf package (and TensorFlow) to the
same messages a ``SerializeToString`` of them gives (tests compare the parsed messages).

Layout (field numbers from tensorflow/core/example/{feature,example}.proto):
``Feature``: bytes_list 1, float_list 2, int64_list 3; each list: ``value`` 1, packed.
``FeatureList``: feature 1. ``Features``/``FeatureLists``: map entries 1 (key 1, value 2).
``SequenceExample``: context 1, feature_lists 2.
"""
from __future__ import annotations

import numpy as np

VARINT_MAX = 10


def varint_len(v: np.ndarray) -> np.ndarray:
    """Bytes of the varint of each (non-negative or uint64) value."""
    v = np.asarray(v).astype(np.uint64, copy=False)
    n = np.ones(v.shape, dtype=np.int64)
    top = int(v.max()) if v.size else 0
    for k in range(1, VARINT_MAX):
        if top < (1 << (7 * k)):
            break
        n += v >= np.uint64(1 << (7 * k))
    return n


def varint_matrix(v: np.ndarray, width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """((n, width) uint8 varint bytes, (n,) lengths); bytes beyond a value's length are junk."""
    v = np.asarray(v).astype(np.uint64, copy=False)
    lens = varint_len(v)
    width = int(lens.max()) if width is None and len(v) else (width or 1)
    out = np.empty((len(v), width), dtype=np.uint8)
    last = lens - 1
    for k in range(width):
        byte = ((v >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        byte[k < last] |= 0x80
        out[:, k] = byte
    return out, lens


def varint_bytes(x: int) -> bytes:
    """One varint (Python int, non-negative)."""
    out = bytearray()
    while True:
        b = x & 0x7F
        x >>= 7
        if x:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact(mat: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Row-major concatenation of the first ``lens[i]`` bytes of each row."""
    if mat.shape[0] == 0:
        return np.zeros(0, dtype=np.uint8)
    return mat[np.arange(mat.shape[1]) < lens[:, None]]


def dense_feature_list(values: np.ndarray, seq_offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FeatureList bodies of a dense column (float32 (samples, D)): every sample one
    ``Feature{float_list{value: D floats}}``, all the same size. (bytes, per-sequence offsets)."""
    samples, dim = values.shape
    payload = 4 * dim
    inner = 1 + len(varint_bytes(payload)) + payload             # FloatList
    feature = 1 + len(varint_bytes(inner)) + inner               # Feature
    head = (b"\x0a" + varint_bytes(feature) + b"\x12" + varint_bytes(inner) + b"\x0a" + varint_bytes(payload))
    size = len(head) + payload
    mat = np.empty((samples, size), dtype=np.uint8)
    mat[:, :len(head)] = np.frombuffer(head, dtype=np.uint8)
    mat[:, len(head):] = np.ascontiguousarray(values, dtype="<f4").view(np.uint8).reshape(samples, payload)
    return mat.reshape(-1), np.asarray(seq_offsets, dtype=np.int64) * size


def sparse_feature_lists(indices: np.ndarray, values: np.ndarray, indptr: np.ndarray, seq_offsets: np.ndarray):
    """The ``NAME.indices`` (int64_list per sample) and ``NAME.values`` (float_list per sample)
    FeatureList bodies of a sparse column: ((bytes, per-sequence offsets), (bytes, offsets)).
    One compiled pass (``_kernel.sparse_lists``); negative indices are refused."""
    from recordkit.formats.tfrecord import _kernel
    idx = np.ascontiguousarray(indices)
    if idx.dtype not in (np.int32, np.int64):
        idx = idx.astype(np.int64)
    vals = np.ascontiguousarray(values, dtype="<f4").reshape(-1).view(np.uint8)
    ib, io, vb, vo = _kernel.sparse_lists(idx, vals, np.ascontiguousarray(indptr, dtype=np.int64),
                                          np.ascontiguousarray(seq_offsets, dtype=np.int64))
    return (ib, io), (vb, vo)


def entry(tag_key: bytes, body_len: int) -> bytes:
    """The start of a map entry ``{key: tag_key, value: <body_len bytes>}`` (value tag 0x12)."""
    return (b"\x0a" + varint_bytes(1 + len(varint_bytes(len(tag_key))) + len(tag_key) + 1
                                   + len(varint_bytes(body_len)) + body_len)
            + b"\x0a" + varint_bytes(len(tag_key)) + tag_key + b"\x12" + varint_bytes(body_len))


def bytes_feature(value: bytes) -> bytes:
    inner = b"\x0a" + varint_bytes(len(value)) + value
    return b"\x0a" + varint_bytes(len(inner)) + inner
