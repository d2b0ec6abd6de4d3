# cython: language_level=3
"""Compiled TFRecord encoding: sparse feature lists, the framing of whole runs of records (CRC-32C
included), and the framing scan of a file.

For sparse one-hot sequences (millions of tiny samples) NumPy columns, masks and per-record Python
calls cost more than the bytes; these loops write the same bytes directly, the GIL released.
An empty list is written as ``Feature{<list>{}}``, as protobuf does. The tests compare every
function with a reference built another way (NumPy columns, the writer's per-record path, the
``crc32c`` package).
"""
from libc.stdint cimport int64_t, int32_t, uint8_t, uint64_t, uint32_t
from libcpp.vector cimport vector
from recordkit.formats._protowire cimport put_varint, varint_size
from libc.string cimport memcpy

import numpy as np


cdef inline int64_t _vput(uint8_t* out, int64_t at, uint64_t v) noexcept nogil:
    """The varint of ``v`` at ``out[at]``; the position after it."""
    return at + put_varint(out + at, v)


# ---------------------------------------------------------------------------------------------
# Framing: ``uint64 length | masked crc32c(length) | data | masked crc32c(data)`` for many records
# at once. Computing the two CRCs record by record from Python (the ``crc32c`` package, one call
# and one memoryview slice each) cost more than building the records: 460 k calls for the 229 k
# sequences of the benchmark's sequence corpus. CRC-32C is the SSE4.2 ``crc32`` instruction where
# the CPU has it (checked at run time), else a table; both are compared with the ``crc32c``
# package in tests/test_tfrecord.py.

cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    static uint32_t rk_crc_table[256];
    static int rk_crc_mode = -1;   /* -1 not chosen yet, 0 table, 1 SSE4.2 */
    static uint32_t rk_crc32c_table(uint32_t crc, const uint8_t* p, size_t n) {
        crc = ~crc;
        while (n--) crc = rk_crc_table[(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
        return ~crc;
    }
    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <nmmintrin.h>
    __attribute__((target("sse4.2")))
    static uint32_t rk_crc32c_hw(uint32_t crc, const uint8_t* p, size_t n) {
        uint64_t c = ~crc & 0xFFFFFFFFu;
        while (n >= 8) { uint64_t v; memcpy(&v, p, 8); c = _mm_crc32_u64(c, v); p += 8; n -= 8; }
        uint32_t c32 = (uint32_t)c;
        while (n--) c32 = _mm_crc32_u8(c32, *p++);
        return ~c32;
    }
    static int rk_cpu_has_crc(void) { __builtin_cpu_init(); return __builtin_cpu_supports("sse4.2"); }
    #else
    static uint32_t rk_crc32c_hw(uint32_t crc, const uint8_t* p, size_t n) { return rk_crc32c_table(crc, p, n); }
    static int rk_cpu_has_crc(void) { return 0; }
    #endif
    static void rk_crc_choose(int allow_hw) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
            rk_crc_table[i] = c;
        }
        rk_crc_mode = (allow_hw && rk_cpu_has_crc()) ? 1 : 0;
    }
    static inline uint32_t rk_crc32c(const uint8_t* p, size_t n) {
        return rk_crc_mode == 1 ? rk_crc32c_hw(0, p, n) : rk_crc32c_table(0, p, n);
    }
    static inline uint32_t rk_masked(uint32_t c) {
        return (((c >> 15) | (c << 17)) + 0xA282EAD8u);
    }
    """
    int rk_crc_mode
    void rk_crc_choose(int allow_hw) nogil
    uint32_t rk_crc32c(const uint8_t* p, size_t n) nogil
    uint32_t rk_masked(uint32_t c) nogil


rk_crc_choose(1)


def crc_implementation() -> str:
    """'sse4.2' or 'table': how this process computes CRC-32C."""
    return "sse4.2" if rk_crc_mode == 1 else "table"


def use_table_crc(bint table) -> None:
    """Compute CRC-32C with the table even where the CPU has the instruction (tests compare both)."""
    rk_crc_choose(0 if table else 1)


def crc32c(const uint8_t[::1] data) -> int:
    """The plain CRC-32C of ``data`` (what the ``crc32c`` package's ``crc32c`` returns)."""
    cdef uint32_t c
    with nogil:
        c = rk_crc32c(&data[0] if data.shape[0] else NULL, data.shape[0])
    return c


cdef inline void _put_u32(uint8_t* o, uint32_t v) noexcept nogil:
    o[0] = v & 0xFF
    o[1] = (v >> 8) & 0xFF
    o[2] = (v >> 16) & 0xFF
    o[3] = (v >> 24) & 0xFF


cdef inline uint32_t _get_u32(const uint8_t* p) noexcept nogil:
    return p[0] | (<uint32_t>p[1] << 8) | (<uint32_t>p[2] << 16) | (<uint32_t>p[3] << 24)


def frame_sequence_examples(const uint64_t[::1] keys, list names, list bodies, list offsets):
    """The framed ``tf.train.SequenceExample`` records of a run of sequences, one after another.

    Record i: context ``{key: int64_list[keys[i]]}``, then for each feature list j the entry
    ``{names[j]: bodies[j][offsets[j][i]:offsets[j][i + 1]]}`` (the FeatureList bodies already
    encoded, wire.py), framed with both masked CRCs. The same bytes the column-wise NumPy
    framing wrote (tests/test_tfrecord.py keeps it as the reference).
    """
    cdef Py_ssize_t m = keys.shape[0], k = len(names), i, j
    if len(bodies) != k or len(offsets) != k:
        raise ValueError("names, bodies and offsets must list the same feature lists")
    cdef vector[const uint8_t*] bp
    cdef vector[const int64_t*] op
    cdef vector[int64_t] nlen
    cdef vector[const uint8_t*] npp
    cdef const uint8_t[::1] bv
    cdef const int64_t[::1] ov
    cdef const uint8_t[::1] nv
    keep = []
    for j in range(k):
        nm = names[j]
        if not isinstance(nm, bytes) or len(nm) == 0 or len(nm) > 127:
            raise ValueError(f"feature list name {nm!r}: 1 to 127 bytes expected")
        nv = nm
        keep.append(nm)
        npp.push_back(&nv[0])
        nlen.push_back(len(nm))
        bv = bodies[j]
        ov = offsets[j]
        if ov.shape[0] != m + 1:
            raise ValueError(f"feature list {j}: {ov.shape[0]} offsets for {m} records")
        for i in range(m):
            if ov[i] < 0 or ov[i] > ov[i + 1] or ov[i + 1] > bv.shape[0]:
                raise ValueError(f"feature list {j}, record {i}: body [{ov[i]}, {ov[i + 1]}) is not within "
                                 f"[0, {bv.shape[0]}]")
        bp.push_back(&bv[0] if bv.shape[0] else NULL)
        op.push_back(&ov[0])
    cdef int64_t total = 0, L, E, entries, klen, rec
    cdef vector[int64_t] rec_len
    rec_len.resize(m if m else 1)
    with nogil:
        for i in range(m):
            klen = varint_size(keys[i])
            entries = 0
            for j in range(k):
                L = op[j][i + 1] - op[j][i]
                E = 2 + nlen[j] + 1 + varint_size(<uint64_t>L) + L
                entries += 1 + varint_size(<uint64_t>E) + E
            rec = 15 + klen + 1 + varint_size(<uint64_t>entries) + entries
            rec_len[i] = rec
            total += 16 + rec
    out = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] outv = out
    cdef uint8_t* o = &outv[0] if total else NULL
    cdef int64_t at = 0, s0, d0, kf
    cdef uint64_t r64
    with nogil:
        for i in range(m):
            s0 = at
            r64 = <uint64_t>rec_len[i]
            for j in range(8):
                o[at + j] = (r64 >> (8 * j)) & 0xFF
            _put_u32(o + at + 8, rk_masked(rk_crc32c(o + at, 8)))
            at += 12
            d0 = at
            klen = varint_size(keys[i])
            kf = 4 + klen
            o[at] = 0x0A; o[at + 1] = <uint8_t>(2 + 7 + kf)
            o[at + 2] = 0x0A; o[at + 3] = <uint8_t>(7 + kf)
            o[at + 4] = 0x0A; o[at + 5] = 3; o[at + 6] = 0x6B; o[at + 7] = 0x65; o[at + 8] = 0x79  # "key"
            o[at + 9] = 0x12; o[at + 10] = <uint8_t>kf
            o[at + 11] = 0x1A; o[at + 12] = <uint8_t>(2 + klen)
            o[at + 13] = 0x0A; o[at + 14] = <uint8_t>klen
            at = _vput(o, at + 15, keys[i])
            entries = 0
            for j in range(k):
                L = op[j][i + 1] - op[j][i]
                E = 2 + nlen[j] + 1 + varint_size(<uint64_t>L) + L
                entries += 1 + varint_size(<uint64_t>E) + E
            o[at] = 0x12
            at = _vput(o, at + 1, <uint64_t>entries)
            for j in range(k):
                L = op[j][i + 1] - op[j][i]
                E = 2 + nlen[j] + 1 + varint_size(<uint64_t>L) + L
                o[at] = 0x0A
                at = _vput(o, at + 1, <uint64_t>E)
                o[at] = 0x0A
                o[at + 1] = <uint8_t>nlen[j]
                memcpy(o + at + 2, npp[j], nlen[j])
                at += 2 + nlen[j]
                o[at] = 0x12
                at = _vput(o, at + 1, <uint64_t>L)
                if L > 0:
                    memcpy(o + at, bp[j] + op[j][i], L)
                at += L
            _put_u32(o + at, rk_masked(rk_crc32c(o + d0, at - d0)))
            at += 4
    if at != total:
        raise AssertionError(f"framed {at} bytes, planned {total}")
    return out


def scan_frames(const uint8_t[::1] data, bint verify, int64_t max_record):
    """(data offsets, lengths, problem) of every record in ``data``; problem is None or
    (code, byte offset of the record, record index, length): 1 too few bytes for a header,
    2 length CRC mismatch, 3 record runs past the end (or >= max_record), 4 data CRC mismatch.
    The records before a problem are returned (framing.scan turns a problem into the error)."""
    cdef int64_t total = data.shape[0], pos = 0, n, start, count = 0, cap = 1024
    cdef const uint8_t* p = &data[0] if total else NULL
    cdef int code = 0
    cdef uint64_t n64
    offs = np.empty(cap, dtype=np.int64)
    lens = np.empty(cap, dtype=np.int64)
    cdef int64_t[::1] ov = offs
    cdef int64_t[::1] lv = lens
    while pos < total:
        if count == cap:
            cap *= 2
            offs = np.resize(offs, cap)
            lens = np.resize(lens, cap)
            ov = offs
            lv = lens
        with nogil:
            while pos < total and count < cap:
                if pos + 12 > total:
                    code = 1
                    break
                n64 = 0
                for n in range(8):
                    n64 |= (<uint64_t>p[pos + n]) << (8 * n)
                if verify and _get_u32(p + pos + 8) != rk_masked(rk_crc32c(p + pos, 8)):
                    code = 2
                    break
                start = pos + 12
                if n64 >= <uint64_t>max_record or <uint64_t>start + n64 + 4 > <uint64_t>total:
                    code = 3
                    break
                n = <int64_t>n64
                if verify and _get_u32(p + start + n) != rk_masked(rk_crc32c(p + start, n)):
                    code = 4
                    break
                ov[count] = start
                lv[count] = n
                count += 1
                pos = start + n + 4
        if code:
            break
    problem = None
    if code:
        n64 = 0
        if pos + 8 <= total:
            for n in range(8):
                n64 |= (<uint64_t>p[pos + n]) << (8 * n)
        problem = (code, pos, count, n64)
    return offs[:count].copy(), lens[:count].copy(), problem


# ---------------------------------------------------------------------------------------------
# Sparse streams: both feature lists (``NAME.indices``, ``NAME.values``) of a chunk in one pass

cdef inline int64_t _feature_size(int64_t L) noexcept nogil:
    """Bytes of ``Feature{<list>{value: L bytes packed}}`` (an empty list: ``Feature{<list>{}}``)."""
    cdef int64_t inner = (1 + varint_size(<uint64_t>L) + L) if L > 0 else 0
    cdef int64_t feature = 1 + varint_size(<uint64_t>inner) + inner
    return 1 + varint_size(<uint64_t>feature) + feature


cdef inline int64_t _feature_head(uint8_t* o, int64_t at, int64_t L, int list_tag) noexcept nogil:
    cdef int64_t inner = (1 + varint_size(<uint64_t>L) + L) if L > 0 else 0
    o[at] = 0x0A
    at = _vput(o, at + 1, <uint64_t>(1 + varint_size(<uint64_t>inner) + inner))
    o[at] = <uint8_t>list_tag
    at = _vput(o, at + 1, <uint64_t>inner)
    if L > 0:
        o[at] = 0x0A
        at = _vput(o, at + 1, <uint64_t>L)
    return at


ctypedef fused index_t:
    int32_t
    int64_t


def sparse_lists(const index_t[::1] indices, const uint8_t[::1] values4, const int64_t[::1] indptr,
                 const int64_t[::1] seq_offsets):
    """The FeatureList bodies of a sparse column: per sample, ``Feature{int64_list{indices}}``
    into one buffer and ``Feature{float_list{values}}`` into another (``values4``: the float32
    values' bytes). Returns (indices body, its per-sequence offsets, values body, offsets).

    The same bytes as varints + ``features`` twice (wire.py's composition, kept in the tests),
    without their per-index and per-sample temporaries (tens of MB per chunk of one-hot samples)."""
    cdef Py_ssize_t nnz = indices.shape[0], n = indptr.shape[0] - 1, S = seq_offsets.shape[0] - 1, i, s
    if n < 0 or S < 0:
        raise ValueError("indptr and seq_offsets need at least one entry")
    if values4.shape[0] != 4 * nnz:
        raise ValueError(f"{values4.shape[0]} value bytes for {nnz} indices (float32 expected)")
    if indptr[0] != 0 or indptr[n] != nnz:
        raise ValueError(f"indptr runs from {indptr[0]} to {indptr[n]}, the column has {nnz} non-zeros")
    for i in range(n):
        if indptr[i] > indptr[i + 1]:
            raise ValueError(f"indptr decreases at sample {i}")
    if seq_offsets[0] != 0 or seq_offsets[S] != n:
        raise ValueError(f"sequence offsets run from {seq_offsets[0]} to {seq_offsets[S]}, the column has {n} samples")
    for s in range(S):
        if seq_offsets[s] > seq_offsets[s + 1]:
            raise ValueError(f"sequence offsets decrease at sequence {s}")
    for i in range(nnz):
        if indices[i] < 0:
            raise ValueError(f"value {i} is negative ({indices[i]}): not a sparse index")
    cdef int64_t itot = 0, vtot = 0, L, z, k
    ioff = np.empty(S + 1, dtype=np.int64)
    voff = np.empty(S + 1, dtype=np.int64)
    cdef int64_t[::1] io = ioff
    cdef int64_t[::1] vo = voff
    with nogil:
        s = 0
        for i in range(n):
            while s < S and seq_offsets[s] == i:
                io[s] = itot
                vo[s] = vtot
                s += 1
            L = 0
            for k in range(indptr[i], indptr[i + 1]):
                L += varint_size(<uint64_t>indices[k])
            itot += _feature_size(L)
            vtot += _feature_size(4 * (indptr[i + 1] - indptr[i]))
        while s <= S:
            io[s] = itot
            vo[s] = vtot
            s += 1
    ibody = np.empty(itot, dtype=np.uint8)
    vbody = np.empty(vtot, dtype=np.uint8)
    cdef uint8_t[::1] ib = ibody
    cdef uint8_t[::1] vb = vbody
    cdef uint8_t* ip = &ib[0] if itot else NULL
    cdef uint8_t* vp = &vb[0] if vtot else NULL
    cdef int64_t ia = 0, va = 0
    with nogil:
        for i in range(n):
            L = 0
            for k in range(indptr[i], indptr[i + 1]):
                L += varint_size(<uint64_t>indices[k])
            ia = _feature_head(ip, ia, L, 0x1A)
            for k in range(indptr[i], indptr[i + 1]):
                ia = _vput(ip, ia, <uint64_t>indices[k])
            z = 4 * (indptr[i + 1] - indptr[i])
            va = _feature_head(vp, va, z, 0x12)
            if z > 0:
                memcpy(vp + va, &values4[4 * indptr[i]], z)
                va += z
    return ibody, ioff, vbody, voff
