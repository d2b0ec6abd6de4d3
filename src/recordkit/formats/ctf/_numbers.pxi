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


cdef extern from *:
    """
    static inline int rk_ctz64(unsigned long long v) { return __builtin_ctzll(v); }
    """
    int rk_ctz64(unsigned long long v) noexcept nogil

cdef uint64_t[9] U64POW10
cdef float[9] POW10F
cdef float[2] SIGN_F
cdef double[2] SIGN_D
SIGN_F[0] = 1.0
SIGN_F[1] = -1.0
SIGN_D[0] = 1.0
SIGN_D[1] = -1.0
U64POW10[0] = 1
POW10F[0] = 1.0
for _k in range(1, 9):
    U64POW10[_k] = U64POW10[_k - 1] * 10
    POW10F[_k] = <float>U64POW10[_k]


cdef inline uint64_t _load8(const uint8_t* p) noexcept nogil:
    cdef uint64_t v
    memcpy(&v, p, 8)
    return v


cdef inline int _digit_run(uint64_t v) noexcept nogil:
    """How many of the 8 bytes in ``v`` (little-endian: the first byte lowest) are ASCII digits
    before the first that is not. A byte below '0' borrows from the bytes above it and one above
    '9' carries into them, but those lie after the first non-digit, whose own flag is right."""
    cdef uint64_t flags = ((v - 0x3030303030303030ULL) | (v + 0x4646464646464646ULL) | v) & 0x8080808080808080ULL
    if flags == 0:
        return 8
    return rk_ctz64(flags) >> 3


cdef inline uint64_t _digits_value(uint64_t v, int n) noexcept nogil:
    """The value of the first ``n`` (1..8) digit bytes of ``v``: shifted up so the digits fill the
    high bytes (zeros, i.e. leading '0's, below), then the 8-digit conversion in three multiplies."""
    cdef uint64_t t = (v - 0x3030303030303030ULL) << (8 * (8 - n))
    t = t * 10 + (t >> 8)
    return (((t & 0x000000FF000000FFULL) * 0x000F424000000064ULL)
            + (((t >> 16) & 0x000000FF000000FFULL) * 0x0000271000000001ULL)) >> 32


cdef inline int _short_digits(const uint8_t* p, uint64_t* value) noexcept nogil:
    """An unsigned integer of 1-7 digits at ``p`` (8 readable bytes), 8 bytes at a time: its digit
    count, its value in ``value``; 0 (``value`` untouched) when ``p`` starts with no digit or with 8
    or more, which the caller's byte loop reads (a 7-digit value cannot overflow)."""
    cdef uint64_t v = _load8(p)
    cdef int n = _digit_run(v)
    if n == 0 or n == 8:
        return 0
    value[0] = _digits_value(v, n)
    return n


cdef inline bint _parse_short(const uint8_t* p, Py_ssize_t i, bint dbl, NumResult* r) noexcept nogil:
    """The common short forms ``[+-]d{1,7}[.d{0,7}]`` (no exponent), 8 bytes at a time; the caller
    guarantees 24 readable bytes from ``p[i]``. Returns False (``r`` untouched) for anything else,
    and for values the exact conversion below cannot take: ``parse_number``'s byte loop then
    parses the token from its start. Where this answers, the loop would compute the same
    mantissa (at most 14 digits, none dropped) and decimal exponent, so the same value."""
    cdef uint8_t c = p[i]
    # the sign without a branch (random signs in the data would mispredict one half the time)
    cdef int neg = c == 45
    cdef uint64_t v, mant
    cdef int n1, n2 = 0
    i += neg | (c == 43)
    v = _load8(p + i)
    n1 = _digit_run(v)
    if n1 == 0 or n1 == 8:
        return False
    mant = _digits_value(v, n1)
    i += n1
    if p[i] == 46:  # '.'
        v = _load8(p + i + 1)
        n2 = _digit_run(v)
        if n2 == 8:
            return False
        if n2:
            mant = mant * U64POW10[n2] + _digits_value(v, n2)
        i += 1 + n2
    c = p[i]
    if c == 101 or c == 69:  # an exponent: the byte loop's job
        return False
    if mant == 0:
        r.d = -0.0 if neg else 0.0
        r.f = <float>r.d
    elif dbl:
        # mant < 10**14 < 2**53 and 10**n2 are exact doubles: one correctly rounded division
        # (the sign by an exact multiplication, no branch)
        r.d = (<double>mant / POW10[n2]) * SIGN_D[neg]
    elif mant <= (<uint64_t>1 << 24):
        # both exact in float32 (10**7 < 2**24): one float division is the correctly rounded
        # float32 of the decimal, as strtof gives (and quicker than a double one)
        r.f = (<float>mant / POW10F[n2]) * SIGN_F[neg]
    else:
        return False
    r.err = 0
    r.pos = i
    return True


cdef inline NumResult parse_number(const uint8_t* p, Py_ssize_t i, Py_ssize_t end, bint dbl) noexcept nogil:
    """Parse CNTK's number grammar [+-]digit+[.digit*][(e|E)[+-]digit+] starting at p[i].

    Converts to the correctly rounded float32/float64: exact fast paths when the
    decimal fits (Clinger), otherwise strtod/strtof on the validated token. Short
    tokens away from the buffer's end take ``_parse_short`` (8 bytes at a time).
    """
    cdef NumResult r
    if i + 24 <= end and _parse_short(p, i, dbl, &r):
        return r
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
