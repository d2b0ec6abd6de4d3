# distutils: language = c++
# cython: language_level=3
"""Compiled CBF kernels: validate-and-gather a chunk, and encode a chunk.

A CBF chunk interleaves small u32/i32 headers with each sequence's values, so a
stream's values are not contiguous across sequences. `decode_chunk` walks the chunk
once to validate every count against the bytes that hold it (and sparse indices
against the dimension), then gathers each stream into one contiguous column with
memcpy. `encode_chunk` is the inverse. Both run without the GIL.
"""
from libc.stdint cimport uint64_t, int64_t, int32_t, uint32_t, uint8_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp

cnp.import_array()

# problem codes, interpreted in reader.py
DEF P_TRUNCATED_META = 1     # the per-sequence sample counts run past the chunk
DEF P_TRUNCATED = 2          # a sequence's data runs past the chunk (a = sequence, b = bytes needed)
DEF P_NEGATIVE_NNZ = 3       # nnz < 0
DEF P_INDEX_RANGE = 4        # a sparse index outside [0, dim) (a = index value)
DEF P_NNZ_SUM = 5            # per-sample nnz counts do not add up to NNZ (a = sum, b = NNZ)
DEF P_NEGATIVE_COUNT = 6     # a per-sample nnz < 0
DEF P_TRAILING = 7           # bytes left over after the last stream (a = count)
DEF P_TOO_SMALL = 8          # the chunk cannot hold a count per sequence per stream (a = needed, b = has)
DEF P_TABLE_SAMPLES = 9      # the sequences' sample counts do not add up to the offset table's (a = sum, b = table)

cdef struct Problem:
    int code
    int64_t stream
    int64_t seq
    int64_t offset   # byte offset inside the chunk
    int64_t a
    int64_t b

cdef struct Cursor:
    # where a gather part starts: record (stream s, sequence q) at byte pos, with `samples`
    # samples and `nnz` sparse entries of stream s in the sequences before q
    int64_t s
    int64_t q
    int64_t pos
    int64_t samples
    int64_t nnz

cdef inline uint32_t rd_u32(const uint8_t* p) noexcept nogil:
    cdef uint32_t v
    memcpy(&v, p, 4)
    return v

cdef inline int32_t rd_i32(const uint8_t* p) noexcept nogil:
    cdef int32_t v
    memcpy(&v, p, 4)
    return v


cdef bint _walk(const uint8_t* p, int64_t n, int64_t nseq, const uint8_t* sparse, const int64_t* dims,
                const int64_t* esize, int64_t nstreams, int64_t* samples, int64_t* nnz, int64_t* counts,
                Problem* prob, bint validate_indices, int64_t nparts, Cursor* cuts) noexcept nogil:
    """Pass 1: check every length against the chunk and count samples/nnz per stream.

    counts[s * nseq + q] = samples of stream s in sequence q. cuts[0..nparts] (when nparts > 0)
    split the records into nparts runs of about equal bytes for the gather: cut k is the first
    record starting at or after byte 4*nseq + k/nparts of the rest; cuts[nparts] is the end.
    """
    cdef int64_t pos = 4 * nseq
    cdef int64_t s, q, ns, z, k, need, total
    cdef int64_t cut = 0, body = n - 4 * nseq, boundary = 4 * nseq
    cdef int32_t idx, c
    if pos > n:
        prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRUNCATED_META, -1, -1, 0, pos, n
        return False
    for s in range(nstreams):
        samples[s] = 0
        nnz[s] = 0
        for q in range(nseq):
            while cut < nparts and pos >= boundary:
                cuts[cut].s, cuts[cut].q, cuts[cut].pos, cuts[cut].samples, cuts[cut].nnz = s, q, pos, samples[s], nnz[s]
                cut += 1
                boundary = 4 * nseq + body * cut // nparts
            if pos + 4 > n:
                prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRUNCATED, s, q, pos, 4, n - pos
                return False
            ns = rd_u32(p + pos)
            counts[s * nseq + q] = ns
            if not sparse[s]:
                # guard the multiplication: ns and dim are both attacker-controlled u32
                if ns > 0 and ns > (n - pos - 4) // (dims[s] * esize[s]):
                    prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = \
                        P_TRUNCATED, s, q, pos, 4 + ns * esize[s], n - pos
                    return False
                need = 4 + ns * dims[s] * esize[s]
                if pos + need > n:
                    prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRUNCATED, s, q, pos, need, n - pos
                    return False
                pos += need
                samples[s] += ns
                continue
            if pos + 8 > n:
                prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRUNCATED, s, q, pos, 8, n - pos
                return False
            z = rd_i32(p + pos + 4)
            if z < 0:
                prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_NEGATIVE_NNZ, s, q, pos + 4, z, 0
                return False
            need = 8 + z * esize[s] + z * 4 + ns * 4
            if pos + need > n:
                prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRUNCATED, s, q, pos, need, n - pos
                return False
            if validate_indices:
                k = pos + 8 + z * esize[s]
                for total in range(z):
                    idx = rd_i32(p + k + 4 * total)
                    if idx < 0 or idx >= dims[s]:
                        prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = \
                            P_INDEX_RANGE, s, q, k + 4 * total, idx, dims[s]
                        return False
            k = pos + 8 + z * esize[s] + z * 4
            total = 0
            for c in range(<int32_t>ns):
                idx = rd_i32(p + k + 4 * c)
                if idx < 0:
                    prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_NEGATIVE_COUNT, s, q, k + 4 * c, idx, 0
                    return False
                total += idx
            if total != z:
                prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_NNZ_SUM, s, q, k, total, z
                return False
            pos += need
            samples[s] += ns
            nnz[s] += z
    while cut <= nparts and nparts > 0:
        cuts[cut].s, cuts[cut].q, cuts[cut].pos, cuts[cut].samples, cuts[cut].nnz = nstreams, 0, pos, 0, 0
        cut += 1
    if pos != n:
        prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = P_TRAILING, -1, -1, pos, n - pos, 0
        return False
    return True


cdef int _check_streams(list sparse, list dims, list esizes) except -1:
    """The stream description a caller passes: one entry per stream in each list, dims within
    CBF's 32-bit range, element sizes of float or double (the kernel trusts no caller's input)."""
    if not (len(sparse) == len(dims) == len(esizes)):
        raise ValueError(f"sparse, dims and esizes describe {len(sparse)}, {len(dims)} and {len(esizes)} streams")
    for s in range(len(dims)):
        if not 0 < dims[s] <= 0x7FFFFFFF:
            raise ValueError(f"stream {s}: dim {dims[s]} is not within [1, 2^31-1]")
        if esizes[s] not in (4, 8):
            raise ValueError(f"stream {s}: element size {esizes[s]} is neither 4 nor 8")
    return 0


cdef int _check_part(int64_t s, object part, bint is_sp, int64_t dim, int64_t esz) except -1:
    """One part of a stream's column handed to encode_chunk: sequence offsets non-decreasing and
    within the samples, sparse indptr non-decreasing and within the values and indices."""
    cdef const int64_t[::1] so = part[3]
    cdef const int64_t[::1] ptr
    cdef int64_t n = so.shape[0], q, a, b, nvals
    if n < 1:
        raise ValueError(f"stream {s}: a part has an empty sequence-offset array")
    for q in range(n - 1):
        if so[q + 1] < so[q]:
            raise IndexError(f"stream {s}: sequence offsets decrease at sequence {q}")
    a, b = so[0], so[n - 1]
    if a < 0:
        raise IndexError(f"stream {s}: sequence offset {a} < 0")
    nvals = len(part[0])
    if not is_sp:
        if b * dim * esz > nvals:
            raise IndexError(f"stream {s}: sequences reach sample {b}, the values hold {nvals // (dim * esz)}")
        return 0
    ptr = part[2]
    if b >= ptr.shape[0]:
        raise IndexError(f"stream {s}: sequences reach sample {b}, indptr covers {ptr.shape[0] - 1}")
    for q in range(a, b):
        if ptr[q + 1] < ptr[q]:
            raise IndexError(f"stream {s}: indptr decreases at sample {q}")
    if ptr[a] < 0 or ptr[b] * esz > nvals or ptr[b] > len(part[1]):
        raise IndexError(f"stream {s}: indptr [{ptr[a]}, {ptr[b]}] is not within the {len(part[1])} indices/values")
    return 0


def decode_chunk(const uint8_t[::1] buf, int64_t nseq, list sparse, list dims, list esizes,
                 bint allow_trailing=False, int parts=1, run_parts=None):
    """Validate a chunk and gather its streams into contiguous columns.

    Returns (meta_counts uint32[nseq], columns, problem) where columns[s] is
    (values bytes-array, indices int32 | None, indptr int64 | None, counts int64[nseq])
    and problem is None or (code, stream, seq, offset, a, b). ``allow_trailing``
    accepts bytes after the last stream (CNTK's last chunk runs into the header).

    ``parts`` > 1 splits the gather into that many runs of records of about equal bytes,
    handed to ``run_parts(gather, parts)``, which must call ``gather(k)`` once for each k
    (each releases the GIL: a caller runs them on threads, so the first touches of the
    fresh column memory and the copies run in parallel).
    """
    _check_streams(sparse, dims, esizes)
    if nseq < 0:
        raise ValueError(f"nseq {nseq} < 0")
    if parts < 1:
        raise ValueError(f"parts {parts} < 1")
    cdef int64_t n = buf.shape[0]
    cdef int64_t ns = len(dims)
    cdef _Gather g = _Gather()
    cdef Problem prob
    cdef const uint8_t* p = &buf[0] if n > 0 else NULL
    cdef bint ok
    cdef int64_t s
    cdef uint8_t flag
    cdef vector[int64_t] samples, nnz
    for s in range(ns):
        flag = 1 if sparse[s] else 0  # via a typed local: Cython would bind a conditional to a dangling reference
        g.sp.push_back(flag)
        g.dm.push_back(dims[s])
        g.es.push_back(esizes[s])
    # every stream stores at least a 4-byte count per sequence: a chunk too small for that is
    # corrupt, and checking first keeps a few bytes of input from sizing a huge table below
    if nseq > 0 and n // 4 < nseq * (1 + ns):
        return None, None, (P_TOO_SMALL, -1, -1, 0, 4 * nseq * (1 + ns), n)
    samples.resize(ns)
    nnz.resize(ns)
    g.counts.resize(ns * nseq if nseq > 0 else 1)
    g.cuts.resize(parts + 1)
    prob.code = 0
    with nogil:
        ok = _walk(p, n, nseq, g.sp.data(), g.dm.data(), g.es.data(), ns, samples.data(), nnz.data(),
                   g.counts.data(), &prob, True, parts, g.cuts.data())
    if not ok and not (allow_trailing and prob.code == P_TRAILING):
        return None, None, (prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b)
    meta = np.frombuffer(bytes(buf[:4 * nseq]), dtype="<u4").copy() if nseq else np.zeros(0, np.uint32)
    arrays = []
    for s in range(ns):
        vals = np.empty(samples[s] * dims[s] * esizes[s] if not sparse[s] else nnz[s] * esizes[s], dtype=np.uint8)
        c = np.empty(nseq, dtype=np.int64)
        if nseq:
            memcpy(cnp.PyArray_DATA(c), g.counts.data() + s * nseq, nseq * sizeof(int64_t))
        g.vals.push_back(<uint8_t*>cnp.PyArray_DATA(vals))
        if sparse[s]:
            ind = np.empty(nnz[s], dtype=np.int32)
            ptr = np.empty(samples[s] + 1, dtype=np.int64)
            g.ind.push_back(<int32_t*>cnp.PyArray_DATA(ind))
            g.ptr.push_back(<int64_t*>cnp.PyArray_DATA(ptr))
            if nseq == 0:
                ptr[0] = 0
        else:
            ind = None
            ptr = None
            g.ind.push_back(NULL)
            g.ptr.push_back(NULL)
        arrays.append((vals, ind, ptr, c))
    g.buf = buf
    g.keep = arrays
    g.nseq = nseq
    if parts == 1 or run_parts is None:
        for s in range(parts):
            g.run(s)
    else:
        run_parts(g.run, parts)
        for s in range(parts):
            if not g.done[s]:
                raise RuntimeError(f"run_parts did not gather part {s} of {parts}")
    return meta, arrays, None




def decode_chunks(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] sizes,
                  const int64_t[::1] nseqs, const int64_t[::1] table_samples, list sparse, list dims,
                  list esizes, list dtypes, bint joined=False):
    """Validate and gather several chunks held in one buffer (a run of adjacent chunks read at
    once), each into arrays of its own: one call instead of one per chunk, and a chunk held or
    dropped alone frees exactly its own memory (none of them is a view of the others').

    Chunk c is ``buf[starts[c]:starts[c] + sizes[c]]`` with ``nseqs[c]`` sequences, whose counts
    must add up to ``table_samples[c]`` (the offset table's; -1: not checked). Returns
    (chunks, samples, problem): chunks[c] = (lengths int64[nseq], columns), columns[s] = (values of
    ``dtypes[s]`` ((samples, dim) dense, (nnz,) sparse), indices int32 | None, indptr int64 |
    None, seq_offsets int64[nseq + 1]); samples[c, s]: stream s's samples in chunk c; problem None
    or (c, code, stream, seq, offset, a, b), the first chunk found wrong: every chunk is checked before any column is allocated, and
    nothing is returned then.

    ``joined``: the chunks gathered into one set of arrays instead, as if they were one chunk of
    all their sequences in order (seq offsets and row pointers running across them): chunks is
    then [(lengths, columns)] of the whole run, one array per stream and kind instead of one per
    chunk (what a run held as one unit needs; its memory is freed all at once)."""
    _check_streams(sparse, dims, esizes)
    cdef int64_t nc = starts.shape[0], ns = len(dims), c, s, q, n, nseq, total_seq = 0, at
    if sizes.shape[0] != nc or nseqs.shape[0] != nc or table_samples.shape[0] != nc or len(dtypes) != ns:
        raise ValueError("starts, sizes, nseqs and table_samples describe different numbers of chunks, "
                         "or dtypes a different number of streams")
    for c in range(nc):
        if starts[c] < 0 or sizes[c] < 0 or starts[c] + sizes[c] > buf.shape[0] or nseqs[c] < 0:
            raise ValueError(f"chunk {c}: [{starts[c]}, +{sizes[c]}) with {nseqs[c]} sequences is not within "
                             f"the {buf.shape[0]} bytes")
        total_seq += nseqs[c]
    cdef vector[uint8_t] sp
    cdef vector[int64_t] dm, es, samples, nnz, counts, base
    cdef vector[Cursor] cuts
    cdef Problem prob
    cdef uint8_t flag
    cdef const uint8_t* p
    cdef bint ok
    cdef int64_t sum_meta
    for s in range(ns):
        flag = 1 if sparse[s] else 0  # via a typed local: Cython would bind a conditional to a dangling reference
        sp.push_back(flag)
        dm.push_back(dims[s])
        es.push_back(esizes[s])
    # the size check per chunk comes first: a few bytes of input must not size the count table
    for c in range(nc):
        if nseqs[c] > 0 and sizes[c] // 4 < nseqs[c] * (1 + ns):
            return None, None, (c, P_TOO_SMALL, -1, -1, 0, 4 * nseqs[c] * (1 + ns), sizes[c])
    samples.resize(ns * nc if ns * nc > 0 else 1)
    nnz.resize(ns * nc if ns * nc > 0 else 1)
    counts.resize(ns * total_seq if ns * total_seq > 0 else 1)
    base.resize(nc + 1)
    cuts.resize(2 * nc if nc > 0 else 1)
    prob.code = 0
    ok = True
    base[0] = 0
    for c in range(nc):
        base[c + 1] = base[c] + ns * nseqs[c]
    c = 0
    with nogil:
        while c < nc:
            p = &buf[0] + starts[c] if buf.shape[0] > 0 else NULL
            ok = _walk(p, sizes[c], nseqs[c], sp.data(), dm.data(), es.data(), ns, samples.data() + ns * c,
                       nnz.data() + ns * c, counts.data() + base[c], &prob, True, 1, cuts.data() + 2 * c)
            if not ok:
                break
            if table_samples[c] >= 0:
                sum_meta = 0
                for q in range(nseqs[c]):
                    sum_meta += rd_u32(p + 4 * q)
                if sum_meta != table_samples[c]:
                    prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b = \
                        P_TABLE_SAMPLES, -1, -1, 0, sum_meta, table_samples[c]
                    ok = False
                    break
            c += 1
    if not ok:
        return None, None, (c, prob.code, prob.stream, prob.seq, prob.offset, prob.a, prob.b)
    cdef vector[uint8_t*] vals
    cdef vector[int32_t*] ind
    cdef vector[int64_t*] ptr
    cdef vector[int64_t*] offs
    cdef vector[int64_t*] lens
    cdef int64_t* o
    cdef int64_t* cnt
    cdef int64_t* ln
    # the arrays are made with PyArray_EMPTY (np.empty's Python call cost more than a 16 KB chunk's copy)
    cdef cnp.npy_intp shape[2]
    cdef vector[int] typenum
    for s in range(ns):
        dt = np.dtype(dtypes[s])
        if dt.itemsize != es[s] or dt.kind != "f" or not dt.isnative:
            raise ValueError(f"stream {s}: dtype {dt} is not a native float of {es[s]} bytes")
        typenum.push_back(dt.num)
    out = []
    cdef vector[int64_t] sbase, nbase  # joined: each chunk's first sample and non-zero, per stream
    if joined:
        _joined_columns(out, nc, ns, nseqs, total_seq, sp, dm, typenum, samples, nnz, sbase, nbase, vals, ind,
                        ptr, offs, lens)
    for c in range(nc if not joined else 0):
        nseq = nseqs[c]
        shape[0] = nseq
        lengths = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
        lens.push_back(<int64_t*>cnp.PyArray_DATA(lengths))
        cols = []
        for s in range(ns):
            at = ns * c + s
            shape[0] = nseq + 1
            so = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
            offs.push_back(<int64_t*>cnp.PyArray_DATA(so))
            if sp[s]:
                shape[0] = nnz[at]
                v = cnp.PyArray_EMPTY(1, shape, typenum[s], 0)
                i = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT32, 0)
                shape[0] = samples[at] + 1
                r = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
                ind.push_back(<int32_t*>cnp.PyArray_DATA(i))
                ptr.push_back(<int64_t*>cnp.PyArray_DATA(r))
                (<int64_t*>cnp.PyArray_DATA(r))[0] = 0  # a chunk without sequences: its indptr is [0]
            else:
                shape[0] = samples[at]
                shape[1] = dm[s]
                v = cnp.PyArray_EMPTY(2, shape, typenum[s], 0)
                i = r = None
                ind.push_back(NULL)
                ptr.push_back(NULL)
            vals.push_back(<uint8_t*>cnp.PyArray_DATA(v))
            cols.append((v, i, r, so))
        out.append((lengths, cols))
    with nogil:
        for c in range(nc):
            p = &buf[0] + starts[c] if buf.shape[0] > 0 else NULL
            nseq = nseqs[c]
            ln = lens[c]
            for q in range(nseq):
                ln[q] = rd_u32(p + 4 * q)
            for s in range(ns):
                o = offs[ns * c + s]
                cnt = counts.data() + base[c] + s * nseq
                o[0] = sbase[ns * c + s] if joined else 0
                for q in range(nseq):
                    o[q + 1] = o[q] + cnt[q]
                if joined and sp[s]:
                    ptr[ns * c + s][0] = 0
            _gather_range(p, nseq, cuts[2 * c], cuts[2 * c + 1], sp.data(), dm.data(), es.data(),
                          vals.data() + ns * c, ind.data() + ns * c, ptr.data() + ns * c)
            if joined:  # the chunk's row pointers, made from 0, moved to where its non-zeros start in the run
                for s in range(ns):
                    if sp[s] and nbase[ns * c + s]:
                        o = ptr[ns * c + s]
                        for q in range(samples[ns * c + s] + 1):
                            o[q] += nbase[ns * c + s]
    per_chunk = np.empty((nc, ns), dtype=np.int64)
    if nc * ns:
        memcpy(cnp.PyArray_DATA(per_chunk), samples.data(), nc * ns * sizeof(int64_t))
    return out, per_chunk, None


cdef void _joined_columns(list out, int64_t nc, int64_t ns, const int64_t[::1] nseqs, int64_t total_seq,
                          vector[uint8_t]& sp, vector[int64_t]& dm, vector[int]& typenum, vector[int64_t]& samples,
                          vector[int64_t]& nnz, vector[int64_t]& sbase, vector[int64_t]& nbase,
                          vector[uint8_t*]& vals, vector[int32_t*]& ind, vector[int64_t*]& ptr,
                          vector[int64_t*]& offs, vector[int64_t*]& lens) except *:
    """``decode_chunks(joined=True)``'s arrays: one per stream and kind for the whole run, each
    chunk's pointers (``vals``, ``ind``, ``ptr``, ``offs``, ``lens``, indexed as the per-chunk
    ones) into it where the chunk's part starts, and ``out`` = [(lengths, columns)]."""
    cdef cnp.npy_intp shape[2]
    cdef int64_t c, s, at, tot_s, tot_n, seq_at, isz
    cdef uint8_t* v0
    cdef int32_t* i0
    cdef int64_t* r0
    cdef int64_t* o0
    sbase.resize(ns * nc if ns * nc > 0 else 1)
    nbase.resize(ns * nc if ns * nc > 0 else 1)
    vals.resize(ns * nc)
    ind.resize(ns * nc)
    ptr.resize(ns * nc)
    offs.resize(ns * nc)
    lens.resize(nc)
    shape[0] = total_seq
    lengths = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
    seq_at = 0
    for c in range(nc):
        lens[c] = <int64_t*>cnp.PyArray_DATA(lengths) + seq_at
        seq_at += nseqs[c]
    cols = []
    for s in range(ns):
        tot_s = tot_n = 0
        for c in range(nc):
            at = ns * c + s
            sbase[at], nbase[at] = tot_s, tot_n
            tot_s += samples[at]
            tot_n += nnz[at]
        shape[0] = total_seq + 1
        so = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
        o0 = <int64_t*>cnp.PyArray_DATA(so)
        o0[0] = 0  # a run without sequences
        if sp[s]:
            shape[0] = tot_n
            v = cnp.PyArray_EMPTY(1, shape, typenum[s], 0)
            i = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT32, 0)
            shape[0] = tot_s + 1
            r = cnp.PyArray_EMPTY(1, shape, cnp.NPY_INT64, 0)
            r0 = <int64_t*>cnp.PyArray_DATA(r)
            r0[0] = 0
            i0 = <int32_t*>cnp.PyArray_DATA(i)
        else:
            shape[0] = tot_s
            shape[1] = dm[s]
            v = cnp.PyArray_EMPTY(2, shape, typenum[s], 0)
            i = r = None
            r0 = NULL
            i0 = NULL
        v0 = <uint8_t*>cnp.PyArray_DATA(v)
        isz = cnp.PyArray_ITEMSIZE(<cnp.ndarray>v)
        seq_at = 0
        for c in range(nc):
            at = ns * c + s
            offs[at] = o0 + seq_at
            seq_at += nseqs[c]
            if sp[s]:
                vals[at] = v0 + nbase[at] * isz
                ind[at] = i0 + nbase[at]
                ptr[at] = r0 + sbase[at]
            else:
                vals[at] = v0 + sbase[at] * dm[s] * isz
                ind[at] = NULL
                ptr[at] = NULL
        cols.append((v, i, r, so))
    out.append((lengths, cols))


cdef class _Gather:
    """Pass 2 over one chunk, in parts: memcpy each record's values (and indices, nnz counts)
    into the columns. Holds the buffer and the columns so their pointers stay valid."""
    cdef vector[uint8_t] sp
    cdef vector[int64_t] dm, es, counts
    cdef vector[Cursor] cuts
    cdef vector[uint8_t*] vals
    cdef vector[int32_t*] ind
    cdef vector[int64_t*] ptr
    cdef const uint8_t[::1] buf
    cdef object keep
    cdef int64_t nseq
    cdef public list done

    def run(self, int k):
        """Gather the records between cut k and cut k+1 (the GIL released)."""
        if not 0 <= k < <int>self.cuts.size() - 1:
            raise IndexError(f"part {k} of {self.cuts.size() - 1}")
        if self.done is None:
            self.done = [False] * (self.cuts.size() - 1)
        cdef const uint8_t* p = &self.buf[0] if self.buf.shape[0] > 0 else NULL
        with nogil:
            _gather_range(p, self.nseq, self.cuts[k], self.cuts[k + 1], self.sp.data(), self.dm.data(),
                          self.es.data(), self.vals.data(), self.ind.data(), self.ptr.data())
        self.done[k] = True


cdef void _gather_range(const uint8_t* p, int64_t nseq, Cursor a, Cursor b, const uint8_t* sp,
                        const int64_t* dm, const int64_t* es, uint8_t** vals, int32_t** ind,
                        int64_t** ptr) noexcept nogil:
    """Copy records (a.s, a.q) up to, not including, (b.s, b.q), in file order: streams one
    after another, each stream's sequences in order (the chunk's layout, checked by _walk)."""
    cdef int64_t s = a.s, q = a.q, pos = a.pos, ns, z, j, vo = 0, io = 0, po = 0, acc = 0, width
    cdef int32_t cnt
    if s < b.s or (s == b.s and q < b.q):
        if sp[s]:
            vo, io, po, acc = a.nnz * es[s], a.nnz, a.samples, a.nnz
        else:
            vo = a.samples * dm[s] * es[s]
    while s < b.s or (s == b.s and q < b.q):
        ns = rd_u32(p + pos)
        if not sp[s]:
            width = ns * dm[s] * es[s]
            if width:
                memcpy(vals[s] + vo, p + pos + 4, width)
            vo += width
            pos += 4 + width
        else:
            z = rd_i32(p + pos + 4)
            if z:
                memcpy(vals[s] + vo, p + pos + 8, z * es[s])
                memcpy(ind[s] + io, p + pos + 8 + z * es[s], z * 4)
            vo += z * es[s]
            io += z
            for j in range(ns):
                ptr[s][po] = acc
                cnt = rd_i32(p + pos + 8 + z * es[s] + z * 4 + 4 * j)
                acc += cnt
                po += 1
            pos += 8 + z * es[s] + z * 4 + ns * 4
        q += 1
        if q == nseq:  # the stream's last record: close its indptr, go on with the next stream
            if sp[s]:
                ptr[s][po] = acc
            s += 1
            q = 0
            vo = io = po = acc = 0


def encode_chunk(const uint32_t[::1] meta, list columns, list sparse, list dims, list esizes):
    """Encode sequences into one CBF chunk (a uint8 array).

    columns[s] is a list of parts, each (values as a uint8 view of the element type,
    indices int32 | None, indptr int64 | None, seq_offsets int64): the part's
    sequences are seq_offsets[q]..seq_offsets[q+1] (absolute sample positions in its
    arrays). Parts follow each other, so a chunk can gather sequences from several
    input chunks without concatenating them first.
    """
    cdef int64_t nseq = meta.shape[0]
    cdef int64_t ns = len(columns)
    cdef int64_t s, q, a, b, z, lo, hi, j, esz, dim, total = 4 * nseq, pq
    cdef const uint8_t[::1] vals
    cdef const int32_t[::1] ind
    cdef const int64_t[::1] ptr
    cdef const int64_t[::1] so
    cdef uint8_t[::1] out
    cdef int64_t pos
    cdef uint32_t u
    cdef int32_t i32
    cdef bint is_sp
    _check_streams(sparse, dims, esizes)
    if len(columns) != len(dims):
        raise ValueError(f"{len(columns)} columns for {len(dims)} streams")
    for s in range(ns):
        esz = esizes[s]
        dim = dims[s]
        is_sp = sparse[s]
        pq = 0
        for part in columns[s]:
            _check_part(s, part, is_sp, dim, esz)
            so = part[3]
            pq += so.shape[0] - 1
            if is_sp:
                ptr = part[2]
                total += (so.shape[0] - 1) * 8 + (ptr[so[so.shape[0] - 1]] - ptr[so[0]]) * (esz + 4) \
                    + (so[so.shape[0] - 1] - so[0]) * 4
            else:
                total += (so.shape[0] - 1) * 4 + (so[so.shape[0] - 1] - so[0]) * dim * esz
        if pq != nseq:
            raise ValueError(f"stream {s}: parts hold {pq} sequences, meta has {nseq}")
    buf = np.empty(total, dtype=np.uint8)
    out = buf
    if nseq:
        memcpy(&out[0], &meta[0], 4 * nseq)
    pos = 4 * nseq
    for s in range(ns):
        esz = esizes[s]
        dim = dims[s]
        is_sp = sparse[s]
        for part in columns[s]:
            vals = part[0]
            so = part[3]
            if is_sp:
                ind = part[1]
                ptr = part[2]
            with nogil:
                for q in range(so.shape[0] - 1):
                    a = so[q]
                    b = so[q + 1]
                    u = <uint32_t>(b - a)
                    memcpy(&out[pos], &u, 4)
                    pos += 4
                    if not is_sp:
                        if b > a:
                            memcpy(&out[pos], &vals[a * dim * esz], (b - a) * dim * esz)
                        pos += (b - a) * dim * esz
                        continue
                    lo = ptr[a]
                    hi = ptr[b]
                    z = hi - lo
                    i32 = <int32_t>z
                    memcpy(&out[pos], &i32, 4)
                    pos += 4
                    if z:
                        memcpy(&out[pos], &vals[lo * esz], z * esz)
                        memcpy(&out[pos + z * esz], &ind[lo], z * 4)
                    pos += z * esz + z * 4
                    for j in range(a, b):
                        i32 = <int32_t>(ptr[j + 1] - ptr[j])
                        memcpy(&out[pos], &i32, 4)
                        pos += 4
    return buf


cdef extern from *:
    """
    #if defined(__linux__)
    #include <fcntl.h>
    static int rk_start_writeback(int fd, long long off, long long n) {
        return sync_file_range(fd, off, n, SYNC_FILE_RANGE_WRITE);
    }
    #else
    static int rk_start_writeback(int fd, long long off, long long n) { (void)fd; (void)off; (void)n; return 0; }
    #endif
    """
    int rk_start_writeback(int fd, long long off, long long n) nogil


def start_writeback(int fd, long long offset, long long nbytes):
    """Ask the kernel to start writing [offset, offset + nbytes) of fd to disk, without waiting
    (Linux sync_file_range(SYNC_FILE_RANGE_WRITE); a no-op elsewhere). Not a durability
    guarantee: the writer still fsyncs before it renames. Errors are ignored (best effort)."""
    with nogil:
        rk_start_writeback(fd, offset, nbytes)


cdef extern from *:
    """
    #if defined(__linux__)
    #include <fcntl.h>
    static int rk_preallocate(int fd, long long off, long long n) { return fallocate(fd, 0, off, n); }
    #else
    static int rk_preallocate(int fd, long long off, long long n) { (void)fd; (void)off; (void)n; return -1; }
    #endif
    """
    int rk_preallocate(int fd, long long off, long long n) nogil


def preallocate(int fd, long long offset, long long nbytes):
    """Allocate [offset, offset + nbytes) of fd before writing it (Linux fallocate, mode 0: the
    file grows to cover the range). Buffered writes into allocated blocks skip ext4's delayed
    allocation work, which makes them markedly cheaper. Best effort: returns False where the
    file system (or the platform) cannot, and never falls back to writing zeros."""
    cdef int rc
    with nogil:
        rc = rk_preallocate(fd, offset, nbytes)
    return rc == 0
