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


def gather_padded(list rows, list offsets, object slot_, object seq_, Py_ssize_t row_bytes):
    """Dense: sequences seq[i] of chunk slot[i] into a (S*T, row_bytes) zero-padded byte array.

    rows[k]: chunk k's values as a C-contiguous (samples, row_bytes) uint8 array;
    offsets[k]: its per-sequence sample offsets, or None when every sequence of the chunk is
    one sample (frames: sequence j is row j, no offset to look up). T is the longest picked
    sequence. Returns (out, lengths, T).
    """
    cdef Py_ssize_t S, S2, K = len(rows), i, k, ii
    cdef Py_ssize_t shp[2]
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if len(offsets) != K:
        raise ValueError(f"{K} row arrays but {len(offsets)} offset arrays")
    if row_bytes < 0:
        raise ValueError(f"row_bytes {row_bytes} < 0")
    cdef vector[const uint8_t*] base
    cdef vector[const int64_t*] offs
    cdef vector[int64_t] nseq, nrows
    cdef const uint8_t* r
    cdef const int64_t* o
    cdef bint all_frames = True
    for k in range(K):
        r = <const uint8_t*>_data(rows[k], cnp.NPY_UINT8, 2, shp, "rows")
        if shp[1] != row_bytes and shp[0] > 0:
            raise ValueError(f"chunk slot {k}: rows of {shp[1]} bytes, expected {row_bytes}")
        base.push_back(r if shp[0] > 0 else NULL)
        nrows.push_back(shp[0])
        if offsets[k] is None:
            offs.push_back(NULL)
            nseq.push_back(shp[0])
        else:
            o = _i64(offsets[k], shp, "offsets")
            if shp[0] < 1:
                raise ValueError(f"chunk slot {k}: empty offset array")
            offs.push_back(o)
            nseq.push_back(shp[0] - 1)
            all_frames = False
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], nseq[slot[i]] if 0 <= slot[i] < K else 0)
    lengths = np.empty(S, dtype=np.int64)
    cdef int64_t* lv = <int64_t*>_out(lengths)
    cdef vector[int64_t] first
    first.resize(S if S > 0 else 1)
    cdef int64_t a, b, n
    cdef Py_ssize_t T = 0
    if all_frames:
        with nogil:
            for i in range(S):
                first[i] = seq[i]
                lv[i] = 1
        T = 1 if S > 0 else 0
    else:
        for i in range(S):
            if offs[slot[i]] == NULL:
                a = seq[i]
                b = a + 1
            else:
                if i + AHEAD < S and offs[slot[i + AHEAD]] != NULL:
                    ii = i + AHEAD
                    RK_PREFETCH(offs[slot[ii]] + seq[ii])
                a = offs[slot[i]][seq[i]]
                b = offs[slot[i]][seq[i] + 1]
                _check_span(i, a, b, nrows[slot[i]], "rows")
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
                _prefetch_span(base[slot[ii]] + first[ii] * row_bytes, lv[ii] * row_bytes)
            n = lv[i]
            if n > 0 and row_bytes > 0:
                memcpy(ov + i * T * row_bytes, base[slot[i]] + first[i] * row_bytes, n * row_bytes)
            if n < T and row_bytes > 0:
                memset(ov + (i * T + n) * row_bytes, 0, (T - n) * row_bytes)
    return out, lengths, T


def gather_sparse(list values, list indices, list indptrs, list offsets, object slot_, object seq_,
                  Py_ssize_t itemsize):
    """Sparse: the picked sequences' samples, concatenated: (values bytes, indices, indptr, lengths,
    sequence offsets: where each sequence's samples start in indptr, and the end)."""
    cdef Py_ssize_t S, S2, K = len(values), i, k, j, ii
    cdef Py_ssize_t nv, ni, np_, no
    cdef const int64_t* slot = _i64(slot_, &S, "slot")
    cdef const int64_t* seq = _i64(seq_, &S2, "seq")
    _check_lengths(S, S2)
    if not (len(indices) == len(indptrs) == len(offsets) == K):
        raise ValueError("values, indices, indptrs and offsets must list the same chunks")
    if itemsize <= 0:
        raise ValueError(f"itemsize {itemsize} <= 0")
    cdef vector[const uint8_t*] vb
    cdef vector[const int32_t*] ib
    cdef vector[const int64_t*] pb
    cdef vector[const int64_t*] ob
    cdef vector[int64_t] nseq, nrows, nnz
    cdef const uint8_t* v
    cdef const int32_t* ix
    for k in range(K):
        v = <const uint8_t*>_data(values[k], cnp.NPY_UINT8, 1, &nv, "values")
        ix = <const int32_t*>_data(indices[k], cnp.NPY_INT32, 1, &ni, "indices")
        pb.push_back(_i64(indptrs[k], &np_, "indptr"))
        ob.push_back(_i64(offsets[k], &no, "offsets"))
        if no < 1 or np_ < 1:
            raise ValueError(f"chunk slot {k}: empty offset or indptr array")
        vb.push_back(v if nv > 0 else NULL)
        ib.push_back(ix if ni > 0 else NULL)
        nseq.push_back(no - 1)
        nrows.push_back(np_ - 1)
        nnz.push_back(min(<int64_t>(nv // itemsize), <int64_t>ni))
    for i in range(S):
        _check_pick(i, slot[i], K, seq[i], nseq[slot[i]] if 0 <= slot[i] < K else 0)
    cdef int64_t total_rows = 0, total_nnz = 0, a, b, lo, hi
    cdef vector[int64_t] first
    first.resize(S if S > 0 else 1)
    for i in range(S):
        if i + AHEAD < S:
            ii = i + AHEAD
            RK_PREFETCH(ob[slot[ii]] + seq[ii])
        if i + AHEAD // 2 < S:  # its offsets were asked for AHEAD/2 picks ago: now its row pointers
            ii = i + AHEAD // 2
            RK_PREFETCH(pb[slot[ii]] + ob[slot[ii]][seq[ii]])
        a = ob[slot[i]][seq[i]]
        b = ob[slot[i]][seq[i] + 1]
        _check_span(i, a, b, nrows[slot[i]], "samples")
        lo = pb[slot[i]][a]
        hi = pb[slot[i]][b]
        _check_span(i, lo, hi, nnz[slot[i]], "non-zeros")
        for j in range(a, b):
            if pb[slot[i]][j] > pb[slot[i]][j + 1] or pb[slot[i]][j] < lo:
                raise IndexError(f"pick {i}: indptr decreases at sample {j} of its chunk")
        if hi > lo:  # the copy below comes to these soon
            _prefetch_span(vb[slot[i]] + lo * itemsize, (hi - lo) * itemsize)
            _prefetch_span(ib[slot[i]] + lo, (hi - lo) * 4)
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
    cdef const int64_t* pp
    with nogil:
        for i in range(S):
            a = first[i]
            b = ob[slot[i]][seq[i] + 1]
            lv[i] = b - a
            sv[i] = row
            pp = pb[slot[i]]
            lo = pp[a]
            hi = pp[b]
            for j in range(a, b):
                pv[row] = nz + pp[j] - lo
                row += 1
            z = hi - lo
            if z > 0:
                memcpy(vv + nz * itemsize, vb[slot[i]] + lo * itemsize, z * itemsize)
                memcpy(iv + nz, ib[slot[i]] + lo, z * 4)
            nz += z
        pv[row] = nz
        sv[S] = row
    return out_v, out_i, out_p, lengths, seq_offsets


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
