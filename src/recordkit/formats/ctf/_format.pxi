# Part of _kernel.pyx (included there; one compiled module, split by job).
# The writer's support: shortest round-trip formatting of dense and sparse rows.
# ---------------------------------------------------------------------------------------------
# Writer support: shortest round-trip formatting

cdef inline int _fmt(char* out, double v, bint dbl) noexcept nogil:
    """Shortest %g text that reads back to the same float32/float64."""
    cdef int prec
    cdef int n = 0
    cdef int lo = 6 if not dbl else 15
    cdef int hi = 9 if not dbl else 17
    for prec in range(lo, hi + 1):
        n = snprintf(out, 40, "%.*g", prec, v)
        if dbl:
            if strtod(out, NULL) == v:
                return n
        elif strtof(out, NULL) == <float>v:
            return n
    return n


def format_dense_rows(const double[:, ::1] rows, bint dbl):
    """Each row as ``v v v`` text (list of bytes), shortest round-trip formatting."""
    cdef Py_ssize_t nr = rows.shape[0], nc = rows.shape[1]
    cdef Py_ssize_t i, j
    cdef vector[char] buf
    cdef char tmp[48]
    cdef int n
    out = []
    for i in range(nr):
        buf.clear()
        with nogil:
            for j in range(nc):
                if j:
                    buf.push_back(32)
                n = _fmt(tmp, rows[i, j], dbl)
                buf.insert(buf.end(), tmp, tmp + n)
        out.append(buf.data()[:buf.size()] if buf.size() else b"")
    return out


def format_sparse_rows(const int64_t[::1] indptr, const int64_t[::1] indices, const double[::1] values, bint dbl):
    """Each sample as ``i:v i:v`` text (list of bytes)."""
    cdef Py_ssize_t nr = indptr.shape[0] - 1
    cdef Py_ssize_t i, j
    cdef vector[char] buf
    cdef char tmp[72]
    if indices.shape[0] != values.shape[0]:
        raise ValueError(f"{indices.shape[0]} indices but {values.shape[0]} values")
    for i in range(nr):
        if indptr[i + 1] < indptr[i]:
            raise IndexError(f"indptr decreases at sample {i}")
    if nr >= 0 and (indptr[0] < 0 or indptr[nr] > indices.shape[0]):
        raise IndexError(f"indptr [{indptr[0]}, {indptr[nr]}] is not within the {indices.shape[0]} values")
    cdef int n
    out = []
    for i in range(nr):
        buf.clear()
        with nogil:
            for j in range(indptr[i], indptr[i + 1]):
                if j > indptr[i]:
                    buf.push_back(32)
                n = snprintf(tmp, 24, "%lld:", <long long>indices[j])
                n += _fmt(tmp + n, values[j], dbl)
                buf.insert(buf.end(), tmp, tmp + n)
        out.append(buf.data()[:buf.size()] if buf.size() else b"")
    return out
