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
from recordkit.formats._protowire cimport get_varint, put_varint, varint_size
from libc.string cimport memcmp, memcpy

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



# ---------------------------------------------------------------------------------------------
# Reading: the canonical SequenceExample layout (what recordkit, TensorFlow and the protobuf
# package write: length-delimited fields with one-byte tags, packed lists, one ``feature_lists``
# field and one entry per name), walked record by record in C. Anything else returns None and the
# reader falls back to protobuf, which also locates damage. The tests compare every result with
# the protobuf path's chunks.

cdef inline Py_ssize_t _field(const uint8_t* b, Py_ssize_t pos, Py_ssize_t end, uint8_t* tag,
                              Py_ssize_t* body) noexcept nogil:
    """A length-delimited field with a one-byte tag at ``pos``: its tag, body start (``body``) and
    end (returned), or -1."""
    cdef uint64_t n
    cdef Py_ssize_t a
    if pos >= end:
        return -1
    tag[0] = b[pos]
    if tag[0] & 0x87 != 2:    # wire type 2, field number < 16
        return -1
    a = get_varint(b, pos + 1, end, &n)
    if a < 0 or n > <uint64_t>(end - a):
        return -1
    body[0] = a
    return a + <Py_ssize_t>n


cdef inline Py_ssize_t _map_entry(const uint8_t* b, Py_ssize_t x, Py_ssize_t e, Py_ssize_t* ks, Py_ssize_t* ke,
                                  Py_ssize_t* vs, Py_ssize_t* ve) noexcept nogil:
    """The map entry field ``{key: 1, value: 2}`` at ``x`` (within ``[x, e)``), key first (the
    canonical order): its end, its key's body in ``ks``/``ke``, its value's in ``vs``/``ve`` (an absent
    value is empty); -1 if not so."""
    cdef uint8_t t
    cdef Py_ssize_t xa
    cdef Py_ssize_t ex = _field(b, x, e, &t, &xa)
    if ex < 0 or t != 0x0A:
        return -1
    ke[0] = _field(b, xa, ex, &t, ks)
    if ke[0] < 0 or t != 0x0A:
        return -1
    vs[0] = ke[0]
    ve[0] = ke[0]
    if ke[0] < ex:
        ve[0] = _field(b, ke[0], ex, &t, vs)
        if ve[0] != ex or t != 0x12:
            return -1
    return ex


cdef inline int _name_index(const uint8_t* b, Py_ssize_t ks, Py_ssize_t ke, const uint8_t** nptr,
                            const Py_ssize_t* nlen, Py_ssize_t W) noexcept nogil:
    """Which of the ``W`` wanted names the key ``b[ks:ke]`` is (-1: none)."""
    cdef Py_ssize_t j
    for j in range(W):
        if nlen[j] == ke - ks and memcmp(b + ks, nptr[j], nlen[j]) == 0:
            return <int>j
    return -1


cdef void _wanted(list names, vector[const uint8_t*]& nptr, vector[Py_ssize_t]& nlen):
    """The wanted names' bytes as the walkers compare them (``names`` keeps them alive)."""
    for name in names:
        nptr.push_back(<const uint8_t*>(<bytes>name))
        nlen.push_back(len(<bytes>name))


cdef Py_ssize_t _payload(const uint8_t* b, Py_ssize_t p, Py_ssize_t fend, uint8_t list_tag,
                         Py_ssize_t* ps) noexcept nogil:
    """The packed values of the Feature body ``[p, fend)`` (``<list_tag>{packed}`` or empty):
    their length (start in ``ps``), or -1."""
    cdef uint8_t t
    cdef Py_ssize_t q, qe, r, re
    ps[0] = p
    if p == fend:
        return 0
    qe = _field(b, p, fend, &t, &q)
    if qe != fend or t != list_tag:
        return -1
    ps[0] = q
    if q == qe:
        return 0
    re = _field(b, q, qe, &t, &r)
    if re != qe or t != 0x0A:
        return -1     # unpacked values: protobuf reads them
    ps[0] = r
    return re - r


def sequence_examples(const uint8_t[::1] data, const int64_t[::1] offs, const int64_t[::1] lens, list names,
                      list list_tags, bytes key_name):
    """Every record's feature lists ``names`` (each sample ``Feature{<list_tags[j]>{packed values}}``,
    0x12 float_list, 0x1A int64_list, or empty) and its context feature ``key_name`` when that is
    ``Feature{int64_list{one value}}``, in one walk of each record's fields.

    Returns None where a record lacks a list or is not canonical, else (keys uint64, key found per
    record, samples per record and list (n, W), [payload starts per list], [payload lengths per
    list]), the payloads in (record, sample) order."""
    cdef Py_ssize_t n = offs.shape[0], W = len(names), r, j, pos, end, e, a, x, ex, xa, ke, ks, vs, ve
    cdef Py_ssize_t st, L, size = data.shape[0], after, k
    cdef const uint8_t* b = &data[0] if size else NULL
    cdef const uint8_t* kn = key_name
    cdef Py_ssize_t kl = len(key_name)
    cdef uint8_t t
    cdef int bad = 0, seen_ctx, seen_lists, hit
    cdef uint64_t value
    cdef vector[const uint8_t*] nptr
    cdef vector[Py_ssize_t] nlen
    cdef vector[uint8_t] ltag
    if len(list_tags) != W:
        raise ValueError(f"{W} names, {len(list_tags)} list tags")
    _wanted(names, nptr, nlen)
    for tag in list_tags:
        ltag.push_back(<uint8_t>tag)
    keys = np.zeros(n, dtype=np.uint64)
    found = np.zeros(n, dtype=np.bool_)
    counts = np.zeros((n, W), dtype=np.int64)
    body = np.full((n, W, 2), -1, dtype=np.int64)
    cdef uint64_t[::1] kv = keys
    cdef uint8_t[::1] fv = found.view(np.uint8)
    cdef int64_t[:, ::1] c = counts
    cdef int64_t[:, :, ::1] bd = body
    cdef vector[int64_t] total
    total.resize(W, 0)
    with nogil:
        for r in range(n):
            pos = offs[r]
            end = pos + lens[r]
            if pos < 0 or lens[r] < 0 or end > size:
                bad = 1
                break
            seen_ctx = 0
            seen_lists = 0
            while pos < end and not bad:
                e = _field(b, pos, end, &t, &a)
                if e < 0 or (t == 0x0A and seen_ctx) or (t == 0x12 and seen_lists) or (t != 0x0A and t != 0x12):
                    bad = 1
                    break
                x = a
                while x < e:
                    ex = _map_entry(b, x, e, &ks, &ke, &vs, &ve)
                    if ex < 0:
                        bad = 1
                        break
                    if not seen_ctx and b[pos] == 0x0A:   # a context entry: the key?
                        if ke - ks == kl and memcmp(b + ks, kn, kl) == 0:
                            if fv[r]:
                                bad = 1    # the key twice: protobuf merges, leave it to it
                                break
                            L = _payload(b, vs, ve, 0x1A, &st) if ve > vs else 0
                            if L > 0:
                                after = get_varint(b, st, st + L, &value)
                                if after == st + L:
                                    kv[r] = value
                                    fv[r] = 1
                    elif b[pos] == 0x12:
                        hit = _name_index(b, ks, ke, nptr.data(), nlen.data(), W)
                        if hit >= 0:
                            if bd[r, hit, 0] >= 0:
                                bad = 1    # a list twice
                                break
                            bd[r, hit, 0] = vs
                            bd[r, hit, 1] = ve
                            k = vs
                            while k < ve:   # its samples
                                ex = _field(b, k, ve, &t, &xa)
                                if ex < 0 or t != 0x0A:
                                    bad = 1
                                    break
                                c[r, hit] += 1
                                k = ex
                            if bad:
                                break
                            total[hit] += c[r, hit]
                    x = ex
                if b[pos] == 0x0A:
                    seen_ctx = 1
                else:
                    seen_lists = 1
                pos = e
            if bad:
                break
            for j in range(W):
                if bd[r, j, 0] < 0:
                    bad = 1   # a record without the list: protobuf reports it
                    break
            if bad:
                break
    if bad:
        return None
    starts, lengths = [], []
    cdef int64_t[::1] so
    cdef int64_t[::1] lo
    for j in range(W):
        sa = np.empty(total[j], dtype=np.int64)
        la = np.empty(total[j], dtype=np.int64)
        starts.append(sa)
        lengths.append(la)
        so = sa
        lo = la
        k = 0
        with nogil:
            for r in range(n):
                x = bd[r, j, 0]
                while x < bd[r, j, 1]:
                    ex = _field(b, x, bd[r, j, 1], &t, &xa)
                    L = _payload(b, xa, ex, ltag[j], &st)
                    if L < 0:
                        bad = 1
                        break
                    so[k] = st
                    lo[k] = L
                    k += 1
                    x = ex
                if bad:
                    break
        if bad:
            return None
    return keys, found, counts, starts, lengths


def packed_varints(const uint8_t[::1] data, const int64_t[::1] starts, const int64_t[::1] lengths):
    """The packed varints of each payload ``data[starts[i]:starts[i] + lengths[i]]``: (values as
    uint64, values per payload), or None when a varint runs past its payload or is too long."""
    cdef Py_ssize_t n = starts.shape[0], i, p, end, size = data.shape[0], total = 0, k = 0
    for i in range(n):
        if starts[i] < 0 or lengths[i] < 0 or starts[i] + lengths[i] > size:
            raise ValueError(f"range {i} ({starts[i]}, {lengths[i]}) outside {size} bytes")
        total += lengths[i]
    values = np.empty(total, dtype=np.uint64)   # a varint is at least one byte
    per = np.zeros(n, dtype=np.int64)
    cdef uint64_t[::1] v = values
    cdef int64_t[::1] c = per
    cdef const uint8_t* b = &data[0] if size else NULL
    cdef int bad = 0
    with nogil:
        for i in range(n):
            p = starts[i]
            end = p + lengths[i]
            while p < end:
                p = get_varint(b, p, end, &v[k])
                if p < 0:
                    bad = 1
                    break
                k += 1
                c[i] += 1
            if bad:
                break
    if bad:
        return None
    return values[:k], per


def example_features(const uint8_t[::1] data, const int64_t[::1] offs, const int64_t[::1] lens, list names):
    """The features ``names`` of every ``tf.train.Example`` record, canonical layout only (one
    ``features`` field per record, map entries key then value, a name at most once a record).

    Returns (tags, starts, lengths, all_known) or None: ``tags[r, j]`` is the list tag of record r's
    feature j (0x12 float_list, 0x1A int64_list, 0x0A bytes_list; 0 absent, 0xFF an empty Feature),
    ``starts``/``lengths`` its packed payload (float and int64 lists; -1 otherwise); ``all_known``:
    every feature of every record is one of ``names``."""
    cdef Py_ssize_t n = offs.shape[0], W = len(names), r, j, pos, end, e, a, x, ex, xa, vs, ve, ks, ke, st, L
    cdef Py_ssize_t size = data.shape[0]
    cdef const uint8_t* b = &data[0] if size else NULL
    cdef uint8_t t
    cdef int bad = 0, known = 1, hit, nfields
    cdef vector[const uint8_t*] nptr
    cdef vector[Py_ssize_t] nlen
    _wanted(names, nptr, nlen)
    tags = np.zeros((n, W), dtype=np.uint8)
    starts = np.full((n, W), -1, dtype=np.int64)
    lengths = np.full((n, W), -1, dtype=np.int64)
    cdef uint8_t[:, ::1] tg = tags
    cdef int64_t[:, ::1] so = starts
    cdef int64_t[:, ::1] lo = lengths
    with nogil:
        for r in range(n):
            pos = offs[r]
            end = pos + lens[r]
            if pos < 0 or lens[r] < 0 or end > size:
                bad = 1
                break
            nfields = 0
            while pos < end:
                e = _field(b, pos, end, &t, &a)
                if e < 0 or t != 0x0A or nfields:
                    bad = 1
                    break
                nfields = 1
                x = a
                while x < e:
                    ex = _map_entry(b, x, e, &ks, &ke, &vs, &ve)
                    if ex < 0:
                        bad = 1
                        break
                    hit = _name_index(b, ks, ke, nptr.data(), nlen.data(), W)
                    if hit < 0:
                        known = 0
                    elif tg[r, hit] != 0:
                        bad = 1      # a name twice: protobuf merges, leave it to it
                        break
                    elif ve == vs:
                        tg[r, hit] = 0xFF
                    else:
                        tg[r, hit] = b[vs]
                        if b[vs] == 0x12 or b[vs] == 0x1A:
                            L = _payload(b, vs, ve, b[vs], &st)
                            if L < 0:
                                bad = 1
                                break
                            so[r, hit] = st
                            lo[r, hit] = L
                    x = ex
                if bad:
                    break
                pos = e
            if bad or not nfields:
                bad = 1
                break
    if bad:
        return None
    return tags, starts, lengths, bool(known)
