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
from libc.string cimport memcpy, memset
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



# Arrays are reached through the NumPy C API rather than typed memoryviews: setting up a
# memoryview costs ~0.25 us, and a minibatch of two sparse streams took ~20 of them (5 us of a
# 16 us gather); these checks are the memoryviews' (an array, its dimensions, contiguous, the
# element kind and size, native byte order) at a few nanoseconds.
cdef const char* _data(object a, int typenum, int ndim, Py_ssize_t* shape, str what) except? NULL:
    """Where the elements of ``a`` are, checked to be a C-contiguous ``ndim``-D array of native
    elements of NumPy type ``typenum``; its shape in ``shape``."""
    cdef cnp.ndarray arr
    cdef int t
    if not cnp.PyArray_Check(a):
        raise TypeError(f"{what}: expected a NumPy array, got {type(a).__name__}")
    arr = <cnp.ndarray>a
    t = cnp.PyArray_TYPE(arr)
    if t == cnp.NPY_LONGLONG and typenum == cnp.NPY_INT64:  # int64 under its other name
        t = cnp.NPY_INT64
    if cnp.PyArray_NDIM(arr) != ndim or not cnp.PyArray_IS_C_CONTIGUOUS(arr) or t != typenum \
            or not cnp.PyArray_ISNOTSWAPPED(arr):
        raise ValueError(f"{what}: expected a C-contiguous {ndim}-D array of "
                         f"{np.dtype(cnp.PyArray_TypeObjectFromType(typenum))}, got {(<object>arr).dtype} "
                         f"of shape {(<object>arr).shape}")
    shape[0] = cnp.PyArray_DIM(arr, 0)
    if ndim == 2:
        shape[1] = cnp.PyArray_DIM(arr, 1)
    return <const char*>cnp.PyArray_DATA(arr)


cdef inline const int64_t* _i64(object a, Py_ssize_t* n, str what) except? NULL:
    return <const int64_t*>_data(a, cnp.NPY_INT64, 1, n, what)


cdef inline char* _out(object a) noexcept:
    """An array this module just made with np.empty."""
    return <char*>cnp.PyArray_DATA(<cnp.ndarray>a)


cdef extern from *:
    """
    #define RK_PREFETCH(p) __builtin_prefetch((const void*)(p))
    """
    void RK_PREFETCH(const void* p) nogil


# How many picks ahead the gathers ask the CPU for the next rows. A randomized minibatch
# takes its sequences from all over a window of chunks tens of MB large: without the hints,
# every sequence costs a cache miss for its offsets, then one for its rows, one after the
# other (measured: 2-4x the time of the same gather in file order).
cdef enum:
    AHEAD = 8
    SPAN_CAP = 2048  # bytes of one sequence's rows asked for ahead; longer ones stream on their own


cdef inline void _prefetch_span(const void* p, int64_t nbytes) noexcept nogil:
    cdef int64_t off = 0
    if nbytes > SPAN_CAP:
        nbytes = SPAN_CAP
    while off < nbytes:
        RK_PREFETCH(<const uint8_t*>p + off)
        off += 64


cdef struct Cols:
    # One stream of one chunk as the gathers read it. Dense: ``values`` is the rows (``row_bytes``
    # each), ``offsets`` the per-sequence row offsets or NULL for frames (sequence j is row j).
    # Sparse: ``values`` the value bytes, ``indices``/``indptr`` its CSR over samples, ``offsets``
    # where each sequence's samples start. Counts: sequences, rows (samples), non-zeros.
    const uint8_t* values
    const int32_t* indices
    const int64_t* indptr
    const int64_t* offsets
    int64_t nseq
    int64_t nrows
    int64_t nnz


cdef int _dense_cols(Cols* c, object rows, object offsets, Py_ssize_t row_bytes, Py_ssize_t k) except -1:
    """Fill ``c`` from a (samples, row_bytes) uint8 array and int64 offsets (None: frames), checked."""
    cdef Py_ssize_t shp[2]
    cdef const uint8_t* r = <const uint8_t*>_data(rows, cnp.NPY_UINT8, 2, shp, "rows")
    if shp[1] != row_bytes and shp[0] > 0:
        raise ValueError(f"chunk slot {k}: rows of {shp[1]} bytes, expected {row_bytes}")
    c.values = r if shp[0] > 0 else NULL
    c.indices = NULL
    c.indptr = NULL
    c.nrows = shp[0]
    c.nnz = 0
    cdef Py_ssize_t i
    if offsets is None:
        c.offsets = NULL
        c.nseq = shp[0]
    else:
        c.offsets = _i64(offsets, shp, "offsets")
        if shp[0] < 1:
            raise ValueError(f"chunk slot {k}: empty offset array")
        c.nseq = shp[0] - 1
        if c.nseq == c.nrows:  # offsets 0, 1, ..., n: frames, sequence j is row j (no look-ups then)
            i = 0
            while i <= c.nseq and c.offsets[i] == i:
                i += 1
            if i > c.nseq:
                c.offsets = NULL
    return 0


cdef int _sparse_cols(Cols* c, object values, object indices, object indptr, object offsets,
                      Py_ssize_t itemsize, Py_ssize_t k) except -1:
    """Fill ``c`` from value bytes, int32 indices, int64 indptr and offsets, checked."""
    cdef Py_ssize_t nv, ni, np_, no
    cdef const uint8_t* v = <const uint8_t*>_data(values, cnp.NPY_UINT8, 1, &nv, "values")
    cdef const int32_t* ix = <const int32_t*>_data(indices, cnp.NPY_INT32, 1, &ni, "indices")
    c.indptr = _i64(indptr, &np_, "indptr")
    c.offsets = _i64(offsets, &no, "offsets")
    if no < 1 or np_ < 1:
        raise ValueError(f"chunk slot {k}: empty offset or indptr array")
    c.values = v if nv > 0 else NULL
    c.indices = ix if ni > 0 else NULL
    c.nseq = no - 1
    c.nrows = np_ - 1
    c.nnz = min(<int64_t>(nv // itemsize), <int64_t>ni)
    return 0


cdef tuple _padded_core(Cols** cols, Py_ssize_t K, const int64_t* slot, const int64_t* seq, Py_ssize_t S,
                        Py_ssize_t row_bytes):
    """gather_padded's work over checked chunk columns: (out, lengths, T)."""
    cdef Py_ssize_t i, k, ii
    cdef bint all_frames = True
    for k in range(K):  # (a NULL entry: a slot of ``pack``'s table that no pick uses)
        if cols[k] != NULL and cols[k].offsets != NULL:
            all_frames = False
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], cols[slot[i]].nseq if 0 <= slot[i] < K else 0)
    lengths = np.empty(S, dtype=np.int64)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef vector[int64_t] first
    first.resize(S if S > 0 else 1)
    cdef int64_t a, b, n
    cdef const int64_t* o
    cdef Py_ssize_t T = 0
    if all_frames:
        with nogil:
            for i in range(S):
                first[i] = seq[i]
                lv[i] = 1
        T = 1 if S > 0 else 0
    else:
        for i in range(S):
            o = cols[slot[i]].offsets
            if o == NULL:
                a = seq[i]
                b = a + 1
            else:
                if i + AHEAD < S and cols[slot[i + AHEAD]].offsets != NULL:
                    ii = i + AHEAD
                    RK_PREFETCH(cols[slot[ii]].offsets + seq[ii])
                a = o[seq[i]]
                b = o[seq[i] + 1]
                _check_span(i, a, b, cols[slot[i]].nrows, "rows")
            first[i] = a
            n = b - a
            lv[i] = n
            if n > T:
                T = n
    # padding only where a sequence is shorter than T: zeroing the whole array first would
    # write every byte twice (and np.zeros of a large array maps fresh pages)
    out = np.empty((S * T, row_bytes), dtype=np.uint8)
    cdef uint8_t* ov = <uint8_t*>_out(out)
    with nogil:
        for i in range(S):
            if i + AHEAD < S and lv[i + AHEAD] > 0 and row_bytes > 0:
                ii = i + AHEAD
                _prefetch_span(cols[slot[ii]].values + first[ii] * row_bytes, lv[ii] * row_bytes)
            n = lv[i]
            if n > 0 and row_bytes > 0:
                memcpy(ov + i * T * row_bytes, cols[slot[i]].values + first[i] * row_bytes, n * row_bytes)
            if n < T and row_bytes > 0:
                memset(ov + (i * T + n) * row_bytes, 0, (T - n) * row_bytes)
    return out, lengths, T


cdef tuple _sparse_core(Cols** cols, Py_ssize_t K, const int64_t* slot, const int64_t* seq, Py_ssize_t S,
                        Py_ssize_t itemsize):
    """gather_sparse's work over checked chunk columns: (values bytes, indices, indptr, lengths,
    sequence offsets)."""
    cdef Py_ssize_t i, j, ii
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], cols[slot[i]].nseq if 0 <= slot[i] < K else 0)
    cdef int64_t total_rows = 0, total_nnz = 0, a, b, lo, hi
    cdef const int64_t* pp
    cdef Cols* c
    cdef vector[int64_t] first
    first.resize(S if S > 0 else 1)
    for i in range(S):
        if i + AHEAD < S:
            ii = i + AHEAD
            RK_PREFETCH(cols[slot[ii]].offsets + seq[ii])
        if i + AHEAD // 2 < S:  # its offsets were asked for AHEAD/2 picks ago: now its row pointers
            ii = i + AHEAD // 2
            RK_PREFETCH(cols[slot[ii]].indptr + cols[slot[ii]].offsets[seq[ii]])
        c = cols[slot[i]]
        a = c.offsets[seq[i]]
        b = c.offsets[seq[i] + 1]
        _check_span(i, a, b, c.nrows, "samples")
        pp = c.indptr
        lo = pp[a]
        hi = pp[b]
        _check_span(i, lo, hi, c.nnz, "non-zeros")
        for j in range(a, b):
            if pp[j] > pp[j + 1] or pp[j] < lo:
                raise IndexError(f"pick {i}: indptr decreases at sample {j} of its chunk")
        if hi > lo:  # the copy below comes to these soon
            _prefetch_span(c.values + lo * itemsize, (hi - lo) * itemsize)
            _prefetch_span(c.indices + lo, (hi - lo) * 4)
        first[i] = a
        total_rows += b - a
        total_nnz += hi - lo
    out_v = np.empty(total_nnz * itemsize, dtype=np.uint8)
    out_i = np.empty(total_nnz, dtype=np.int32)
    out_p = np.empty(total_rows + 1, dtype=np.int64)
    lengths = np.empty(S, dtype=np.int64)
    seq_offsets = np.empty(S + 1, dtype=np.int64)
    cdef uint8_t* vv = <uint8_t*>_out(out_v)
    cdef int32_t* iv = <int32_t*>_out(out_i)
    cdef int64_t* pv = <int64_t*>_out(out_p)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef int64_t* sv = <int64_t*>_out(seq_offsets)
    cdef int64_t row = 0, nz = 0, z
    with nogil:
        for i in range(S):
            c = cols[slot[i]]
            a = first[i]
            b = c.offsets[seq[i] + 1]
            lv[i] = b - a
            sv[i] = row
            pp = c.indptr
            lo = pp[a]
            hi = pp[b]
            for j in range(a, b):
                pv[row] = nz + pp[j] - lo
                row += 1
            z = hi - lo
            if z > 0:
                memcpy(vv + nz * itemsize, c.values + lo * itemsize, z * itemsize)
                memcpy(iv + nz, c.indices + lo, z * 4)
            nz += z
        pv[row] = nz
        sv[S] = row
    return out_v, out_i, out_p, lengths, seq_offsets


def gather_padded(list rows, list offsets, object slot_, object seq_, Py_ssize_t row_bytes):
    """Dense: sequences seq[i] of chunk slot[i] into a (S*T, row_bytes) zero-padded byte array.

    rows[k]: chunk k's values as a C-contiguous (samples, row_bytes) uint8 array;
    offsets[k]: its per-sequence sample offsets, or None when every sequence of the chunk is
    one sample (frames: sequence j is row j, no offset to look up). T is the longest picked
    sequence. Returns (out, lengths, T).
    """
    cdef Py_ssize_t S, S2, K = len(rows), k
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if len(offsets) != K:
        raise ValueError(f"{K} row arrays but {len(offsets)} offset arrays")
    if row_bytes < 0:
        raise ValueError(f"row_bytes {row_bytes} < 0")
    cdef vector[Cols] cols
    cdef vector[Cols*] ptrs
    cols.resize(K)
    for k in range(K):
        _dense_cols(&cols[k], rows[k], offsets[k], row_bytes, k)
        ptrs.push_back(&cols[k])
    return _padded_core(ptrs.data(), K, slot, seq, S, row_bytes)


def gather_sparse(list values, list indices, list indptrs, list offsets, object slot_, object seq_,
                  Py_ssize_t itemsize):
    """Sparse: the picked sequences' samples, concatenated: (values bytes, indices, indptr, lengths,
    sequence offsets: where each sequence's samples start in indptr, and the end)."""
    cdef Py_ssize_t S, S2, K = len(values), k
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if not (len(indices) == len(indptrs) == len(offsets) == K):
        raise ValueError("values, indices, indptrs and offsets must list the same chunks")
    if itemsize <= 0:
        raise ValueError(f"itemsize {itemsize} <= 0")
    cdef vector[Cols] cols
    cdef vector[Cols*] ptrs
    cols.resize(K)
    for k in range(K):
        _sparse_cols(&cols[k], values[k], indices[k], indptrs[k], offsets[k], itemsize, k)
        ptrs.push_back(&cols[k])
    return _sparse_core(ptrs.data(), K, slot, seq, S, itemsize)


cdef class ChunkColumns:
    """One loaded chunk's keys, lengths and stream columns as ``pack`` reads them, checked once.

    A randomized minibatch of short sequences spent about as long handing its chunks' arrays
    to the gathers (Python lists per stream, every array re-checked, a call per stream and two
    for keys and lengths) as copying its samples; the chunk's arrays do not change while it is
    loaded, so they are checked and kept here when the chunk is first packed from.

    streams: per stream ``("dense", rows (samples, row_bytes) uint8, offsets or None, row_bytes)``
    or ``("sparse", value bytes, int32 indices, int64 indptr, int64 offsets, itemsize)``."""
    cdef const int64_t* keys
    cdef const int64_t* lengths
    cdef Py_ssize_t nseq
    cdef vector[Cols] cols
    cdef vector[int] sparse
    cdef vector[Py_ssize_t] size  # dense: row bytes; sparse: bytes of one value
    cdef object _arrays  # what the pointers point into, kept alive
    cdef readonly bint lendable  # ``lend_run`` may hand out views of these arrays (``ChunkData.lendable``)

    def __init__(self, keys, lengths, list streams, bint lendable=False):
        cdef Py_ssize_t nk, nl, s, n = len(streams)
        self.keys = _i64(keys, &nk, "keys")
        self.lengths = _i64(lengths, &nl, "lengths")
        if nk != nl:
            raise ValueError(f"{nk} keys but {nl} lengths")
        self.nseq = nk
        self.cols.resize(n)
        for s in range(n):
            st = streams[s]
            if st[0] == "dense":
                if st[3] < 0:
                    raise ValueError(f"stream {s}: row_bytes {st[3]} < 0")
                _dense_cols(&self.cols[s], st[1], st[2], st[3], 0)
                self.sparse.push_back(0)
                self.size.push_back(st[3])
            elif st[0] == "sparse":
                if st[5] <= 0:
                    raise ValueError(f"stream {s}: itemsize {st[5]} <= 0")
                _sparse_cols(&self.cols[s], st[1], st[2], st[3], st[4], st[5], 0)
                self.sparse.push_back(1)
                self.size.push_back(st[5])
            else:
                raise ValueError(f"stream {s}: kind {st[0]!r} is neither 'dense' nor 'sparse'")
        self._arrays = (keys, lengths, streams)
        self.lendable = lendable

    @property
    def num_streams(self) -> int:
        return self.cols.size()


def pack(list chunks, object slot_, object seq_):
    """Sequences seq[i] of chunks[slot[i]] (``ChunkColumns`` with the same streams): keys, lengths,
    their sum, and per stream what gather_padded (dense) or gather_sparse (sparse) returns, in one call.

    ``chunks`` may hold None at slots no pick uses: the source hands its whole table of held chunks
    (``ChunkCache.columns``, free slots None) with the picks' slots, so a minibatch drawn from
    hundreds of chunks costs no Python work per chunk."""
    cdef Py_ssize_t S, S2, K = len(chunks), k, s, i, n
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if K == 0:
        if S:
            _check_pick(0, slot[0], 0, seq[0], 0)
        return np.empty(0, np.int64), np.empty(0, np.int64), 0, []
    cdef vector[char] used
    used.resize(K, 0)
    cdef Py_ssize_t first = -1
    for i in range(S):
        k = slot[i]
        if k < 0 or k >= K:
            _check_pick(i, k, K, 0, 1)
        if not used[k]:
            if chunks[k] is None:
                raise IndexError(f"pick {i}: chunk slot {k} holds no chunk")
            used[k] = 1
            if first < 0:
                first = k
    if first < 0:  # no picks: any chunk gives the streams' layout
        for k in range(K):
            if chunks[k] is not None:
                first = k
                break
        if first < 0:
            raise ValueError("pack: no chunk to take the streams' layout from")
    cdef ChunkColumns c, c0 = chunks[first]  # TypeError unless a ChunkColumns
    n = c0.cols.size()
    cdef vector[const int64_t*] kb, lb
    cdef vector[int64_t] nseq
    cdef vector[Cols*] first_cols  # per chunk: its streams' Cols, stream s at + s
    kb.resize(K, NULL)
    lb.resize(K, NULL)
    nseq.resize(K, 0)
    first_cols.resize(K, NULL)
    for k in range(K):  # every chunk handed is checked, picked from or not (a C loop: no Python per chunk)
        if chunks[k] is None:
            continue
        c = chunks[k]
        if <Py_ssize_t>c.cols.size() != n:
            raise ValueError(f"chunk slot {k}: {c.cols.size()} streams, chunk slot {first} has {n}")
        for s in range(n):
            if c.sparse[s] != c0.sparse[s] or c.size[s] != c0.size[s]:
                raise ValueError(f"chunk slot {k}, stream {s}: laid out unlike chunk slot {first}'s")
        kb[k] = c.keys
        lb[k] = c.lengths
        nseq[k] = c.nseq
        first_cols[k] = c.cols.data()
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], nseq[slot[i]] if 0 <= slot[i] < K else 0)
    keys = np.empty(S, dtype=np.int64)
    lengths = np.empty(S, dtype=np.int64)
    cdef int64_t* kv = <int64_t*>_out(keys)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef int64_t total = 0
    with nogil:
        for i in range(S):
            if i + AHEAD < S:
                RK_PREFETCH(kb[slot[i + AHEAD]] + seq[i + AHEAD])
                RK_PREFETCH(lb[slot[i + AHEAD]] + seq[i + AHEAD])
            kv[i] = kb[slot[i]][seq[i]]
            lv[i] = lb[slot[i]][seq[i]]
            total += lv[i]
    cdef vector[Cols*] ptrs
    ptrs.resize(K)
    outs = []
    for s in range(n):
        for k in range(K):
            ptrs[k] = first_cols[k] + s if first_cols[k] != NULL else NULL
        if c0.sparse[s]:
            outs.append(_sparse_core(ptrs.data(), K, slot, seq, S, c0.size[s]))
        else:
            outs.append(_padded_core(ptrs.data(), K, slot, seq, S, c0.size[s]))
    return keys, lengths, total, outs


cdef object _lent_dense(ChunkColumns c, Py_ssize_t s, Cols* col, int64_t j0, Py_ssize_t S):
    """Stream ``s`` of sequences j0..j0+S-1 as ``_padded_core`` would return it, its rows a view of
    the chunk's (no copy), or None where the copy differs from the rows as they lie: sequences of
    unequal lengths (padding between them), a read-only column (torch.from_numpy warns on it)."""
    cdef Py_ssize_t i
    cdef int64_t a, b, n, T = 0
    cdef const int64_t* o = col.offsets
    rows = c._arrays[2][s][1]
    if not cnp.PyArray_ISWRITEABLE(<cnp.ndarray>rows):
        return None
    if o == NULL:  # frames: sequence j is row j
        a, b, T = j0, j0 + S, 1
    else:
        a = o[j0]
        b = o[j0 + S]
        for i in range(S):
            _check_span(i, o[j0 + i], o[j0 + i + 1], col.nrows, "rows")
            n = o[j0 + i + 1] - o[j0 + i]
            if i == 0:
                T = n
            elif n != T:
                return None
    lengths = np.full(S, T if S > 0 else 0, dtype=np.int64)
    return rows[a:b], lengths, T


cdef object _lent_sparse(ChunkColumns c, Py_ssize_t s, Cols* col, int64_t j0, Py_ssize_t S):
    """Stream ``s`` of sequences j0..j0+S-1 as ``_sparse_core`` would return it, the values and
    indices views of the chunk's (the row pointers and offsets, rebased, are new), or None for a
    read-only column."""
    cdef Py_ssize_t i
    cdef int64_t j, a, b, lo, hi
    cdef Py_ssize_t itemsize = c.size[s]
    cdef const int64_t* o = col.offsets
    cdef const int64_t* pp = col.indptr
    st = c._arrays[2][s]
    if not (cnp.PyArray_ISWRITEABLE(<cnp.ndarray>st[1]) and cnp.PyArray_ISWRITEABLE(<cnp.ndarray>st[2])):
        return None
    for i in range(S):  # the checks _sparse_core makes, per sequence
        a = o[j0 + i]
        b = o[j0 + i + 1]
        _check_span(i, a, b, col.nrows, "samples")
        _check_span(i, pp[a], pp[b], col.nnz, "non-zeros")
        for j in range(a, b):
            if pp[j] > pp[j + 1] or pp[j] < pp[a]:
                raise IndexError(f"pick {i}: indptr decreases at sample {j} of its chunk")
    a = o[j0]
    b = o[j0 + S]
    lo = pp[a]
    hi = pp[b]
    out_p = np.empty(b - a + 1, dtype=np.int64)
    lengths = np.empty(S, dtype=np.int64)
    seq_offsets = np.empty(S + 1, dtype=np.int64)
    cdef int64_t* pv = <int64_t*>_out(out_p)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef int64_t* sv = <int64_t*>_out(seq_offsets)
    for j in range(a, b + 1):
        pv[j - a] = pp[j] - lo
    for i in range(S):
        lv[i] = o[j0 + i + 1] - o[j0 + i]
        sv[i] = o[j0 + i] - a
    sv[S] = b - a
    return st[1][lo * itemsize:hi * itemsize], st[2][lo:hi], out_p, lengths, seq_offsets


def lend_run(list chunks, object slot_, object seq_):
    """``pack(chunks, slot, seq)`` without copying the samples, where the picks are one run of
    consecutive sequences j0, j0+1, ... of one lendable chunk (an in-order minibatch within a
    chunk): each stream's samples as a view of the chunk's rows (dense streams of equal sequence
    lengths; sparse values and indices), the other streams copied as ``pack`` copies them; the
    same arrays, byte for byte, that ``pack`` returns. Returns (keys, lengths, total, outs,
    whether any view was handed out), or None when the picks are not such a run.

    A view shares the chunk's memory: what a caller writes into it is in the chunk. The source
    (``ChunkCache.lend``) never delivers a sequence of a chunk it lent from again from that memory."""
    cdef Py_ssize_t S, S2, K = len(chunks), i, s, n
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if S == 0:
        return None
    cdef int64_t k = slot[0], j0 = seq[0]
    if k < 0 or k >= K or chunks[k] is None:
        return None
    cdef ChunkColumns c = chunks[k]  # TypeError unless a ChunkColumns
    if not c.lendable or j0 < 0 or j0 + S > c.nseq:
        return None
    for i in range(S):
        if slot[i] != k or seq[i] != j0 + i:
            return None
    keys = np.empty(S, dtype=np.int64)
    lengths = np.empty(S, dtype=np.int64)
    cdef int64_t* kv = <int64_t*>_out(keys)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef int64_t total = 0
    memcpy(kv, c.keys + j0, S * 8)
    memcpy(lv, c.lengths + j0, S * 8)
    for i in range(S):
        total += lv[i]
    n = c.cols.size()
    cdef vector[Cols*] ptrs
    ptrs.resize(K, NULL)
    outs = []
    lent = False
    for s in range(n):
        if c.sparse[s]:
            out = _lent_sparse(c, s, &c.cols[s], j0, S)
        else:
            out = _lent_dense(c, s, &c.cols[s], j0, S)
        if out is not None:
            lent = True
        else:  # as pack copies it
            ptrs[k] = &c.cols[s]
            if c.sparse[s]:
                out = _sparse_core(ptrs.data(), K, slot, seq, S, c.size[s])
            else:
                out = _padded_core(ptrs.data(), K, slot, seq, S, c.size[s])
        outs.append(out)
    return keys, lengths, total, outs, lent


def chunk_slots(const int64_t[::1] cids, Py_ssize_t max_distinct=16):
    """(distinct chunk ids in order of first appearance, slot of each pick in that list), or None
    when more than ``max_distinct`` chunks are picked from (the caller sorts then: np.unique).

    A randomized minibatch draws from a few chunks at a time; a linear scan over the few seen
    so far is several times cheaper than np.unique's sort for every minibatch."""
    cdef Py_ssize_t S = cids.shape[0], i, k, K = 0
    cdef vector[int64_t] seen
    slot = np.empty(S, dtype=np.int64)
    cdef int64_t[::1] sv = slot
    cdef int64_t c
    for i in range(S):
        c = cids[i]
        k = K - 1 if K else 0
        if K == 0 or seen[k] != c:  # runs of one chunk are the common case: try the last one first
            k = 0
            while k < K and seen[k] != c:
                k += 1
            if k == K:
                if K == max_distinct:
                    return None
                seen.push_back(c)
                K += 1
        sv[i] = k
    uniq = np.empty(K, dtype=np.int64)
    cdef int64_t[::1] uv = uniq
    for k in range(K):
        uv[k] = seen[k]
    return uniq, slot


def gather_items(list arrays, object slot_, object seq_):
    """Per-sequence values (keys, lengths: 8-byte items) of the picked sequences."""
    cdef Py_ssize_t S, S2, K = len(arrays), i, k, n
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    cdef vector[const int64_t*] base
    cdef vector[int64_t] count
    cdef const int64_t* a
    for k in range(K):
        a = _i64(arrays[k], &n, "items")
        base.push_back(a if n > 0 else NULL)
        count.push_back(n)
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], count[slot[i]] if 0 <= slot[i] < K else 0)
    out = np.empty(S, dtype=np.int64)
    cdef int64_t* ov = <int64_t*>_out(out)
    with nogil:
        for i in range(S):
            if i + AHEAD < S:
                RK_PREFETCH(base[slot[i + AHEAD]] + seq[i + AHEAD])
            ov[i] = base[slot[i]][seq[i]]
    return out


cdef inline bint _takes(int64_t total, int64_t L, int64_t size, bint have_first) noexcept nogil:
    """CNTK's rule for the next sequence of a minibatch of ``size`` samples holding ``total`` so
    far: the first is always taken; after it, one only if it still fits. The one place the rule is
    written: the source's picks (``pick_run``) and the plan's minibatch ends (``minibatch_ends``)."""
    return not have_first or total + L <= size


def minibatch_ends(const int64_t[::1] lengths, int64_t size, Py_ssize_t a, Py_ssize_t b):
    """The end position of every minibatch over positions [a, b) with these lengths, cut as
    ``pick_run`` cuts them (``_takes``; a minibatch also ends once it holds ``size`` samples):
    what ``recordkit plan`` counts, one pass."""
    if a < 0 or b > lengths.shape[0] or a > b:
        raise IndexError(f"positions [{a}, {b}) are not within [0, {lengths.shape[0]}]")
    out = np.empty(b - a, dtype=np.int64)
    cdef int64_t[::1] ov = out
    cdef Py_ssize_t p = a, n = 0
    cdef int64_t total
    cdef bint have
    with nogil:
        while p < b:
            total = 0
            have = False
            while p < b and _takes(total, lengths[p], size, have):
                total += lengths[p]
                have = True
                p += 1
                if total >= size:
                    break
            ov[n] = p
            n += 1
    return out[:n]


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
            if not _takes(total, L, size, have_first):
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


def take_picks(object sel_, Py_ssize_t lo, object chunk_, object pos_j_, object pos_len_, object orig_,
               int64_t sweep):
    """What the picker keeps of the share-relative positions ``sel`` pick_run chose: (chunk id,
    index in the loaded chunk, length, sweep, position in the sweep) of each, in one call instead
    of five NumPy operations a minibatch. chunk: per sweep position; pos_j/pos_len: per share
    position (from ``lo``); orig: the sweep positions of an elastic run (None: lo + sel)."""
    cdef Py_ssize_t S, nc, nj, nl, no = 0, i
    cdef const int64_t* sel = _i64(sel_, &S, "sel")
    cdef const int64_t* chunk = _i64(chunk_, &nc, "chunk")
    cdef const int64_t* pj = _i64(pos_j_, &nj, "pos_j")
    cdef const int64_t* pl = _i64(pos_len_, &nl, "pos_len")
    cdef const int64_t* orig = NULL
    if orig_ is not None:
        orig = _i64(orig_, &no, "orig")
    if nj != nl or (orig != NULL and no != nj):
        raise ValueError(f"pos_j, pos_len and orig differ in length ({nj}, {nl}, {no})")
    if lo < 0 or lo + nj > nc:
        raise IndexError(f"share [{lo}, {lo + nj}) is not within the sweep's {nc} positions")
    for i in range(S):
        if sel[i] < 0 or sel[i] >= nj:
            raise IndexError(f"pick {i}: position {sel[i]} is out of range [0, {nj}) of the share")
    cids = np.empty(S, dtype=np.int64)
    js = np.empty(S, dtype=np.int64)
    lens = np.empty(S, dtype=np.int64)
    sweeps = np.empty(S, dtype=np.int64)
    positions = np.empty(S, dtype=np.int64)
    cdef int64_t* cv = <int64_t*>_out(cids)
    cdef int64_t* jv = <int64_t*>_out(js)
    cdef int64_t* lv = <int64_t*>_out(lens)
    cdef int64_t* wv = <int64_t*>_out(sweeps)
    cdef int64_t* pv = <int64_t*>_out(positions)
    with nogil:
        for i in range(S):
            cv[i] = chunk[lo + sel[i]]
            jv[i] = pj[sel[i]]
            lv[i] = pl[sel[i]]
            wv[i] = sweep
            pv[i] = orig[sel[i]] if orig != NULL else lo + sel[i]
    return cids, js, lens, sweeps, positions


# -- truncated BPTT (engine/bptt.py) ----------------------------------------------------------------
# A minibatch of S slots x T steps; each slot carries a queue of pending sequences (entries), the
# queues stored as flat arrays sorted by slot. Refill: bptt_need says how many sequences the next
# pick must pull (from the lengths of the upcoming positions), bptt_assign deals pulled sequences to
# the slots in CNTK's order. Assembly: bptt_plan lays the entries out on the (S, T) grid (flags,
# keys, offsets), bptt_copy_dense / bptt_scatter_sparse copy the values. Every index handed in
# (slots, chunk slots, sequences, offsets, spans) is checked here before it is used.

cdef int _check_rem(const int64_t[::1] rem, int64_t T) except -1:
    cdef Py_ssize_t s
    if T <= 0:
        raise ValueError(f"truncation length {T} <= 0")
    for s in range(rem.shape[0]):
        if rem[s] < 0:
            raise ValueError(f"slot {s}: {rem[s]} samples pending (< 0)")
    return 0


def bptt_need(const int64_t[::1] rem, int64_t T, const int64_t[::1] pos_j, const int64_t[::1] pos_len,
              Py_ssize_t a, Py_ssize_t b):
    """How many sequences to pull next so that no pulled sequence is left over.

    rem[s]: samples pending in slot s. A slot takes sequences (in position order) while it
    holds <= T samples; slots fill in order. Walks positions [a, b) (pos_j -1: dropped,
    skipped; -2: not loaded, stop) as the refill would; where it has to stop early, each
    slot still short needs at least one more sequence. Returns that count (0: all full).
    """
    cdef Py_ssize_t S = rem.shape[0], s = 0, p = a
    cdef int64_t m = 0, r = 0, j
    _check_rem(rem, T)
    if pos_len.shape[0] != pos_j.shape[0]:
        raise ValueError(f"pos_j and pos_len differ in length ({pos_j.shape[0]} vs {pos_len.shape[0]})")
    if a < 0 or a > b or b > pos_j.shape[0]:
        raise IndexError(f"positions [{a}, {b}) are not within [0, {pos_j.shape[0]}]")
    cdef vector[int64_t] pend
    pend.assign(&rem[0] if S > 0 else NULL, (&rem[0] if S > 0 else NULL) + S)
    while s < S and pend[s] > T:
        s += 1
    while s < S and p < b:
        j = pos_j[p]
        if j == -2:
            break
        if j >= 0:
            if pos_len[p] < 0:
                raise ValueError(f"position {p}: length {pos_len[p]} < 0")
            pend[s] += pos_len[p]
            m += 1
            while s < S and pend[s] > T:
                s += 1
        p += 1
    while s < S:
        if pend[s] <= T:
            r += 1
        s += 1
    return m + r


def bptt_assign(int64_t[::1] rem, int64_t T, const int64_t[::1] lengths):
    """The slot of each pulled sequence (in pull order); adds their lengths to rem in place.

    A sequence goes to the first slot holding <= T samples. A sequence no slot takes means the
    caller pulled too many (it must never happen): ValueError, nothing changed.
    """
    cdef Py_ssize_t S = rem.shape[0], n = lengths.shape[0], i, s = 0
    _check_rem(rem, T)
    cdef vector[int64_t] pend
    pend.assign(&rem[0] if S > 0 else NULL, (&rem[0] if S > 0 else NULL) + S)
    out = np.empty(n, dtype=np.int64)
    cdef int64_t[::1] ov = out
    for i in range(n):
        if lengths[i] < 0:
            raise ValueError(f"sequence {i}: length {lengths[i]} < 0")
        while s < S and pend[s] > T:
            s += 1
        if s == S:
            raise ValueError(f"sequence {i} of {n} pulled fits no slot: the refill pulled too many")
        ov[i] = s
        pend[s] += lengths[i]
    for s in range(S):
        rem[s] = pend[s]
    return out


def bptt_plan(const int64_t[::1] e_slot, const int64_t[::1] e_len, const int64_t[::1] e_off,
              const int64_t[::1] e_key, Py_ssize_t S, int64_t T):
    """Lay the pending entries (sorted by slot, queue order within a slot) out on S x T steps.

    Per slot, entries fill steps from 0: an entry takes min(steps left, samples left); one
    starting at its offset 0 marks ``starts[s, t]``; slot s ``continues`` when its first entry
    starts past offset 0; an entry with nothing left is done (dropped from the queue), one
    not reached waits. ``touched`` lists the keys in grid order, consecutive repeats once.
    Returns (e_t: step of each entry or -1 when not reached, e_n: samples it gives, new
    offsets, keep, mask, starts, keys, continues, touched).
    """
    cdef Py_ssize_t E = e_slot.shape[0], i = 0, s, nt = 0
    if e_len.shape[0] != E or e_off.shape[0] != E or e_key.shape[0] != E:
        raise ValueError("entry arrays differ in length")
    if S < 0 or T <= 0:
        raise ValueError(f"{S} slots of {T} steps")
    for i in range(E):
        if e_slot[i] < 0 or e_slot[i] >= S:
            raise IndexError(f"entry {i}: slot {e_slot[i]} is out of range [0, {S})")
        if i and e_slot[i] < e_slot[i - 1]:
            raise ValueError(f"entry {i}: entries are not sorted by slot")
        if e_off[i] < 0 or e_off[i] > e_len[i]:
            raise IndexError(f"entry {i}: offset {e_off[i]} is not within its {e_len[i]} samples")
    e_t = np.full(E, -1, dtype=np.int64)
    e_n = np.zeros(E, dtype=np.int64)
    new_off = np.array(e_off, dtype=np.int64)
    keep = np.ones(E, dtype=bool)
    mask = np.zeros((S, T), dtype=bool)
    starts = np.zeros((S, T), dtype=bool)
    keys = np.zeros((S, T), dtype=np.int64)
    continues = np.zeros(S, dtype=bool)
    touched = np.empty(E, dtype=np.int64)
    cdef int64_t[::1] tv = e_t, nv = e_n, ov = new_off, kv = keys.reshape(-1), tov = touched
    cdef cnp.npy_bool[::1] keepv = keep, mv = mask.reshape(-1), sv = starts.reshape(-1), cv = continues
    cdef int64_t t, n, off, u
    i = 0
    with nogil:
        for s in range(S):
            t = 0
            while i < E and e_slot[i] == s:
                if t >= T:
                    i += 1
                    continue
                off = e_off[i]
                n = e_len[i] - off
                if n > T - t:
                    n = T - t
                if t == 0 and off > 0:
                    cv[s] = True
                if off == 0:
                    sv[s * T + t] = True
                for u in range(t, t + n):
                    mv[s * T + u] = True
                    kv[s * T + u] = e_key[i]
                if nt == 0 or tov[nt - 1] != e_key[i]:
                    tov[nt] = e_key[i]
                    nt += 1
                tv[i] = t
                nv[i] = n
                ov[i] = off + n
                keepv[i] = off + n < e_len[i]
                t += n
                i += 1
    return e_t, e_n, new_off, keep, mask, starts, keys, continues, touched[:nt]


cdef int _check_entry(Py_ssize_t i, Py_ssize_t K, int64_t k, int64_t j, int64_t nseq, int64_t a, int64_t b,
                      int64_t nrows, int64_t off, int64_t t, int64_t n, int64_t slot, Py_ssize_t S,
                      int64_t T) except -1:
    _check_pick(i, k, K, j, nseq)
    _check_span(i, a, b, nrows, "samples")
    if off < 0 or n < 0 or off + n > b - a:
        raise IndexError(f"entry {i}: samples [{off}, {off + n}) are not within its {b - a}")
    if slot < 0 or slot >= S or t < 0 or t + n > T:
        raise IndexError(f"entry {i}: steps [{t}, {t + n}) of slot {slot} are not within {S} x {T}")
    return 0


def bptt_copy_dense(list rows, list offsets, const int64_t[::1] e_k, const int64_t[::1] e_j,
                    const int64_t[::1] e_off, const int64_t[::1] e_t, const int64_t[::1] e_n,
                    const int64_t[::1] e_slot, uint8_t[:, ::1] out, int64_t T):
    """Dense values: samples [off, off + n) of sequence e_j of chunk e_k into rows
    slot * T + t ... of ``out`` (S * T rows of row_bytes). Entries with e_n 0 copy nothing."""
    cdef Py_ssize_t E = e_k.shape[0], K = len(rows), i, k
    cdef Py_ssize_t row_bytes = out.shape[1]
    if not (e_j.shape[0] == e_off.shape[0] == e_t.shape[0] == e_n.shape[0] == e_slot.shape[0] == E):
        raise ValueError("entry arrays differ in length")
    if len(offsets) != K:
        raise ValueError(f"{K} row arrays but {len(offsets)} offset arrays")
    if T <= 0 or out.shape[0] % T:
        raise ValueError(f"output of {out.shape[0]} rows is not slots x {T} steps")
    cdef Py_ssize_t S = out.shape[0] // T
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
    cdef int64_t a, b
    for i in range(E):
        if e_n[i] == 0:
            continue
        k = e_k[i]
        _check_pick(i, k, K, e_j[i], nseq[k] if 0 <= k < K else 0)
        a = offs[k][e_j[i]]
        b = offs[k][e_j[i] + 1]
        _check_entry(i, K, k, e_j[i], nseq[k], a, b, nrows[k], e_off[i], e_t[i], e_n[i], e_slot[i], S, T)
    if row_bytes == 0:
        return
    with nogil:
        for i in range(E):
            if e_n[i] > 0:
                k = e_k[i]
                a = offs[k][e_j[i]] + e_off[i]
                memcpy(&out[e_slot[i] * T + e_t[i], 0], base[k] + a * row_bytes, e_n[i] * row_bytes)


ctypedef fused real_t:
    float
    double


def bptt_scatter_sparse(list values, list indices, list indptrs, list offsets, const int64_t[::1] e_k,
                        const int64_t[::1] e_j, const int64_t[::1] e_off, const int64_t[::1] e_t,
                        const int64_t[::1] e_n, const int64_t[::1] e_slot, real_t[:, ::1] out, int64_t T):
    """Sparse values densified: each non-zero of samples [off, off + n) of sequence e_j of chunk
    e_k is added (``+=``, so repeated indices sum, as scipy's toarray does) into row
    slot * T + t ... of the zeroed ``out`` (S * T, dim). values[k] must have out's dtype."""
    cdef Py_ssize_t E = e_k.shape[0], K = len(values), i, k
    cdef int64_t dim = out.shape[1]
    if not (e_j.shape[0] == e_off.shape[0] == e_t.shape[0] == e_n.shape[0] == e_slot.shape[0] == E):
        raise ValueError("entry arrays differ in length")
    if not (len(indices) == len(indptrs) == len(offsets) == K):
        raise ValueError("values, indices, indptrs and offsets must list the same chunks")
    if T <= 0 or out.shape[0] % T:
        raise ValueError(f"output of {out.shape[0]} rows is not slots x {T} steps")
    cdef Py_ssize_t S = out.shape[0] // T
    cdef vector[const real_t*] vb
    cdef vector[const int32_t*] ib
    cdef vector[const int64_t*] pb
    cdef vector[const int64_t*] ob
    cdef vector[int64_t] nseq, nrows, nnz
    cdef const real_t[::1] v
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
        nnz.push_back(min(<int64_t>v.shape[0], <int64_t>ix.shape[0]))
    cdef int64_t a, b, lo, hi, z, row, c
    for i in range(E):
        if e_n[i] == 0:
            continue
        k = e_k[i]
        _check_pick(i, k, K, e_j[i], nseq[k] if 0 <= k < K else 0)
        a = ob[k][e_j[i]]
        b = ob[k][e_j[i] + 1]
        _check_entry(i, K, k, e_j[i], nseq[k], a, b, nrows[k], e_off[i], e_t[i], e_n[i], e_slot[i], S, T)
        lo = a + e_off[i]
        hi = lo + e_n[i]
        _check_span(i, pb[k][lo], pb[k][hi], nnz[k], "non-zeros")
        for row in range(lo, hi):
            if pb[k][row] > pb[k][row + 1] or pb[k][row] < pb[k][lo]:
                raise IndexError(f"entry {i}: indptr decreases at sample {row} of its chunk")
        for z in range(pb[k][lo], pb[k][hi]):
            if ib[k][z] < 0 or ib[k][z] >= dim:
                raise IndexError(f"entry {i}: sparse index {ib[k][z]} is out of range [0, {dim})")
    with nogil:
        for i in range(E):
            if e_n[i] > 0:
                k = e_k[i]
                lo = ob[k][e_j[i]] + e_off[i]
                row = e_slot[i] * T + e_t[i]
                for c in range(e_n[i]):
                    for z in range(pb[k][lo + c], pb[k][lo + c + 1]):
                        out[row + c, ib[k][z]] += vb[k][z]


def copy_segments(const uint8_t[::1] src, const int64_t[::1] src_starts, const int64_t[::1] lengths,
                  uint8_t[::1] dst, const int64_t[::1] dst_starts):
    """``dst[dst_starts[i] : + lengths[i]] = src[src_starts[i] : + lengths[i]]`` for every i: the
    scatter an encoder needs to interleave per-record pieces (headers, keys, column bytes) into one
    buffer without a Python operation per record. Every span is checked against both buffers first."""
    cdef Py_ssize_t n = lengths.shape[0], i
    if src_starts.shape[0] != n or dst_starts.shape[0] != n:
        raise ValueError(f"{src_starts.shape[0]} source starts, {dst_starts.shape[0]} destination starts, "
                         f"{n} lengths")
    cdef int64_t ns = src.shape[0], nd = dst.shape[0]
    for i in range(n):
        if lengths[i] < 0 or src_starts[i] < 0 or dst_starts[i] < 0 \
                or src_starts[i] > ns - lengths[i] or dst_starts[i] > nd - lengths[i]:
            raise IndexError(f"segment {i}: {lengths[i]} bytes from {src_starts[i]} to {dst_starts[i]} is outside "
                             f"the source ({ns} bytes) or the destination ({nd} bytes)")
    with nogil:
        for i in range(n):
            if lengths[i]:
                memcpy(&dst[dst_starts[i]], &src[src_starts[i]], lengths[i])
