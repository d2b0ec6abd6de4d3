# Part of _kernel.pyx (included there; one compiled module, split by job).
# Numbers: correctly rounded text -> float32/float64 (the fast path and its slow fallback).
# ---------------------------------------------------------------------------------------------
# Numbers

cdef struct NumResult:
    int err        # 0 or an E_* code
    Py_ssize_t pos # end of the number, or where the error is
    double d
    float f

cdef NumResult _convert_slow(const uint8_t* p, Py_ssize_t start, NumResult r, bint dbl) noexcept nogil:
    """strtod/strtof on a validated token: the rare path (long mantissas, large exponents)."""
    cdef char small[128]
    cdef char* tok
    cdef Py_ssize_t n = r.pos - start
    if n < 127:
        tok = small
    else:
        tok = <char*>malloc(n + 1)
        if tok == NULL:
            r.err = E_NUMBER
            r.pos = start
            return r
    memcpy(tok, p + start, n)
    tok[n] = 0
    if dbl:
        r.d = strtod(tok, NULL)
    else:
        r.f = strtof(tok, NULL)
    if tok != small:
        free(tok)
    return r


cdef inline NumResult parse_number(const uint8_t* p, Py_ssize_t i, Py_ssize_t end, bint dbl) noexcept nogil:
    """Parse CNTK's number grammar [+-]digit+[.digit*][(e|E)[+-]digit+] starting at p[i].

    Converts to the correctly rounded float32/float64: exact fast paths when the
    decimal fits (Clinger), otherwise strtod/strtof on the validated token.
    """
    cdef NumResult r
    cdef Py_ssize_t start = i
    cdef bint neg = False
    cdef uint64_t mant = 0
    cdef int nd = 0
    cdef int64_t exp10 = 0
    cdef bint truncated = False
    cdef bint exp_allowed = True
    cdef int frac = 0
    cdef uint8_t c
    cdef int64_t e = 0
    cdef int esign = 1
    cdef double v
    r.err = 0
    r.d = 0.0
    r.f = 0.0
    c = p[i]
    if c == 43 or c == 45:  # + -
        neg = c == 45
        i += 1
        if i >= end or not is_digit(p[i]):
            r.err = E_SIGN
            r.pos = i
            return r
    elif not is_digit(c):
        r.err = E_NUMBER
        r.pos = i
        return r
    while i < end:
        c = p[i] - 48
        if c > 9:
            break
        if nd < 19:
            if mant != 0 or c != 0:
                mant = mant * 10 + c
                nd += 1
        else:
            exp10 += 1
            if c != 0:
                truncated = True
        i += 1
    if i < end and p[i] == 46:  # '.'
        i += 1
        while i < end:
            c = p[i] - 48
            if c > 9:
                break
            if nd < 19:
                if mant != 0 or c != 0:
                    mant = mant * 10 + c
                    nd += 1
                exp10 -= 1
            elif c != 0:
                truncated = True
            frac += 1
            i += 1
        exp_allowed = frac > 0
    if exp_allowed and i < end and (p[i] == 101 or p[i] == 69):  # e E
        i += 1
        if i < end and (p[i] == 43 or p[i] == 45):
            if p[i] == 45:
                esign = -1
            i += 1
            if i >= end or not is_digit(p[i]):
                r.err = E_EXPONENT
                r.pos = i
                return r
        elif i >= end or not is_digit(p[i]):
            r.err = E_EXPONENT
            r.pos = i
            return r
        while i < end and is_digit(p[i]):
            if e < 100000000:
                e = e * 10 + (p[i] - 48)
            i += 1
        exp10 += esign * e
    r.pos = i
    if mant == 0:
        r.d = -0.0 if neg else 0.0
        r.f = <float>r.d
        return r
    if not truncated:
        if dbl:
            if mant <= (<uint64_t>1 << 53) and exp10 >= -22 and exp10 <= 22:
                v = <double>mant * POW10[exp10] if exp10 >= 0 else <double>mant / POW10[-exp10]
                r.d = -v if neg else v
                return r
        elif mant <= (<uint64_t>1 << 24) and exp10 >= -10 and exp10 <= 10:
            # operands exact in float32; one double op then one rounding to float is correct (p' >= 2p+2)
            v = <double>mant * POW10[exp10] if exp10 >= 0 else <double>mant / POW10[-exp10]
            r.f = <float>(-v if neg else v)
            return r
    return _convert_slow(p, start, r, dbl)
