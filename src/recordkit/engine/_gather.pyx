# distutils: language = c++
# cython: language_level=3
"""Compiled minibatch assembly: copy the picked sequences out of many chunks at once.

A randomized minibatch draws its sequences from every chunk of the randomization
window; gathering them chunk by chunk in NumPy costs a few Python calls per chunk
per stream. These kernels take the chunks' column arrays as lists and copy every
picked sequence's rows in one call per stream, without the GIL. Rows are moved as
raw bytes, so one kernel serves float32 and float64.
"""
from libc.stdint cimport int64_t, int32_t, uint8_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp

cnp.import_array()


# Every entry point checks the indices and counts it is handed before it dereferences one:
# a kernel never trusts a position it did not compute (a tampered checkpoint or a bug above
# must give an error, never a read of other memory). The checks are per picked sequence,
# not per value.

cdef int _check_pick(Py_ssize_t i, int64_t k, int64_t K, int64_t j, int64_t nseq) except -1:
    if k < 0 or k >= K:
        raise IndexError(f"pick {i}: chunk slot {k} is out of range [0, {K})")
    if j < 0 or j >= nseq:
        raise IndexError(f"pick {i}: sequence {j} is out of range [0, {nseq}) of its chunk")
    return 0


cdef int _check_span(Py_ssize_t i, int64_t a, int64_t b, int64_t n, str what) except -1:
    if a < 0 or a > b or b > n:
        raise IndexError(f"pick {i}: {what} [{a}, {b}) is not within [0, {n}): inconsistent chunk offsets")
    return 0


cdef int _check_lengths(Py_ssize_t S, Py_ssize_t S2) except -1:
    if S != S2:
        raise ValueError(f"slot and sequence arrays differ in length ({S} vs {S2})")
    return 0


def gather_padded(list rows, list offsets, const int64_t[::1] slot, const int64_t[::1] seq, Py_ssize_t row_bytes):
    """Dense: sequences seq[i] of chunk slot[i] into a (S*T, row_bytes) zero-padded byte array.

    rows[k]: chunk k's values as a C-contiguous (samples, row_bytes) uint8 array;
    offsets[k]: its per-sequence sample offsets. T is the longest picked sequence.
    Returns (out, lengths, T).
    """
    cdef Py_ssize_t S = slot.shape[0], K = len(rows), i, k
    _check_lengths(S, seq.shape[0])
    if len(offsets) != K:
        raise ValueError(f"{K} row arrays but {len(offsets)} offset arrays")
    if row_bytes < 0:
        raise ValueError(f"row_bytes {row_bytes} < 0")
    cdef vector[const uint8_t*] base
    cdef vector[const int64_t*] offs
    cdef vector[int64_t] nseq, nrows
    cdef const uint8_t[:, ::1] r
    cdef const int64_t[::1] o
    for k in range(K):
        r = rows[k]
        o = offsets[k]
        if o.shape[0] < 1:
            raise ValueError(f"chunk slot {k}: empty offset array")
        if r.shape[1] != row_bytes and r.shape[0] > 0:
            raise ValueError(f"chunk slot {k}: rows of {r.shape[1]} bytes, expected {row_bytes}")
        base.push_back(&r[0, 0] if r.shape[0] > 0 else NULL)
        offs.push_back(&o[0])
        nseq.push_back(o.shape[0] - 1)
        nrows.push_back(r.shape[0])
    lengths = np.empty(S, dtype=np.int64)
    cdef int64_t[::1] lv = lengths
    cdef int64_t a, b, n
    cdef Py_ssize_t T = 0
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], nseq[slot[i]] if 0 <= slot[i] < K else 0)
        a = offs[slot[i]][seq[i]]
        b = offs[slot[i]][seq[i] + 1]
        _check_span(i, a, b, nrows[slot[i]], "rows")
        n = b - a
        lv[i] = n
        if n > T:
            T = n
    out = np.zeros((S * T, row_bytes), dtype=np.uint8)
    cdef uint8_t[:, ::1] ov = out
    with nogil:
        for i in range(S):
            a = offs[slot[i]][seq[i]]
            n = lv[i]
            if n > 0 and row_bytes > 0:
                memcpy(&ov[i * T, 0], base[slot[i]] + a * row_bytes, n * row_bytes)
    return out, lengths, T


def gather_sparse(list values, list indices, list indptrs, list offsets, const int64_t[::1] slot,
                  const int64_t[::1] seq, Py_ssize_t itemsize):
    """Sparse: the picked sequences' samples, concatenated: (values bytes, indices, indptr, lengths)."""
    cdef Py_ssize_t S = slot.shape[0], K = len(values), i, k, j
    _check_lengths(S, seq.shape[0])
    if not (len(indices) == len(indptrs) == len(offsets) == K):
        raise ValueError("values, indices, indptrs and offsets must list the same chunks")
    if itemsize <= 0:
        raise ValueError(f"itemsize {itemsize} <= 0")
    cdef vector[const uint8_t*] vb
    cdef vector[const int32_t*] ib
    cdef vector[const int64_t*] pb
    cdef vector[const int64_t*] ob
    cdef vector[int64_t] nseq, nrows, nnz
    cdef const uint8_t[::1] v
    cdef const int32_t[::1] ix
    cdef const int64_t[::1] p
    cdef const int64_t[::1] o
    for k in range(K):
        v = values[k]
        ix = indices[k]
        p = indptrs[k]
        o = offsets[k]
        if o.shape[0] < 1 or p.shape[0] < 1:
            raise ValueError(f"chunk slot {k}: empty offset or indptr array")
        vb.push_back(&v[0] if v.shape[0] > 0 else NULL)
        ib.push_back(&ix[0] if ix.shape[0] > 0 else NULL)
        pb.push_back(&p[0])
        ob.push_back(&o[0])
        nseq.push_back(o.shape[0] - 1)
        nrows.push_back(p.shape[0] - 1)
        nnz.push_back(min(<int64_t>(v.shape[0] // itemsize), <int64_t>ix.shape[0]))
    cdef int64_t total_rows = 0, total_nnz = 0, a, b, lo, hi
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], nseq[slot[i]] if 0 <= slot[i] < K else 0)
        a = ob[slot[i]][seq[i]]
        b = ob[slot[i]][seq[i] + 1]
        _check_span(i, a, b, nrows[slot[i]], "samples")
        _check_span(i, pb[slot[i]][a], pb[slot[i]][b], nnz[slot[i]], "non-zeros")
        for j in range(a, b):
            if pb[slot[i]][j] > pb[slot[i]][j + 1] or pb[slot[i]][j] < pb[slot[i]][a]:
                raise IndexError(f"pick {i}: indptr decreases at sample {j} of its chunk")
        total_rows += b - a
        total_nnz += pb[slot[i]][b] - pb[slot[i]][a]
    out_v = np.empty(total_nnz * itemsize, dtype=np.uint8)
    out_i = np.empty(total_nnz, dtype=np.int32)
    out_p = np.empty(total_rows + 1, dtype=np.int64)
    lengths = np.empty(S, dtype=np.int64)
    cdef uint8_t[::1] vv = out_v
    cdef int32_t[::1] iv = out_i
    cdef int64_t[::1] pv = out_p
    cdef int64_t[::1] lv = lengths
    cdef int64_t row = 0, nz = 0, z
    with nogil:
        for i in range(S):
            a = ob[slot[i]][seq[i]]
            b = ob[slot[i]][seq[i] + 1]
            lv[i] = b - a
            lo = pb[slot[i]][a]
            hi = pb[slot[i]][b]
            for j in range(a, b):
                pv[row] = nz + pb[slot[i]][j] - lo
                row += 1
            z = hi - lo
            if z > 0:
                memcpy(&vv[nz * itemsize], vb[slot[i]] + lo * itemsize, z * itemsize)
                memcpy(&iv[nz], ib[slot[i]] + lo, z * 4)
            nz += z
        pv[row] = nz
    return out_v, out_i, out_p, lengths


def gather_items(list arrays, const int64_t[::1] slot, const int64_t[::1] seq):
    """Per-sequence values (keys, lengths: 8-byte items) of the picked sequences."""
    cdef Py_ssize_t S = slot.shape[0], K = len(arrays), i, k
    _check_lengths(S, seq.shape[0])
    cdef vector[const int64_t*] base
    cdef vector[int64_t] count
    cdef const int64_t[::1] a
    for k in range(K):
        a = arrays[k]
        base.push_back(&a[0] if a.shape[0] > 0 else NULL)
        count.push_back(a.shape[0])
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], count[slot[i]] if 0 <= slot[i] < K else 0)
    out = np.empty(S, dtype=np.int64)
    cdef int64_t[::1] ov = out
    with nogil:
        for i in range(S):
            ov[i] = base[slot[i]][seq[i]]
    return out


def pick_run(const int64_t[::1] pos_j, const int64_t[::1] pos_len, Py_ssize_t a, Py_ssize_t b, int64_t total,
             int64_t size, bint have_first, Py_ssize_t max_count):
    """Walk positions [a, b) choosing sequences for a minibatch (CNTK's rule).

    pos_j[p] < 0: -1 the sequence was dropped (skipped), -2 its chunk is not loaded
    (stop, status 1, so the caller loads it). The first sequence is always taken;
    later ones only while total + length <= size (status 2 when the next one does
    not fit or the size is reached). max_count < 0: no limit on sequences (status 2
    when reached). Status 0: ran to b. Returns (next position, taken positions, total, status).
    """
    if pos_len.shape[0] != pos_j.shape[0]:
        raise ValueError(f"pos_j and pos_len differ in length ({pos_j.shape[0]} vs {pos_len.shape[0]})")
    if a < 0 or b > pos_j.shape[0]:
        raise IndexError(f"positions [{a}, {b}) are not within [0, {pos_j.shape[0]}]")
    cdef Py_ssize_t p = a, n = 0
    cdef int status = 0
    cdef int64_t j, L
    out = np.empty(b - a if b > a else 0, dtype=np.int64)
    cdef int64_t[::1] ov = out
    with nogil:
        while p < b:
            j = pos_j[p]
            if j == -1:
                p += 1
                continue
            if j == -2:
                status = 1
                break
            L = pos_len[p]
            if have_first and total + L > size:
                status = 2
                break
            ov[n] = p
            n += 1
            total += L
            have_first = True
            p += 1
            if total >= size or (max_count >= 0 and n >= max_count):
                status = 2
                break
    return p, out[:n], total, status
