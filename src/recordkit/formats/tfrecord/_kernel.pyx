# cython: language_level=3
"""Compiled encoders of ``tf.train.Feature`` messages, one per sample, straight into one buffer.

wire.py builds the per-sample headers of a chunk's feature lists as NumPy columns; for sparse
one-hot sequences (millions of tiny samples) the columns and masks cost more than the bytes. These
two loops write the same bytes directly, the GIL released: ``varints`` (the packed varints of
sparse indices) and ``features`` (``Feature{<list>{value: packed payload}}`` per sample, an empty
list written as ``Feature{<list>{}}``, as protobuf does).
"""
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

import numpy as np


cdef inline int _vlen(uint64_t v) nogil:
    cdef int n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline int64_t _vput(uint8_t* out, int64_t at, uint64_t v) nogil:
    while v >= 0x80:
        out[at] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        at += 1
    out[at] = <uint8_t>v
    return at + 1


def varints(const int64_t[::1] values):
    """(the varint bytes of every value, one after another; each value's byte count). Values must
    be >= 0 (sparse indices)."""
    cdef Py_ssize_t n = values.shape[0], i
    for i in range(n):
        if values[i] < 0:
            raise ValueError(f"value {i} is negative ({values[i]}): not a sparse index")
    lens = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] lv = lens
    cdef int64_t total = 0
    with nogil:
        for i in range(n):
            lv[i] = _vlen(<uint64_t>values[i])
            total += lv[i]
    out = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] ov = out
    cdef int64_t at = 0
    with nogil:
        for i in range(n):
            at = _vput(&ov[0], at, <uint64_t>values[i])
    return out, lens


def features(const uint8_t[::1] payload, const int64_t[::1] pay_lens, int list_tag):
    """``Feature{<list_tag>{value: payload_i}}`` for every sample i (payloads back to back in
    ``payload``): (the messages one after another, their offsets (n + 1))."""
    cdef Py_ssize_t n = pay_lens.shape[0], i
    cdef int64_t need = 0
    for i in range(n):
        if pay_lens[i] < 0:
            raise ValueError(f"sample {i}: negative payload length")
        need += pay_lens[i]
    if need != payload.shape[0]:
        raise ValueError(f"the payload lengths add up to {need} bytes, the payload has {payload.shape[0]}")
    offsets = np.empty(n + 1, dtype=np.int64)
    cdef int64_t[::1] off = offsets
    cdef int64_t total = 0, L, inner, feature
    with nogil:
        for i in range(n):
            L = pay_lens[i]
            inner = (1 + _vlen(<uint64_t>L) + L) if L > 0 else 0
            feature = 1 + _vlen(<uint64_t>inner) + inner
            off[i] = total
            total += 1 + _vlen(<uint64_t>feature) + feature
        off[n] = total
    out = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] ov = out
    cdef uint8_t* o = &ov[0] if total else NULL
    cdef int64_t at, src = 0
    with nogil:
        for i in range(n):
            L = pay_lens[i]
            inner = (1 + _vlen(<uint64_t>L) + L) if L > 0 else 0
            feature = 1 + _vlen(<uint64_t>inner) + inner
            at = off[i]
            o[at] = 0x0A
            at = _vput(o, at + 1, <uint64_t>feature)
            o[at] = <uint8_t>list_tag
            at = _vput(o, at + 1, <uint64_t>inner)
            if L > 0:
                o[at] = 0x0A
                at = _vput(o, at + 1, <uint64_t>L)
                memcpy(&o[at], &payload[src], L)
                src += L
    return out, offsets
