# Part of _kernel.pyx (included there; one compiled module, split by job).
# The chunk parser: a chunk's text into stream columns, or straight into CBF records.
# ---------------------------------------------------------------------------------------------
# Chunk parser

cdef struct StreamCfg:
    const char* alias
    Py_ssize_t alias_len
    bint sparse
    int64_t dim

cdef cppclass StreamOut:
    vector[float] vf
    vector[double] vd
    vector[int32_t] idx
    vector[int64_t] ptr        # sparse: start of each sample in idx/v*, dense: unused
    vector[int64_t] counts     # samples per kept sequence
    int64_t nsamples

cdef cppclass Scratch:
    # per-parse scratch space, reused by every sequence (no allocation per sequence)
    vector[size_t] mark_v, mark_idx, mark_ptr
    vector[int64_t] seq_samples
    vector[uint64_t] seen_row
    vector[int64_t] widest     # per stream: the most values a dense sample had (a result, not scratch)


cdef struct Blob:
    # one stream's sequences in CBF layout (parse_cbf): malloc'ed, grown with realloc
    uint8_t* data
    size_t size
    size_t cap
    bint failed


cdef cppclass CbfOut:
    vector[Blob] blobs
    vector[vector[int64_t]] seq_offsets
    vector[uint32_t] meta
    bint failed


cdef extern from *:
    """
    #if defined(__linux__)
    #include <sys/mman.h>
    #endif
    #include <stdint.h>
    /* Ask for transparent huge pages over the 2 MiB-aligned part of a large output buffer about
       to be written (where the kernel offers them only on request, "madvise" mode): one page
       fault per 2 MiB instead of per 4 KiB, as NumPy does for its own large arrays. */
    static inline void rk_advise_huge(const void* p, size_t n) {
    #if defined(__linux__) && defined(MADV_HUGEPAGE)
        const uintptr_t huge = (uintptr_t)1 << 21;
        uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
        uintptr_t e = ((uintptr_t)p + n) & ~(huge - 1);
        if (p != NULL && n >= ((size_t)4 << 20) && e > a)
            (void)madvise((void*)a, e - a, MADV_HUGEPAGE);
    #else
        (void)p; (void)n;
    #endif
    }
    """
    void _advise_huge "rk_advise_huge"(const void* p, size_t n) nogil


cdef inline bint _blob_grow(Blob* b, size_t extra) noexcept nogil:
    cdef size_t cap
    cdef uint8_t* q
    if b.size + extra <= b.cap:
        return True
    cap = b.cap * 2
    if cap < b.size + extra:
        cap = b.size + extra
    q = <uint8_t*>realloc(b.data, cap)
    if q == NULL:
        b.failed = True
        return False
    b.data = q
    b.cap = cap
    return True


cdef inline void _blob_put(Blob* b, const void* src, size_t n) noexcept nogil:
    # callers grow the blob first
    memcpy(b.data + b.size, src, n)
    b.size += n


cdef class ByteBuffer:
    """Bytes a kernel produced (one stream's CBF records): read-only buffer protocol, no copy."""
    cdef uint8_t* data
    cdef Py_ssize_t size

    def __dealloc__(self):
        free(self.data)

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, <void*>self.data, self.size, 1, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef ByteBuffer _adopt(Blob* b):
    """Hand a blob's memory to a ByteBuffer (which frees it)."""
    cdef ByteBuffer out = ByteBuffer.__new__(ByteBuffer)
    out.data = b.data
    out.size = b.size
    b.data = NULL
    b.size = b.cap = 0
    return out


cdef class ChunkParser:
    """Parses the sequences of one chunk into per-stream columns.

    Construct once per reader (stream configuration), call parse() per chunk; parse()
    is re-entrant (all state is local), so several threads may parse chunks at once.
    """
    cdef object _aliases       # keeps the alias bytes alive
    cdef vector[StreamCfg] cfg
    cdef bint dbl
    cdef int mb_stream
    cdef object dtype

    def __cinit__(self, list aliases, list sparse, list dims, bint double_precision, int mb_stream):
        cdef StreamCfg c
        cdef bytes a
        if not (len(aliases) == len(sparse) == len(dims)):
            raise ValueError(f"aliases, sparse and dims describe {len(aliases)}, {len(sparse)} and {len(dims)} streams")
        for k in range(len(dims)):
            if not 0 < dims[k] <= 0x7FFFFFFF:
                raise ValueError(f"stream {k}: dim {dims[k]} is not within [1, 2^31-1]")
        if not -1 <= mb_stream < len(dims):
            raise ValueError(f"mb_stream {mb_stream} is not a stream index")
        self._aliases = [bytes(x) for x in aliases]
        for k in range(len(self._aliases)):
            a = self._aliases[k]
            c.alias = a
            c.alias_len = len(a)
            c.sparse = sparse[k]
            c.dim = dims[k]
            self.cfg.push_back(c)
        self.dbl = double_precision
        self.mb_stream = mb_stream
        self.dtype = np.float64 if double_precision else np.float32

    def parse(self, const uint8_t[::1] buf, uint64_t base, const uint64_t[::1] offsets,
              const uint64_t[::1] sizes, const uint64_t[::1] first_lines, uint64_t stop_after_errors,
              uint64_t rows_hint=0, uint64_t entries_hint=0):
        """Parse sequences at absolute offsets (buf starts at absolute offset base).

        ``rows_hint``: the lines (at most one sample per stream each), ``entries_hint``: the
        sparse entries expected per sparse stream; the output is reserved for them (a vector
        grown by doubling copied its contents and faulted in fresh pages at every step).

        Returns (kept, columns, errors, error_count, warnings, warning_counts, stopped, widest):
        kept = indexes (into the given sequences) of the sequences read; columns =
        per stream (values, indices|None, indptr|None, counts); events as tuples;
        widest = per stream the most values any dense sample had before padding (0 for
        sparse streams), so a declared dim that no sample reaches can be told apart from
        the short rows CTF allows. Parsing stops early once stop_after_errors errors were
        seen (0 = never).
        """
        return self._parse(buf, base, offsets, sizes, first_lines, stop_after_errors, rows_hint, entries_hint,
                           False)

    def parse_cbf(self, const uint8_t[::1] buf, uint64_t base, const uint64_t[::1] offsets,
                  const uint64_t[::1] sizes, const uint64_t[::1] first_lines, uint64_t stop_after_errors,
                  uint64_t rows_hint=0):
        """Like parse(), but each kept sequence goes straight into CBF's per-stream layout.

        columns is (meta, streams): meta = uint32 sample count of each kept sequence (the
        maximum over its streams, the CBF chunk prefix); streams = per stream (records,
        offsets): records a ByteBuffer holding, per kept sequence, exactly the bytes a CBF
        chunk holds for that sequence and stream (dense: u32 samples, values; sparse: u32
        samples, i32 nnz, values, i32 indices, i32 nnz per sample), offsets int64 (kept+1)
        where each sequence's record starts. A CBF chunk is the meta of its sequences
        followed, stream by stream, by the concatenation of their records, so a converter
        writes slices of these buffers as they are (no intermediate columns, no encode copy).
        """
        return self._parse(buf, base, offsets, sizes, first_lines, stop_after_errors, rows_hint, 0, True)

    cdef object _parse(self, const uint8_t[::1] buf, uint64_t base, const uint64_t[::1] offsets,
                       const uint64_t[::1] sizes, const uint64_t[::1] first_lines, uint64_t stop_after_errors,
                       uint64_t rows_hint, uint64_t entries_hint, bint cbf):
        cdef size_t ns = self.cfg.size()
        cdef vector[StreamOut] outs
        cdef vector[int64_t] kept
        cdef vector[Event] errors
        cdef vector[Event] warns
        cdef uint64_t counts[8]
        cdef uint64_t nerr = 0
        cdef Py_ssize_t nseq = offsets.shape[0]
        cdef const uint8_t* p = NULL
        cdef bint stopped = False
        cdef Py_ssize_t i
        cdef int k
        cdef Scratch sc
        cdef CbfOut co
        cdef CbfOut* cop = NULL
        cdef size_t esz = 8 if self.dbl else 4
        cdef size_t cap
        _check_spans(offsets, sizes, first_lines, base, buf.shape[0])
        for k in range(8):
            counts[k] = 0
        outs.resize(ns)
        sc.mark_v.resize(ns)
        sc.mark_idx.resize(ns)
        sc.mark_ptr.resize(ns)
        sc.seq_samples.resize(ns)
        sc.seen_row.resize(ns)
        sc.widest.resize(ns, 0)
        co.failed = False
        if cbf:
            cop = &co
            co.blobs.resize(ns)
            co.seq_offsets.resize(ns)
            co.meta.reserve(nseq)
        for k in range(<int>ns):
            outs[k].counts.reserve(nseq)
            if cbf:
                # per-sequence scratch only; the records go to the blob, sized for the piece:
                # dense: rows bound the samples; sparse: a pair takes >= 4 bytes of text
                if not self.cfg[k].sparse:
                    cap = rows_hint * self.cfg[k].dim * esz + 4 * <size_t>nseq + 64
                else:
                    cap = <size_t>buf.shape[0] * (esz + 4) // 4 + 8 * <size_t>nseq + 64
                co.blobs[k].data = <uint8_t*>malloc(cap)
                co.blobs[k].size = 0
                co.blobs[k].cap = cap if co.blobs[k].data != NULL else 0
                co.blobs[k].failed = co.blobs[k].data == NULL
                if co.blobs[k].data == NULL:
                    co.failed = True
                co.seq_offsets[k].reserve(nseq + 1)
                co.seq_offsets[k].push_back(0)
                continue
            # each line holds at most one sample per stream: rows bound the dense output; the
            # sparse entries are the caller's estimate, never more than the text could hold (an
            # entry, '0:0' and a delimiter, takes at least 4 bytes: half the bytes is a safe cap)
            if not self.cfg[k].sparse:
                cap = rows_hint * self.cfg[k].dim
            else:
                outs[k].ptr.reserve(rows_hint + 1)  # + the end pointer _column appends
                cap = min(<size_t>entries_hint, <size_t>buf.shape[0] // 2 + 1)
                outs[k].idx.reserve(cap)
                _advise_huge(outs[k].idx.data(), cap * 4)
            if self.dbl:
                outs[k].vd.reserve(cap)
                _advise_huge(outs[k].vd.data(), cap * 8)
            else:
                outs[k].vf.reserve(cap)
                _advise_huge(outs[k].vf.data(), cap * 4)
        if buf.shape[0] > 0:
            p = &buf[0]
        with nogil:
            for i in range(nseq):
                if stop_after_errors and nerr >= stop_after_errors:
                    stopped = True
                    break
                _parse_sequence(self, p, <Py_ssize_t>(offsets[i] - base), <Py_ssize_t>(offsets[i] - base + sizes[i]),
                                <Py_ssize_t>buf.shape[0], first_lines[i] + 1, i, outs, kept, errors, warns, &nerr, counts,
                                sc, cop)
                if cbf and co.failed:
                    break
        kept_arr = np.empty(kept.size(), dtype=np.int64)
        if kept.size():
            memcpy(cnp.PyArray_DATA(kept_arr), kept.data(), kept.size() * sizeof(int64_t))
        if cbf:
            try:
                if co.failed:
                    raise MemoryError("CTF chunk parser: out of memory for the CBF records")
                meta = np.empty(co.meta.size(), dtype=np.uint32)
                if co.meta.size():
                    memcpy(cnp.PyArray_DATA(meta), co.meta.data(), co.meta.size() * sizeof(uint32_t))
                streams = []
                for k in range(<int>ns):
                    streams.append((_adopt(&co.blobs[k]), _i64(co.seq_offsets[k])))
                columns = (meta, streams)
            finally:
                for k in range(<int>ns):
                    free(co.blobs[k].data)
                    co.blobs[k].data = NULL
        else:
            columns = []
            for k in range(<int>ns):
                columns.append(_column(outs[k], self.cfg[k], self.dbl))
        return (kept_arr, columns, _events(errors), nerr, _events(warns),
                {W_PADDED: counts[0], W_UNKNOWN: counts[1], W_EMPTY_SEQUENCE: counts[2]}, stopped,
                [sc.widest[k] for k in range(<int>ns)])


cdef int _check_spans(const uint64_t[::1] offsets, const uint64_t[::1] sizes, const uint64_t[::1] first_lines,
                      uint64_t base, uint64_t buflen) except -1:
    """Sequence spans handed to the parser (from the index or its cache) must lie in the buffer:
    a lying index is an error here, never a read of other memory."""
    cdef Py_ssize_t i, n = offsets.shape[0]
    if sizes.shape[0] != n or first_lines.shape[0] != n:
        raise ValueError(f"{n} offsets, {sizes.shape[0]} sizes and {first_lines.shape[0]} first lines")
    for i in range(n):
        if offsets[i] < base or sizes[i] > buflen or offsets[i] - base > buflen - sizes[i]:
            raise IndexError(f"sequence {i}: bytes [{offsets[i]}, {offsets[i]} + {sizes[i]}) are not within the "
                             f"buffer [{base}, {base + buflen})")
    return 0


cdef object _i64(vector[int64_t]& v):
    cdef cnp.ndarray out = np.empty(v.size(), dtype=np.int64)
    if v.size():
        memcpy(cnp.PyArray_DATA(out), v.data(), v.size() * sizeof(int64_t))
    return out


cdef void _emit_cbf(ChunkParser self, vector[StreamOut]& outs, Scratch& sc, CbfOut* co) noexcept nogil:
    """Append the sequence just parsed (alone in outs) to the CBF records, then clear outs."""
    cdef size_t ns = self.cfg.size()
    cdef size_t k, j, nnz, nsmp, nv
    cdef size_t esz = 8 if self.dbl else 4
    cdef uint32_t u, mx = 0
    cdef int32_t i32
    cdef Blob* b
    cdef StreamOut* o
    for k in range(ns):
        o = &outs[k]
        b = &co.blobs[k]
        nsmp = <size_t>sc.seq_samples[k]
        if nsmp > mx:
            mx = <uint32_t>nsmp
        u = <uint32_t>nsmp
        nv = o.vd.size() if self.dbl else o.vf.size()
        if not self.cfg[k].sparse:
            if not _blob_grow(b, 4 + nv * esz):
                co.failed = True
                return
            _blob_put(b, &u, 4)
            if nv:
                _blob_put(b, <const void*>o.vd.data() if self.dbl else <const void*>o.vf.data(), nv * esz)
        else:
            nnz = o.idx.size()
            if not _blob_grow(b, 8 + nnz * (esz + 4) + nsmp * 4):
                co.failed = True
                return
            _blob_put(b, &u, 4)
            i32 = <int32_t>nnz
            _blob_put(b, &i32, 4)
            if nnz:
                _blob_put(b, <const void*>o.vd.data() if self.dbl else <const void*>o.vf.data(), nnz * esz)
                _blob_put(b, o.idx.data(), nnz * 4)
            for j in range(o.ptr.size()):
                i32 = <int32_t>((<int64_t>nnz if j + 1 == o.ptr.size() else o.ptr[j + 1]) - o.ptr[j])
                _blob_put(b, &i32, 4)
            o.idx.clear()
            o.ptr.clear()
        if self.dbl:
            o.vd.clear()
        else:
            o.vf.clear()
        co.seq_offsets[k].push_back(<int64_t>b.size)
    co.meta.push_back(mx)


cdef class _Owned:
    """A parsed column's values, indices, row pointers or counts: the parser's own vector, handed
    to NumPy without a copy (copying each piece's columns out, with the GIL held, cost as much as
    a memcpy of the chunk's output into fresh memory)."""
    cdef vector[float] vf
    cdef vector[double] vd
    cdef vector[int32_t] vi
    cdef vector[int64_t] vl
    cdef void* data
    cdef Py_ssize_t size

    def __getbuffer__(self, Py_buffer* view, int flags):
        PyBuffer_FillInfo(view, self, self.data, self.size, 0, flags)

    def __releasebuffer__(self, Py_buffer* view):
        pass


cdef object _own_f32(vector[float]& v):
    if v.size() == 0:
        return np.empty(0, dtype=np.float32)
    cdef _Owned h = _Owned.__new__(_Owned)
    h.vf.swap(v)
    h.data, h.size = <void*>h.vf.data(), h.vf.size() * sizeof(float)
    return np.frombuffer(h, dtype=np.float32)


cdef object _own_f64(vector[double]& v):
    if v.size() == 0:
        return np.empty(0, dtype=np.float64)
    cdef _Owned h = _Owned.__new__(_Owned)
    h.vd.swap(v)
    h.data, h.size = <void*>h.vd.data(), h.vd.size() * sizeof(double)
    return np.frombuffer(h, dtype=np.float64)


cdef object _own_i32(vector[int32_t]& v):
    if v.size() == 0:
        return np.empty(0, dtype=np.int32)
    cdef _Owned h = _Owned.__new__(_Owned)
    h.vi.swap(v)
    h.data, h.size = <void*>h.vi.data(), h.vi.size() * sizeof(int32_t)
    return np.frombuffer(h, dtype=np.int32)


cdef object _own_i64(vector[int64_t]& v):
    if v.size() == 0:
        return np.empty(0, dtype=np.int64)
    cdef _Owned h = _Owned.__new__(_Owned)
    h.vl.swap(v)
    h.data, h.size = <void*>h.vl.data(), h.vl.size() * sizeof(int64_t)
    return np.frombuffer(h, dtype=np.int64)


cdef object _column(StreamOut& o, StreamCfg& c, bint dbl):
    """One stream's parsed column as arrays that own the parser's vectors (no copy)."""
    vals = _own_f64(o.vd) if dbl else _own_f32(o.vf)
    counts = _own_i64(o.counts)
    if not c.sparse:
        return (vals.reshape(-1, c.dim), None, None, counts)
    o.ptr.push_back(<int64_t>o.idx.size())  # the end of the last sample
    idx = _own_i32(o.idx)
    ptr = _own_i64(o.ptr)
    return (vals, idx, ptr, counts)


cdef inline void _event(vector[Event]& v, int code, int64_t seq, uint64_t line, uint64_t col,
                        int64_t stream, uint64_t a, uint64_t b) noexcept nogil:
    cdef Event ev
    if v.size() < MAX_EVENTS:
        ev.code = code
        ev.seq = seq
        ev.line = line
        ev.col = col
        ev.stream = stream
        ev.a = a
        ev.b = b
        v.push_back(ev)

cdef inline uint64_t _byte_at(const uint8_t* p, Py_ssize_t i, Py_ssize_t end) noexcept nogil:
    # the offending byte for messages: 256 = end of file
    return p[i] if i < end else 256

cdef inline Py_ssize_t _skip_to_bar_or_eol(const uint8_t* p, Py_ssize_t i, Py_ssize_t end) noexcept nogil:
    while i < end and p[i] != 124 and p[i] != 10:
        i += 1
    return i

cdef void _parse_sequence(ChunkParser self, const uint8_t* p, Py_ssize_t pos, Py_ssize_t end, Py_ssize_t buf_end,
                          uint64_t line, Py_ssize_t seq_index, vector[StreamOut]& outs, vector[int64_t]& kept,
                          vector[Event]& errors, vector[Event]& warns, uint64_t* nerr, uint64_t* counts,
                          Scratch& sc, CbfOut* co) noexcept nogil:
    cdef size_t ns = self.cfg.size()
    cdef size_t k
    cdef Py_ssize_t line_start = pos
    cdef Py_ssize_t name_start, name_end, q
    cdef int s
    cdef StreamCfg* c
    cdef NumResult num
    cdef int64_t nvals, d
    cdef uint64_t index
    cdef bint ovf
    cdef int err = 0
    cdef Py_ssize_t err_pos = 0
    cdef int64_t err_stream = -1
    cdef uint64_t err_a = 0, err_b = 0
    cdef uint64_t row = 0
    cdef bint row_has_id
    cdef int row_items
    cdef Py_ssize_t row_id_end
    cdef bint any_sample = False
    for k in range(ns):
        sc.mark_v[k] = outs[k].vd.size() if self.dbl else outs[k].vf.size()
        sc.mark_idx[k] = outs[k].idx.size()
        sc.mark_ptr[k] = outs[k].ptr.size()
        sc.seq_samples[k] = 0
        sc.seen_row[k] = 0
    while pos < end and err == 0:
        # ---- one row
        row += 1
        line_start = pos
        row_has_id = is_digit(p[pos])
        while pos < end and is_digit(p[pos]):
            pos += 1
        row_id_end = pos
        row_items = 0
        while pos < end and err == 0:
            if p[pos] == 10:
                break
            if is_column_delim(p[pos]):
                pos += 1
                continue
            row_items += 1
            if p[pos] != 124:
                nerr[0] += 1
                _event(errors, E_STRAY, seq_index, line, pos - line_start + 1, -1, p[pos], 0)
                pos = _skip_to_bar_or_eol(p, pos + 1, end)
                continue
            if pos + 1 < end and p[pos + 1] == 35:  # comment
                pos = _skip_to_bar_or_eol(p, pos + 2, end)
                continue
            name_start = pos + 1
            name_end = name_start
            while name_end < end and is_printable(p[name_end]) and p[name_end] != 124 and not is_value_delim(p[name_end]):
                name_end += 1
            if name_end == name_start:
                nerr[0] += 1
                _event(errors, E_EMPTY_NAME, seq_index, line, pos - line_start + 1, -1, _byte_at(p, name_end, end), 0)
                pos = _skip_to_bar_or_eol(p, name_start, end)
                continue
            s = -1
            for k in range(ns):
                if self.cfg[k].alias_len == name_end - name_start and \
                        memcmp(self.cfg[k].alias, p + name_start, name_end - name_start) == 0:
                    s = <int>k
                    break
            if s < 0:
                counts[1] += 1
                _event(warns, W_UNKNOWN, seq_index, line, pos - line_start + 1, -1, name_start, name_end - name_start)
                pos = _skip_to_bar_or_eol(p, name_end, end)
                continue
            if sc.seen_row[s] == row:
                err, err_pos, err_stream = E_DUPLICATE_INPUT, pos, s
                break
            sc.seen_row[s] = row
            c = &self.cfg[s]
            pos = name_end
            nvals = 0
            if not c.sparse:
                while True:
                    while pos < end and is_value_delim(p[pos]):
                        pos += 1
                    if pos >= end or not is_printable(p[pos]) or p[pos] == 124:
                        break
                    num = parse_number(p, pos, end, self.dbl)
                    if num.err:
                        err, err_pos, err_stream, err_a = num.err, num.pos, s, _byte_at(p, num.pos, end)
                        break
                    if nvals == c.dim:
                        err, err_pos, err_stream, err_a = E_TOO_MANY, pos, s, <uint64_t>c.dim
                        break
                    pos = num.pos
                    if pos < end and is_printable(p[pos]) and p[pos] != 124 and not is_value_delim(p[pos]):
                        err, err_pos, err_stream, err_a = E_AFTER_NUMBER, pos, s, p[pos]
                        break
                    if self.dbl:
                        outs[s].vd.push_back(num.d)
                    else:
                        outs[s].vf.push_back(num.f)
                    nvals += 1
                if err:
                    break
                if nvals == 0 and pos >= buf_end:
                    err, err_pos, err_stream = E_NO_VALUES, name_start - 1, s
                    break
                if nvals > sc.widest[s]:
                    sc.widest[s] = nvals
                if nvals < c.dim:
                    counts[0] += 1
                    _event(warns, W_PADDED, seq_index, line, name_start - line_start, s, <uint64_t>nvals, <uint64_t>c.dim)
                    if self.dbl:
                        outs[s].vd.resize(outs[s].vd.size() + (c.dim - nvals), 0.0)
                    else:
                        outs[s].vf.resize(outs[s].vf.size() + (c.dim - nvals), 0.0)
            else:
                outs[s].ptr.push_back(<int64_t>outs[s].idx.size())
                while True:
                    while pos < end and is_value_delim(p[pos]):
                        pos += 1
                    if pos >= end or not is_printable(p[pos]) or p[pos] == 124:
                        break
                    if not is_digit(p[pos]):
                        err, err_pos, err_stream, err_a = E_SPARSE_INDEX, pos, s, p[pos]
                        break
                    index = 0
                    ovf = False
                    q = pos
                    if pos + 8 <= end:
                        q = pos + _short_digits(p + pos, &index)  # 1-7 digits at once; longer ones below
                    while q < end and is_digit(p[q]):
                        if index > U64_DIV10 or (index == U64_DIV10 and p[q] - 48 > 5):
                            ovf = True
                        index = index * 10 + (p[q] - 48)
                        q += 1
                    if ovf:
                        err, err_pos, err_stream = E_INDEX_OVERFLOW, pos, s
                        break
                    if index >= <uint64_t>c.dim:
                        err, err_pos, err_stream, err_a, err_b = E_INDEX_RANGE, pos, s, index, <uint64_t>c.dim
                        break
                    if q >= end or p[q] != 58:
                        err, err_pos, err_stream, err_a, err_b = E_COLON, q, s, _byte_at(p, q, end), index
                        break
                    q += 1
                    if q >= end:
                        err, err_pos, err_stream, err_a = E_NUMBER, q, s, 256
                        break
                    num = parse_number(p, q, end, self.dbl)
                    if num.err:
                        err, err_pos, err_stream, err_a = num.err, num.pos, s, _byte_at(p, num.pos, end)
                        break
                    pos = num.pos
                    if pos < end and is_printable(p[pos]) and p[pos] != 124 and not is_value_delim(p[pos]):
                        err, err_pos, err_stream, err_a = E_AFTER_NUMBER, pos, s, p[pos]
                        break
                    outs[s].idx.push_back(<int32_t>index)
                    if self.dbl:
                        outs[s].vd.push_back(num.d)
                    else:
                        outs[s].vf.push_back(num.f)
                    nvals += 1
                if err:
                    break
                if nvals == 0 and pos >= buf_end:
                    err, err_pos, err_stream = E_NO_VALUES, name_start - 1, s
                    break
            sc.seq_samples[s] += 1
            any_sample = True
        if err:
            break
        if row_has_id and row_items == 0:
            nerr[0] += 1
            _event(errors, E_ID_ALONE, seq_index, line, row_id_end - line_start + 1, -1, 0, 0)
        # end of row
        if pos < end and p[pos] == 10:
            pos += 1
        line += 1
    if err:
        nerr[0] += 1
        _event(errors, err, seq_index, line, err_pos - line_start + 1, err_stream, err_a, err_b)
    if err or not any_sample:
        # roll back everything this sequence appended
        for k in range(ns):
            if self.dbl:
                outs[k].vd.resize(sc.mark_v[k])
            else:
                outs[k].vf.resize(sc.mark_v[k])
            outs[k].idx.resize(sc.mark_idx[k])
            outs[k].ptr.resize(sc.mark_ptr[k])
        if not err:
            counts[2] += 1
            _event(warns, W_EMPTY_SEQUENCE, seq_index, line - row, 1, -1, 0, 0)
        return
    for k in range(ns):
        outs[k].counts.push_back(sc.seq_samples[k])
    kept.push_back(seq_index)
    if co != NULL:
        _emit_cbf(self, outs, sc, co)
