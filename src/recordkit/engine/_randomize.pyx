# distutils: language = c++
# cython: language_level=3
"""CNTK 2.7's block randomization, draw for draw (std::mt19937_64, as CNTK uses it).

Reproducing CNTK's order for a seed needs its exact generator and its exact use of
it (RandomOrdering.h, ChunkRandomizer.cpp, SequenceRandomizer.cpp): a random index
in [a, b) is a + (draw mod (b - a)); the chunk shuffle swaps p[i] with p[draw mod C]
for every i (not Fisher-Yates); the sequence shuffle rejects draws whose swap would
move a sequence outside its chunk's randomization window. The C++ standard fixes
mt19937_64's output, so these orders are the same on every platform.
"""
from libc.stdint cimport uint64_t, int64_t
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp

cnp.import_array()


cdef extern from "<random>" namespace "std" nogil:
    cdef cppclass mt19937_64:
        mt19937_64(uint64_t seed)
        uint64_t operator()()


def mt19937_64_draws(uint64_t seed, Py_ssize_t n):
    """The first n outputs of std::mt19937_64(seed) (for tests and documentation)."""
    if n < 0:
        raise ValueError(f"draw count {n} < 0")
    cdef mt19937_64* g = new mt19937_64(seed)
    cdef cnp.ndarray[cnp.uint64_t, ndim=1] out = np.empty(n, dtype=np.uint64)
    cdef Py_ssize_t i
    try:
        for i in range(n):
            out[i] = g[0]()
    finally:
        del g
    return out


def shuffle_chunks(Py_ssize_t num_chunks, uint64_t seed):
    """CNTK's chunk permutation: randomized chunk k is original chunk p[k]."""
    if num_chunks < 0:
        raise ValueError(f"chunk count {num_chunks} < 0")
    cdef cnp.ndarray[cnp.int64_t, ndim=1] p = np.arange(num_chunks, dtype=np.int64)
    cdef mt19937_64* g = new mt19937_64(seed)
    cdef Py_ssize_t i, j
    cdef int64_t tmp
    try:
        if num_chunks > 0:
            for i in range(num_chunks):
                j = <Py_ssize_t>(g[0]() % <uint64_t>num_chunks)
                tmp = p[i]
                p[i] = p[j]
                p[j] = tmp
    finally:
        del g
    return p


def shuffle_sequences(const int64_t[::1] seq_counts, const int64_t[::1] win_begin, const int64_t[::1] win_end,
                      uint64_t seed):
    """CNTK's rolling sequence shuffle over one sweep, run in one pass.

    seq_counts[k]: sequences of randomized chunk k; [win_begin[k], win_end[k]): its
    window in randomized chunk indexes. Returns (source_chunk, source_index): for each
    position of the sweep, the randomized chunk the sequence there came from and its
    index inside that chunk.
    """
    cdef Py_ssize_t C = seq_counts.shape[0]
    cdef Py_ssize_t k, t, j, i
    cdef vector[int64_t] start
    cdef int64_t n = 0
    # checked at the boundary (never trust what this kernel did not compute): a window must hold
    # its own chunk, lie within [0, C], and the sweep's sequence count must be sane
    if win_begin.shape[0] != C or win_end.shape[0] != C:
        raise ValueError(f"{C} chunks but {win_begin.shape[0]}/{win_end.shape[0]} window bounds")
    start.resize(C + 1)
    for k in range(C):
        if seq_counts[k] < 0 or seq_counts[k] > (1 << 40):
            raise ValueError(f"chunk {k}: sequence count {seq_counts[k]} is out of range")
        if not (0 <= win_begin[k] <= k < win_end[k] <= C):
            raise ValueError(f"chunk {k}: window [{win_begin[k]}, {win_end[k]}) does not hold it within [0, {C}]")
        start[k] = n
        n += seq_counts[k]
    start[C] = n
    cdef cnp.ndarray[cnp.int64_t, ndim=1] src = np.empty(n, dtype=np.int64)
    cdef cnp.ndarray[cnp.int64_t, ndim=1] idx = np.empty(n, dtype=np.int64)
    cdef vector[int64_t] owner
    owner.resize(n)
    cdef int64_t[::1] src_v = src
    cdef int64_t[::1] idx_v = idx
    for k in range(C):
        for i in range(seq_counts[k]):
            owner[start[k] + i] = k
            src_v[start[k] + i] = k
            idx_v[start[k] + i] = i
    cdef mt19937_64* g = new mt19937_64(seed)
    cdef int64_t c, b, e, pb, pe, sj, oj, st, tmp
    try:
        with nogil:
            for t in range(n):
                c = owner[t]
                b = win_begin[c]
                e = win_end[c]
                pb = start[b]
                pe = start[e]
                while True:
                    j = pb + <int64_t>(g[0]() % <uint64_t>(pe - pb))
                    sj = src_v[j]
                    if sj < b or sj >= e:
                        continue
                    oj = owner[j]
                    st = src_v[t]
                    if st < win_begin[oj] or st >= win_end[oj]:
                        continue
                    break
                tmp = src_v[t]
                src_v[t] = src_v[j]
                src_v[j] = tmp
                tmp = idx_v[t]
                idx_v[t] = idx_v[j]
                idx_v[j] = tmp
    finally:
        del g
    return src, idx
