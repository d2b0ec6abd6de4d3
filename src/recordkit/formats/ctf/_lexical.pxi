# Part of _kernel.pyx (included there; one compiled module, split by job).
# Lexical classes, the event record and the limits the parser works with.
cdef enum:
    MAX_EVENTS = 256      # events recorded per chunk (all are counted)

cdef struct Event:
    int code
    int64_t seq          # index of the sequence in the chunk (-1: none)
    uint64_t line        # 1-based
    uint64_t col         # 1-based byte column
    int64_t stream       # stream index, or -1
    uint64_t a           # code-specific (the offending byte, an index, a count...)
    uint64_t b

cdef uint64_t U64_DIV10 = 1844674407370955161ULL  # (2**64 - 1) // 10
cdef uint64_t U64_MAX = 18446744073709551615ULL

cdef inline bint is_digit(uint8_t c) noexcept nogil:
    return c >= 48 and c <= 57

cdef inline bint is_value_delim(uint8_t c) noexcept nogil:
    return c == 32 or c == 9

cdef inline bint is_column_delim(uint8_t c) noexcept nogil:
    # space, TAB, and every non-printable byte except '\n'
    return c == 32 or c == 9 or ((c < 32 or c >= 128) and c != 10)

cdef inline bint is_printable(uint8_t c) noexcept nogil:
    return c >= 32 and c < 128

cdef double[23] POW10
cdef int _k
POW10[0] = 1.0
for _k in range(1, 23):
    POW10[_k] = POW10[_k - 1] * 10.0
