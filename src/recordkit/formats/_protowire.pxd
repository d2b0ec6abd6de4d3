# cython: language_level=3
"""Protocol buffers' base-128 varints, inline for the kernels that write protobuf wire bytes
themselves (OFRecord's ``_kernel.pyx``, TFRecord's ``_kernel.pyx``): ``cimport`` them from here."""
from libc.stdint cimport uint8_t, uint64_t


cdef inline Py_ssize_t varint_size(uint64_t v) noexcept nogil:
    """Bytes of the varint of ``v``."""
    cdef Py_ssize_t n = 1
    while v >= 0x80:
        v >>= 7
        n += 1
    return n


cdef inline Py_ssize_t put_varint(uint8_t* out, uint64_t v) noexcept nogil:
    """Write the varint of ``v`` at ``out``; the bytes written."""
    cdef Py_ssize_t n = 0
    while v >= 0x80:
        out[n] = <uint8_t>((v & 0x7F) | 0x80)
        v >>= 7
        n += 1
    out[n] = <uint8_t>v
    return n + 1


cdef inline Py_ssize_t get_varint(const uint8_t* buf, Py_ssize_t pos, Py_ssize_t end, uint64_t* out) noexcept nogil:
    """Read the varint at ``buf[pos]`` (it must end before ``end`` and hold at most 10 bytes): the
    position after it, or -1."""
    cdef uint64_t result = 0
    cdef int shift = 0
    cdef uint8_t b
    while True:
        if pos >= end or shift > 63:
            return -1
        b = buf[pos]
        pos += 1
        result |= (<uint64_t>(b & 0x7F)) << shift
        if b < 0x80:
            out[0] = result
            return pos
        shift += 7
