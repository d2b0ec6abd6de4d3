# Part of _kernel.pyx (included there; one compiled module, split by job).
# The index scan (sequence boundaries, ids, line numbers) and CNTK's byte-span chunking.
# ---------------------------------------------------------------------------------------------
# Index scan

cdef class IndexScanner:
    """Scans a CTF file block by block into a sequence index.

    feed() takes a buffer that starts at a line start and returns how many bytes it
    consumed (whole lines only, unless final). The caller keeps the rest.
    Sequences are recorded as (offset, size, key, first line, rows): rows counts the
    non-blank lines, which is the size estimate chunk descriptions use.
    """
    cdef public int mode                # -1 undecided, 0 line mode, 1 id mode
    cdef bint skip_ids
    cdef uint64_t base                  # absolute offset of the next buffer
    cdef uint64_t line_no               # 0-based number of the next line
    cdef bint have_seq
    cdef bint seq_bad
    cdef uint64_t cur_id, cur_off, cur_first_line, cur_rows
    cdef vector[uint64_t] offsets, sizes, keys, first_lines, rows
    cdef vector[Event] errors
    cdef public uint64_t error_count
    cdef unordered_map[uint64_t, uint64_t] seen  # id -> 1-based line of first use
    cdef public uint64_t content_start  # first byte after a UTF-8 BOM

    def __cinit__(self, bint skip_sequence_ids):
        self.mode = 0 if skip_sequence_ids else -1
        self.skip_ids = skip_sequence_ids
        self.base = 0
        self.line_no = 0
        self.have_seq = False
        self.seq_bad = False
        self.error_count = 0
        self.content_start = 0

    def set_content_start(self, uint64_t start):
        self.content_start = start

    cdef void _error(self, int code, uint64_t line, uint64_t col, uint64_t a, uint64_t b) noexcept nogil:
        cdef Event ev
        self.error_count += 1
        if self.errors.size() < MAX_EVENTS:
            ev.code = code
            ev.seq = -1
            ev.line = line
            ev.col = col
            ev.stream = -1
            ev.a = a
            ev.b = b
            self.errors.push_back(ev)

    cdef void _close(self, uint64_t end_off) noexcept nogil:
        if self.have_seq and not self.seq_bad:
            self.offsets.push_back(self.cur_off)
            self.sizes.push_back(end_off - self.cur_off)
            self.keys.push_back(self.cur_id)
            self.first_lines.push_back(self.cur_first_line)
            self.rows.push_back(self.cur_rows)
        self.have_seq = False
        self.seq_bad = False

    cdef void _line(self, const uint8_t* p, Py_ssize_t s, Py_ssize_t e, uint64_t next_off,
                    Py_ssize_t n) noexcept nogil:
        # one line p[s:e] (without its '\n') of the block p[:n]; next_off = absolute offset of the
        # following line
        cdef uint64_t off = self.base + s
        cdef Py_ssize_t q = s
        cdef Py_ssize_t j
        cdef uint64_t ident = 0
        cdef bint overflow = False
        cdef bint has_id
        cdef bint blank
        cdef uint8_t d
        cdef unordered_map[uint64_t, uint64_t].iterator it
        if off < self.content_start:           # the BOM belongs to nobody
            q = s + <Py_ssize_t>(self.content_start - off)
            off = self.content_start
            s = q
        while q < e and is_column_delim(p[q]):
            q += 1
        blank = q == e
        if not blank and p[q] == 124 and q + 1 < e and p[q + 1] == 35:
            # starts with a comment: blank if nothing but comments follows
            blank = True
            j = q + 2
            while j < e:
                if p[j] == 124 and (j + 1 >= e or p[j + 1] != 35):
                    blank = False
                    break
                j += 1
        if blank:
            self.line_no += 1
            return
        has_id = is_digit(p[s])
        if self.mode == -1:
            self.mode = 1 if has_id else 0
        if self.mode == 0:
            self.have_seq = True
            self.seq_bad = False
            self.cur_off = off
            self.cur_id = self.line_no
            self.cur_first_line = self.line_no
            self.cur_rows = 1
            self._close(next_off)
            self.line_no += 1
            return
        # id mode
        if has_id:
            j = s
            if s + 8 <= n:
                # the common id of 1-7 digits at once (the digit run ends at the line's end at the
                # latest: '\n' is not a digit); longer ones in the loop below
                j = s + _short_digits(p + s, &ident)
            while j < e and is_digit(p[j]):
                d = p[j] - 48
                if ident > U64_DIV10 or (ident == U64_DIV10 and d > 5):
                    overflow = True
                ident = ident * 10 + d
                j += 1
        if not has_id:
            if self.have_seq:
                self.cur_rows += 1
            else:
                self._error(E_NO_ID, self.line_no + 1, 1, 0, 0)
            self.line_no += 1
            return
        if overflow:
            self._close(off)
            self._error(E_ID_OVERFLOW, self.line_no + 1, 1, 0, 0)
            self.have_seq = True
            self.seq_bad = True
            self.cur_id = U64_MAX
            self.cur_off = off
            self.cur_first_line = self.line_no
            self.cur_rows = 1
            self.line_no += 1
            return
        if self.have_seq and not (self.seq_bad and self.cur_id == U64_MAX) and ident == self.cur_id:
            self.cur_rows += 1
            self.line_no += 1
            return
        self._close(off)
        self.have_seq = True
        self.seq_bad = False
        self.cur_id = ident
        self.cur_off = off
        self.cur_first_line = self.line_no
        self.cur_rows = 1
        it = self.seen.find(ident)
        if it != self.seen.end():
            self._error(E_DUPLICATE_ID, self.line_no + 1, 1, ident, deref(it).second)
            self.seq_bad = True
        else:
            self.seen[ident] = self.line_no + 1
        self.line_no += 1

    def feed(self, const uint8_t[::1] buf, bint final):
        """Index the whole lines of buf (all of it when final); return bytes consumed."""
        cdef Py_ssize_t n = buf.shape[0]
        cdef const uint8_t* p
        cdef Py_ssize_t s = 0
        cdef const uint8_t* nl
        cdef Py_ssize_t e
        if n == 0:
            if final:
                self._close(self.base)
            return 0
        p = &buf[0]
        with nogil:
            while s < n:
                nl = <const uint8_t*>memchr(p + s, 10, n - s)
                if nl == NULL:
                    if not final:
                        break
                    self._line(p, s, n, self.base + n, n)
                    s = n
                    break
                e = nl - p
                self._line(p, s, e, self.base + e + 1, n)
                s = e + 1
            if final:
                self._close(self.base + s)
            self.base += s
        return s

    def result(self):
        """(offsets, sizes, keys, first_lines, rows) as uint64 arrays, plus error events."""
        return (_u64(self.offsets), _u64(self.sizes), _u64(self.keys), _u64(self.first_lines),
                _u64(self.rows), _events(self.errors))


cdef object _u64(vector[uint64_t]& v):
    cdef cnp.ndarray out = np.empty(v.size(), dtype=np.uint64)
    if v.size():
        memcpy(cnp.PyArray_DATA(out), v.data(), v.size() * sizeof(uint64_t))
    return out

cdef object _events(vector[Event]& v):
    return [(ev.code, ev.seq, ev.line, ev.col, ev.stream, ev.a, ev.b) for ev in v]


def make_chunks(const uint64_t[::1] offsets, const uint64_t[::1] sizes, uint64_t max_bytes):
    """Group sequences (in file order) into chunks of at most max_bytes spanned bytes.

    CNTK's rule (Index.cpp): a new chunk starts when the current one spans 0 bytes or
    when adding the next sequence would exceed the maximum, so a chunk holds at least
    one sequence and an oversized sequence gets a chunk of its own. Returns the index
    of the first sequence of every chunk, plus a final entry = number of sequences.
    """
    cdef Py_ssize_t n = offsets.shape[0]
    if sizes.shape[0] != n:
        raise ValueError(f"{n} offsets but {sizes.shape[0]} sizes")
    cdef vector[int64_t] starts
    cdef Py_ssize_t i
    cdef uint64_t chunk_start = 0
    cdef uint64_t span = 0
    cdef cnp.ndarray out
    with nogil:
        for i in range(n):
            if i == 0:
                starts.push_back(0)
                chunk_start = offsets[0]
                span = sizes[0]
                continue
            if span == 0 or (offsets[i] + sizes[i] - chunk_start) > max_bytes:
                starts.push_back(i)
                chunk_start = offsets[i]
            span = offsets[i] + sizes[i] - chunk_start
        starts.push_back(n)
    out = np.empty(starts.size(), dtype=np.int64)
    memcpy(cnp.PyArray_DATA(out), starts.data(), starts.size() * sizeof(int64_t))
    return out
