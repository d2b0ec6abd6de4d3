# distutils: language = c++
# cython: language_level=3
"""Compiled OFRecord framing scan: every frame's offset and length, or where it breaks.

A part file is frames of (int64 little-endian length, payload). Scanning only the
length prefixes is fast (one 8-byte read per record); it builds the offsets index
and finds every framing problem without parsing a payload.
"""
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy, memcmp, memset
from libc.stdint cimport uint64_t, int32_t, int8_t
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp
from recordkit.formats._protowire cimport put_varint, varint_size

cnp.import_array()


def scan_frames(const uint8_t[::1] buf, int64_t base=0, int64_t max_record=-1):
    """Scan frames in buf (which starts at file offset base).

    Returns (offsets, lengths, problem): offsets of each payload (absolute), lengths,
    and problem = None or (code, offset of the frame, record index, detail):
    code 1 = length <= 0, 2 = payload runs past the end, 3 = fewer than 8 bytes left
    for a length, 4 = length above max_record.
    """
    cdef int64_t n = buf.shape[0], pos = 0, length
    cdef vector[int64_t] offs, lens
    cdef int code = 0
    cdef int64_t detail = 0
    cdef const uint8_t* p = &buf[0] if n > 0 else NULL
    with nogil:
        while pos < n:
            if n - pos < 8:
                code = 3
                detail = n - pos
                break
            memcpy(&length, p + pos, 8)
            if length <= 0:
                code = 1
                detail = length
                break
            if max_record > 0 and length > max_record:
                code = 4
                detail = length
                break
            if length > n - pos - 8:
                code = 2
                detail = length
                break
            offs.push_back(base + pos + 8)
            lens.push_back(length)
            pos += 8 + length
    o = np.empty(offs.size(), dtype=np.int64)
    l = np.empty(lens.size(), dtype=np.int64)
    if offs.size():
        memcpy(cnp.PyArray_DATA(o), offs.data(), offs.size() * 8)
        memcpy(cnp.PyArray_DATA(l), lens.data(), lens.size() * 8)
    problem = None if code == 0 else (code, base + pos, <int64_t>offs.size(), detail)
    return o, l, problem


# ---------------------------------------------------------------------------------------------
# Batch decoding of one numeric feature straight from the wire format (no protobuf objects)

DEF K_MISSING = 0
DEF K_BYTES = 1
DEF K_FLOAT = 2
DEF K_DOUBLE = 3
DEF K_INT32 = 4
DEF K_INT64 = 5

cdef inline bint read_varint(const uint8_t* p, int64_t* pos, int64_t end, uint64_t* out) noexcept nogil:
    cdef uint64_t v = 0
    cdef int shift = 0
    cdef uint8_t b
    while pos[0] < end and shift < 64:
        b = p[pos[0]]
        pos[0] += 1
        v |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = v
            return True
        shift += 7
    return False

cdef inline bint read_tag(const uint8_t* p, int64_t* pos, int64_t end, uint64_t* tag) noexcept nogil:
    """A field tag; False if malformed or invalid (field number 0, or beyond 32 bits), as protobuf."""
    if not read_varint(p, pos, end, tag):
        return False
    return (tag[0] >> 3) != 0 and tag[0] <= 0xFFFFFFFFULL

cdef inline bint skip_field(const uint8_t* p, int64_t* pos, int64_t end, uint64_t wire) noexcept nogil:
    cdef uint64_t n
    if wire == 0:
        return read_varint(p, pos, end, &n)
    if wire == 1:
        pos[0] += 8
        return pos[0] <= end
    if wire == 2:
        if not read_varint(p, pos, end, &n) or n > <uint64_t>(end - pos[0]):
            return False
        pos[0] += <int64_t>n
        return True
    if wire == 5:
        pos[0] += 4
        return pos[0] <= end
    return False

cdef struct Entry:
    int64_t kpos      # key bytes
    int64_t klen
    int kind          # 1..5 as record.proto's oneof, 0 when the Feature has no kind
    int64_t ls        # extent of the list message
    int64_t le

cdef int next_entry(const uint8_t* p, int64_t* pos, int64_t end, Entry* e) noexcept nogil:
    """Advance to the record's next map entry: 1 (e filled), 0 at the end, -1 if malformed.

    Unknown fields are skipped; inside a Feature the last list field wins (oneof semantics).
    """
    cdef int64_t epos, eend, vpos = -1, vend = -1, fpos
    cdef uint64_t tag, n
    cdef int k
    while pos[0] < end:
        if not read_tag(p, pos, end, &tag):
            return -1
        if tag != 0x0a:  # not a map entry
            if not skip_field(p, pos, end, tag & 7):
                return -1
            continue
        if not read_varint(p, pos, end, &n) or n > <uint64_t>(end - pos[0]):
            return -1
        epos = pos[0]
        eend = epos + <int64_t>n
        pos[0] = eend
        e.kpos = epos
        e.klen = 0
        vpos = -1
        while epos < eend:
            if not read_tag(p, &epos, eend, &tag):
                return -1
            if tag == 0x0a or tag == 0x12:
                if not read_varint(p, &epos, eend, &n) or n > <uint64_t>(eend - epos):
                    return -1
                if tag == 0x0a:
                    e.kpos = epos
                    e.klen = <int64_t>n
                else:
                    vpos = epos
                    vend = epos + <int64_t>n
                epos += <int64_t>n
            elif not skip_field(p, &epos, eend, tag & 7):
                return -1
        e.kind = 0
        e.ls = e.le = 0
        fpos = vpos
        while vpos >= 0 and fpos < vend:
            if not read_tag(p, &fpos, vend, &tag):
                return -1
            k = <int>(tag >> 3)
            if (tag & 7) == 2 and 1 <= k <= 5:
                if not read_varint(p, &fpos, vend, &n) or n > <uint64_t>(vend - fpos):
                    return -1
                e.kind = k
                e.ls = fpos
                e.le = fpos + <int64_t>n
                fpos = e.le
            elif not skip_field(p, &fpos, vend, tag & 7):
                return -1
        return 1
    return 0

DEF NOT_FOUND = -2

cdef int find_feature(const uint8_t* p, int64_t start, int64_t end, const uint8_t* name, int64_t name_len,
                      int64_t* list_start, int64_t* list_end) noexcept nogil:
    """Kind of feature `name` in the record p[start:end] (NOT_FOUND, 0 for a Feature without a kind,
    -1 malformed) and the extent of its list message. The last entry with the key wins, as in
    protobuf maps."""
    cdef int64_t pos = start
    cdef Entry e
    cdef int r, kind = NOT_FOUND
    while True:
        r = next_entry(p, &pos, end, &e)
        if r < 0:
            return -1
        if r == 0:
            return kind
        if e.klen == name_len and memcmp(p + e.kpos, name, name_len) == 0:
            kind = e.kind
            list_start[0] = e.ls
            list_end[0] = e.le

cdef int64_t decode_list(const uint8_t* p, int64_t start, int64_t end, int kind, double* dout, int64_t* iout,
                         int64_t cap, int64_t* count) noexcept nogil:
    """Decode the values of a list message into dout (float kinds) or iout (int kinds), at most
    cap of them; count gets the total number of values. Returns 0, or -1 when malformed."""
    cdef int64_t pos = start, n_total = 0, e, i
    cdef uint64_t tag, n, v
    cdef float f
    cdef double d
    while pos < end:
        if not read_tag(p, &pos, end, &tag):
            return -1
        if (tag >> 3) != 1:
            if not skip_field(p, &pos, end, tag & 7):
                return -1
            continue
        if (tag & 7) == 2:  # packed run
            if not read_varint(p, &pos, end, &n) or n > <uint64_t>(end - pos):
                return -1
            e = pos + <int64_t>n
            if kind == K_FLOAT:
                if n % 4:
                    return -1
                for i in range(<int64_t>(n // 4)):
                    if n_total < cap:
                        memcpy(&f, p + pos + 4 * i, 4)
                        dout[n_total] = f
                    n_total += 1
            elif kind == K_DOUBLE:
                if n % 8:
                    return -1
                for i in range(<int64_t>(n // 8)):
                    if n_total < cap:
                        memcpy(&d, p + pos + 8 * i, 8)
                        dout[n_total] = d
                    n_total += 1
            else:
                while pos < e:
                    if not read_varint(p, &pos, e, &v):
                        return -1
                    if n_total < cap:
                        iout[n_total] = <int64_t>v if kind == K_INT64 else <int64_t>(<int32_t>v)
                    n_total += 1
            pos = e
        elif (tag & 7) == 5 and kind == K_FLOAT:
            if pos + 4 > end:
                return -1
            if n_total < cap:
                memcpy(&f, p + pos, 4)
                dout[n_total] = f
            n_total += 1
            pos += 4
        elif (tag & 7) == 1 and kind == K_DOUBLE:
            if pos + 8 > end:
                return -1
            if n_total < cap:
                memcpy(&d, p + pos, 8)
                dout[n_total] = d
            n_total += 1
            pos += 8
        elif (tag & 7) == 0 and (kind == K_INT32 or kind == K_INT64):
            if not read_varint(p, &pos, end, &v):
                return -1
            if n_total < cap:
                iout[n_total] = <int64_t>v if kind == K_INT64 else <int64_t>(<int32_t>v)
            n_total += 1
        else:
            return -1
    count[0] = n_total
    return 0


DEF O_F32 = 0
DEF O_F64 = 1
DEF O_I8 = 2
DEF O_I32 = 3
DEF O_I64 = 4
DEF O_U8 = 5
OUT_CODES = {"float32": O_F32, "float64": O_F64, "int8": O_I8, "int32": O_I32, "int64": O_I64, "uint8": O_U8}

cdef inline void store_f(uint8_t* row, int code, int64_t i, double v) noexcept nogil:
    # C++ static_cast semantics (float to int truncates toward zero)
    if code == O_F32:
        (<float*>row)[i] = <float>v
    elif code == O_F64:
        (<double*>row)[i] = v
    elif code == O_I8:
        (<int8_t*>row)[i] = <int8_t><int64_t>v
    elif code == O_I32:
        (<int32_t*>row)[i] = <int32_t><int64_t>v
    elif code == O_I64:
        (<int64_t*>row)[i] = <int64_t>v
    else:
        (<uint8_t*>row)[i] = <uint8_t><int64_t>v

cdef inline void store_i(uint8_t* row, int code, int64_t i, int64_t v) noexcept nogil:
    if code == O_F32:
        (<float*>row)[i] = <float>v
    elif code == O_F64:
        (<double*>row)[i] = <double>v
    elif code == O_I8:
        (<int8_t*>row)[i] = <int8_t>v
    elif code == O_I32:
        (<int32_t*>row)[i] = <int32_t>v
    elif code == O_I64:
        (<int64_t*>row)[i] = v
    else:
        (<uint8_t*>row)[i] = <uint8_t>v


cdef int _check_frames(const int64_t[::1] offsets, const int64_t[::1] lengths, int64_t size) except -1:
    """Record spans handed to a decoder (from a sidecar index or a scan) must lie in the buffer:
    a lying index is an error here, never a read of other memory."""
    cdef int64_t r
    if offsets.shape[0] != lengths.shape[0]:
        raise ValueError(f"{offsets.shape[0]} offsets but {lengths.shape[0]} lengths")
    for r in range(offsets.shape[0]):
        if offsets[r] < 0 or lengths[r] < 0 or lengths[r] > size - offsets[r]:
            raise IndexError(f"record {r}: bytes [{offsets[r]}, {offsets[r]} + {lengths[r]}) are not within "
                             f"the {size}-byte buffer")
    return 0


cdef struct Problem:
    int code
    int64_t record
    int64_t detail


cdef void _decode_rows(const uint8_t* p, const int64_t* offsets, const int64_t* lengths, int64_t N,
                       const uint8_t* nm, int64_t nlen, int64_t K, int code, int mode, int only_kind,
                       uint8_t* out, int64_t esz, double* dtmp, int64_t* itmp, Problem* prob) noexcept nogil:
    """The raw-decoder rules for records 0..N-1 (spans already checked against the buffer),
    record r into the K values of esz bytes at out + r * K * esz, every value written (a short
    list zero-padded); stops at the first problem."""
    cdef int64_t row_bytes = K * esz
    cdef int64_t r, i, cnt, ls = 0, le = 0, pos, m, bytes_count, bpos, blen
    cdef int kind
    cdef uint64_t tag, n
    cdef uint8_t* row
    prob.code = 0
    prob.detail = 0
    for r in range(N):
        row = out + r * row_bytes
        kind = find_feature(p, offsets[r], offsets[r] + lengths[r], nm, nlen, &ls, &le)
        if kind == NOT_FOUND:
            prob.code, prob.record = 1, r
            return
        if kind < 0:
            prob.code, prob.record = 4, r
            return
        if kind == K_MISSING:
            prob.code, prob.record = 5, r
            return
        if (only_kind == -1 and kind == K_BYTES) or (only_kind > 0 and kind != only_kind):
            prob.code, prob.record, prob.detail = 6, r, kind
            return
        if kind == K_BYTES:
            # exactly one value: field 1, wire type 2
            pos = ls
            bytes_count = 0
            bpos = 0
            blen = 0
            while pos < le:
                if not read_tag(p, &pos, le, &tag):
                    prob.code, prob.record = 4, r
                    return
                if tag == 0x0a:
                    if not read_varint(p, &pos, le, &n) or n > <uint64_t>(le - pos):
                        prob.code, prob.record = 4, r
                        return
                    bytes_count += 1
                    bpos = pos
                    blen = <int64_t>n
                    pos += <int64_t>n
                elif not skip_field(p, &pos, le, tag & 7):
                    prob.code, prob.record = 4, r
                    return
            if bytes_count != 1:
                prob.code, prob.record, prob.detail = 2, r, bytes_count
                return
            m = blen if blen < K else K
            for i in range(m):
                store_i(row, code, i, <int64_t>(<int8_t>p[bpos + i]))
            if m < K:
                memset(row + m * esz, 0, (K - m) * esz)
            continue
        # fast path: float list -> float32, one packed run of exactly K values
        if kind == K_FLOAT and code == O_F32:
            pos = ls
            if read_varint(p, &pos, le, &tag) and tag == 0x0a and read_varint(p, &pos, le, &n) \
                    and pos + <int64_t>n == le and n == <uint64_t>(4 * K):
                if K:
                    memcpy(row, p + pos, 4 * K)
                continue
        if decode_list(p, ls, le, kind, dtmp, itmp, K, &cnt) != 0:
            prob.code, prob.record = 4, r
            return
        if cnt != K and mode == 0:
            prob.code, prob.record, prob.detail = 3, r, cnt
            return
        m = cnt if cnt < K else K
        if kind == K_FLOAT or kind == K_DOUBLE:
            for i in range(m):
                store_f(row, code, i, dtmp[i])
        else:
            for i in range(m):
                store_i(row, code, i, itmp[i])
        if m < K:
            memset(row + m * esz, 0, (K - m) * esz)


def decode_numeric(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] lengths, bytes name,
                   int64_t K, str out_dtype, int mode, int only_kind=0):
    """Decode feature `name` of every record into an (N, K) array, OneFlow's raw-decoder rules.

    mode 0: a numeric list must have exactly K values; 1 (truncate): copy min(L, K), zero the
    rest; 2 (dim1_varying_length): copy min(L, K), zero the rest. A bytes list must hold one
    value, whose bytes are read as int8 (min(len, K) copied, rest zero). Returns (array,
    problem) with problem None or (code, record, detail): 1 feature missing, 2 bytes list
    without exactly one value, 3 list length L != K (detail L), 4 malformed record,
    5 feature without a kind, 6 a feature of a kind ``only_kind`` excludes (detail: its kind).
    ``only_kind``: 0 any kind (OneFlow's raw decoder), -1 numeric lists only (no bytes), 1..5 that
    kind only (e.g. 5: int64 keys).
    """
    if K < 0:
        raise ValueError(f"K {K} < 0")
    out = np.zeros((offsets.shape[0], K), dtype=out_dtype)
    problem = decode_rows(buf, offsets, lengths, name, K, mode, out, 0, only_kind)
    return out, problem


def decode_rows(const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] lengths, bytes name,
                int64_t K, int mode, out, int64_t row, int only_kind=0):
    """``decode_numeric`` into rows ``row..row + N - 1`` of ``out`` (a C-contiguous (M, K) array of
    one of the output dtypes; every value of a decoded row is written, zero padding included)
    straight from ``buf``: the records of a batch
    can come from several read blocks without being copied together. Returns the problem (None or
    (code, record within these N, detail)); rows before the problem's are filled. Every span and
    the row range are checked first: a lying index is an error, never a read or write of other
    memory."""
    _check_frames(offsets, lengths, buf.shape[0])
    if K < 0:
        raise ValueError(f"K {K} < 0")
    if not isinstance(out, np.ndarray) or out.ndim != 2 or not out.flags.c_contiguous or not out.flags.writeable:
        raise ValueError("out must be a writeable C-contiguous 2-D array")
    if out.shape[1] != K or out.dtype.name not in OUT_CODES or not out.dtype.isnative:
        raise ValueError(f"out is {out.dtype} {out.shape}: expected (M, {K}) of {', '.join(OUT_CODES)}")
    cdef int64_t N = offsets.shape[0]
    if row < 0 or N > out.shape[0] - row:
        raise IndexError(f"rows [{row}, {row} + {N}) are not within the {out.shape[0]} rows of out")
    cdef int code = OUT_CODES[out.dtype.name]
    cdef int64_t esz = out.dtype.itemsize
    cdef uint8_t* o = <uint8_t*>cnp.PyArray_DATA(out) + row * K * esz
    cdef const uint8_t* p = &buf[0] if buf.shape[0] > 0 else NULL
    cdef const uint8_t* nm = name
    cdef int64_t nlen = len(name)
    cdef const int64_t* op = &offsets[0] if N > 0 else NULL
    cdef const int64_t* lp = &lengths[0] if N > 0 else NULL
    cdef vector[double] dtmp
    cdef vector[int64_t] itmp
    cdef Problem prob
    dtmp.resize(K + 1)
    itmp.resize(K + 1)
    with nogil:
        _decode_rows(p, op, lp, N, nm, nlen, K, code, mode, only_kind, o, esz, dtmp.data(), itmp.data(), &prob)
    return None if prob.code == 0 else (prob.code, prob.record, prob.detail)


def feature_kinds(const uint8_t[::1] buf, int64_t offset, int64_t length, list names):
    """Kind code of each named feature in one record (-2 missing, 0 no kind, 1..5 as record.proto,
    -1 malformed)."""
    cdef int64_t ls, le
    cdef bytes nb
    if offset < 0 or length < 0 or length > buf.shape[0] - offset:
        raise IndexError(f"record bytes [{offset}, {offset} + {length}) are not within the {buf.shape[0]}-byte buffer")
    out = []
    if length == 0:
        return [-2] * len(names)
    for nb in names:
        out.append(find_feature(&buf[0], offset, offset + length, nb, len(nb), &ls, &le))
    return out


# ---------------------------------------------------------------------------------------------
# Encoding: the bytes protobuf's deterministic serialization would produce, without protobuf objects

# varint_size / put_varint: formats/_protowire.pxd (shared with TFRecord's kernel)


def encode_varints(const int64_t[::1] values, bint as_int32):
    """The packed varint payload of an int32/int64 list (int32 negatives are 10 bytes, as protobuf)."""
    cdef Py_ssize_t n = values.shape[0], i, total = 0, pos = 0
    cdef uint64_t v
    for i in range(n):
        v = <uint64_t>(<int64_t>(<int32_t>values[i]) if as_int32 else values[i])
        total += varint_size(v)
    out = bytearray(total)
    cdef uint8_t* o = out
    with nogil:
        for i in range(n):
            v = <uint64_t>(<int64_t>(<int32_t>values[i]) if as_int32 else values[i])
            pos += put_varint(o + pos, v)
    return bytes(out)


def frame_entry(bytes name, int kind, bytes payload, list byte_values):
    """One map entry (field 1 of OFRecord): key, then the Feature holding the list message.

    kind 1 (bytes_list) uses byte_values (each a repeated field 1); other kinds a packed payload.
    """
    cdef bytearray lst = bytearray()
    cdef bytes v
    cdef uint8_t tmp[10]
    cdef Py_ssize_t k
    if kind == 1:
        for v in byte_values:
            lst += b"\x0a"
            k = put_varint(tmp, len(v))
            lst += tmp[:k]
            lst += v
    elif payload:
        lst += b"\x0a"
        k = put_varint(tmp, len(payload))
        lst += tmp[:k]
        lst += payload
    cdef bytearray feature = bytearray()
    feature.append((kind << 3) | 2)
    k = put_varint(tmp, len(lst))
    feature += tmp[:k]
    feature += lst
    cdef bytearray entry = bytearray(b"\x0a")
    k = put_varint(tmp, len(name))
    entry += tmp[:k]
    entry += name
    entry += b"\x12"
    k = put_varint(tmp, len(feature))
    entry += tmp[:k]
    entry += feature
    cdef bytearray out = bytearray(b"\x0a")
    k = put_varint(tmp, len(entry))
    out += tmp[:k]
    out += entry
    return bytes(out)


def decode_record(const uint8_t[::1] buf):
    """Every feature of one record: {name: (kind code, values)}, or None if malformed.

    Numeric lists come back as NumPy arrays of the list's own type, decoded in C (packed
    floats copied in one go); bytes lists as lists of bytes. The last map entry with a
    name wins; a feature with no kind maps to (0, None).
    """
    cdef int64_t end = buf.shape[0], pos = 0, bp
    cdef uint64_t tag, n
    cdef Entry e
    cdef int r
    cdef const uint8_t* p = &buf[0] if end > 0 else NULL
    out = {}
    while True:
        r = next_entry(p, &pos, end, &e)
        if r < 0:
            return None
        if r == 0:
            return out
        try:
            name = bytes(buf[e.kpos:e.kpos + e.klen]).decode("utf-8")
        except UnicodeDecodeError:
            return None
        if e.kind == 0:
            out[name] = (0, None)
        elif e.kind == K_BYTES:
            values = []
            bp = e.ls
            while bp < e.le:
                if not read_tag(p, &bp, e.le, &tag):
                    return None
                if tag == 0x0a:
                    if not read_varint(p, &bp, e.le, &n) or n > <uint64_t>(e.le - bp):
                        return None
                    values.append(bytes(buf[bp:bp + <int64_t>n]))
                    bp += <int64_t>n
                elif not skip_field(p, &bp, e.le, tag & 7):
                    return None
            out[name] = (e.kind, values)
        else:
            arr = _numeric_list(buf, e.ls, e.le, e.kind)
            if arr is None:
                return None
            out[name] = (e.kind, arr)


cdef object _numeric_list(const uint8_t[::1] buf, int64_t ls, int64_t le, int kind):
    cdef const uint8_t* p = &buf[0]
    cdef int64_t pos = ls, cnt = 0
    cdef uint64_t tag, n
    # the usual case: one packed run of floats or doubles: copy it whole
    if kind == K_FLOAT or kind == K_DOUBLE:
        if read_varint(p, &pos, le, &tag) and tag == 0x0a and read_varint(p, &pos, le, &n) and pos + <int64_t>n == le:
            dt = np.float32 if kind == K_FLOAT else np.float64
            if n % np.dtype(dt).itemsize:
                return None
            return np.frombuffer(bytes(buf[pos:le]), dtype=np.dtype(dt).newbyteorder("<")).astype(dt, copy=False)
    cdef vector[double] d
    cdef vector[int64_t] ints
    # count first (cap 0), then decode
    if decode_list(p, ls, le, kind, NULL, NULL, 0, &cnt) != 0:
        return None
    d.resize(cnt + 1)
    ints.resize(cnt + 1)
    if decode_list(p, ls, le, kind, d.data(), ints.data(), cnt, &cnt) != 0:
        return None
    if kind == K_FLOAT:
        out = np.empty(cnt, dtype=np.float32)
        for i in range(cnt):
            out[i] = d[i]
    elif kind == K_DOUBLE:
        out = np.empty(cnt, dtype=np.float64)
        for i in range(cnt):
            out[i] = d[i]
    else:
        out = np.empty(cnt, dtype=np.int32 if kind == K_INT32 else np.int64)
        for i in range(cnt):
            out[i] = ints[i]
    return out


# ---------------------------------------------------------------------------------------------
# Per-feature statistics of many records straight from the wire (``recordkit stats`` on OFRecord)

from libcpp.string cimport string
from libcpp.unordered_map cimport unordered_map
from cython.operator cimport dereference as deref

cdef extern from "<cmath>" namespace "std" nogil:
    bint isnan(double x)

cdef struct FStat:
    int kind             # kind of the first record holding the feature
    int64_t records
    int64_t values
    double sum
    double lo
    double hi
    bint has_range

DEF PW_BLOCK = 128
DEF CAST_BUFFER = 8192

cdef double _pairwise(const double* a, int64_t n) noexcept nogil:
    """NumPy's pairwise summation (numpy/core/src/umath/loops_utils.h), so that a record's sum
    is the same double as ``values.sum(dtype=np.float64)``."""
    cdef double res, r[8]
    cdef int64_t i, j, n2
    if n < 8:
        res = 0.
        for i in range(n):
            res += a[i]
        return res
    if n <= PW_BLOCK:
        for j in range(8):
            r[j] = a[j]
        i = 8
        while i < n - (n % 8):
            for j in range(8):
                r[j] += a[i + j]
            i += 8
        res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
        while i < n:
            res += a[i]
            i += 1
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise(a, n2) + _pairwise(a + n2, n - n2)


cdef double _numpy_sum(const double* a, int64_t n, bint cast) noexcept nogil:
    """``v.sum(dtype=np.float64)``: pairwise over the whole array for float64 input; a cast input
    (float32, ints) is summed by NumPy in buffers of 8192 elements, each pairwise."""
    cdef double res = 0.
    cdef int64_t s
    if not cast:
        return res + _pairwise(a, n)
    s = 0
    while s < n:
        res += _pairwise(a + s, min(CAST_BUFFER, n - s))
        s += CAST_BUFFER
    return res


cdef class FeatureStats:
    """Accumulates, feature by feature and record by record, what ``stats`` reports (kind, records,
    values, sum, min, max) with the same arithmetic as the per-record NumPy path it replaces:
    per record ``float(v.sum(dtype=float64))``, ``float(v.min())`` (NaN propagates within a
    record) combined across records as Python's ``min``/``max`` do."""
    cdef unordered_map[string, int] ids
    cdef vector[FStat] stats
    cdef list names
    cdef vector[double] dv
    cdef vector[int64_t] iv

    def __cinit__(self):
        self.names = []

    cdef FStat* _stat(self, string name, int kind):
        cdef FStat s
        it = self.ids.find(name)
        if it != self.ids.end():
            return &self.stats[deref(it).second]
        self.ids[name] = <int>self.stats.size()
        self.names.append(name.decode("utf-8"))
        s.kind = kind
        s.records = 0
        s.values = 0
        s.sum = 0.
        s.lo = 0.
        s.hi = 0.
        s.has_range = False
        self.stats.push_back(s)
        return &self.stats[self.stats.size() - 1]

    cdef void _merge(self, FStat* t, double rsum, double lo, double hi) noexcept:
        t.sum += rsum
        if not t.has_range:
            t.lo = lo
            t.hi = hi
            t.has_range = True
            return
        if lo < t.lo:  # Python's min(current, lo): a NaN never replaces a number, nor is replaced
            t.lo = lo
        if hi > t.hi:
            t.hi = hi

    def add_record(self, str name, int kind, int64_t count, rsum=None, lo=None, hi=None):
        """One feature of one record decoded elsewhere (a record the wire walk leaves to protobuf)."""
        cdef FStat* t = self._stat(name.encode("utf-8"), kind)
        t.records += 1
        t.values += count
        if rsum is not None:
            self._merge(t, rsum, lo, hi)

    def add(self, const uint8_t[::1] buf, const int64_t[::1] offsets, const int64_t[::1] lengths, int64_t start=0):
        """Walk records start.. of one part; returns the index of the first record the wire walk
        cannot take (malformed, a feature without a kind, a name that is not UTF-8: the caller
        decodes it with protobuf, for its error or its values) or -1 when all were taken."""
        _check_frames(offsets, lengths, buf.shape[0])
        cdef const uint8_t* p = &buf[0] if buf.shape[0] > 0 else NULL
        cdef int64_t r, pos, end, cnt, i, k, j, n_entries
        cdef Entry e
        cdef vector[Entry] entries
        cdef int rc
        cdef FStat* t
        cdef double rsum, lo, hi, x
        cdef int64_t ilo, ihi
        cdef bint nan
        cdef uint64_t tag
        cdef Entry swap
        for r in range(start, offsets.shape[0]):
            pos = offsets[r]
            end = pos + lengths[r]
            entries.clear()
            while True:  # the record's entries, the last one per name kept (protobuf map semantics)
                rc = next_entry(p, &pos, end, &e)
                if rc <= 0:
                    break
                if e.kind == 0:
                    return r
                for j in range(<int64_t>entries.size()):
                    if entries[j].klen == e.klen and memcmp(p + entries[j].kpos, p + e.kpos, e.klen) == 0:
                        entries[j] = e
                        break
                else:
                    entries.push_back(e)
            if rc < 0:
                return r
            for j in range(<int64_t>entries.size()):
                e = entries[j]
                try:
                    (<const char*>(p + e.kpos))[:e.klen].decode("utf-8")
                except UnicodeDecodeError:
                    return r
            # names in sorted order (UTF-8 byte order = code point order), as the per-record path
            # visited them: the first-seen order of features and their first kind stay the same
            for j in range(1, <int64_t>entries.size()):
                k = j
                while k > 0 and _name_less(p, &entries[k], &entries[k - 1]):
                    swap = entries[k]
                    entries[k] = entries[k - 1]
                    entries[k - 1] = swap
                    k -= 1
            for j in range(<int64_t>entries.size()):
                e = entries[j]
                if e.kind == K_BYTES:
                    cnt = 0
                    pos = e.ls
                    while pos < e.le:
                        if not read_tag(p, &pos, e.le, &tag):
                            return r
                        if tag == 0x0a:
                            cnt += 1
                        if not skip_field(p, &pos, e.le, tag & 7):
                            return r
                    t = self._stat(string(<const char*>(p + e.kpos), e.klen), e.kind)
                    t.records += 1
                    t.values += cnt
                    continue
                # every value takes at least one byte of the list: one decoding pass, no count pass
                if <int64_t>self.dv.size() < e.le - e.ls + 1:
                    self.dv.resize(e.le - e.ls + 1)
                    self.iv.resize(e.le - e.ls + 1)
                if decode_list(p, e.ls, e.le, e.kind, self.dv.data(), self.iv.data(), e.le - e.ls + 1, &cnt) < 0:
                    return r
                t = self._stat(string(<const char*>(p + e.kpos), e.klen), e.kind)
                t.records += 1
                t.values += cnt
                if cnt == 0:
                    continue
                if e.kind == K_INT32 or e.kind == K_INT64:
                    ilo = ihi = self.iv[0]
                    for i in range(cnt):
                        self.dv[i] = <double>self.iv[i]
                        if self.iv[i] < ilo:
                            ilo = self.iv[i]
                        if self.iv[i] > ihi:
                            ihi = self.iv[i]
                    lo, hi = <double>ilo, <double>ihi
                else:
                    lo = hi = self.dv[0]
                    nan = False
                    for i in range(cnt):
                        x = self.dv[i]
                        if isnan(x):
                            nan = True
                        elif x < lo:
                            lo = x
                        elif x > hi:
                            hi = x
                    if nan:  # NumPy's min/max propagate NaN
                        lo = hi = float("nan")
                rsum = _numpy_sum(self.dv.data(), cnt, e.kind != K_DOUBLE)
                self._merge(t, rsum, lo, hi)
        return -1

    def result(self) -> dict:
        """{name: {kind, records, values, sum, min, max}} in first-seen order (kinds as codes)."""
        out = {}
        cdef FStat s
        for k in range(len(self.names)):
            s = self.stats[k]
            out[self.names[k]] = {"kind": s.kind, "records": s.records, "values": s.values, "sum": s.sum,
                                  "min": s.lo if s.has_range else None, "max": s.hi if s.has_range else None}
        return out


cdef inline bint _name_less(const uint8_t* p, Entry* a, Entry* b) noexcept nogil:
    cdef int c = memcmp(p + a.kpos, p + b.kpos, min(a.klen, b.klen))
    return c < 0 or (c == 0 and a.klen < b.klen)
