# distutils: language = c++
# cython: language_level=3
"""Compiled OFRecord framing scan: every frame's offset and length, or where it breaks.

A part file is frames of (int64 little-endian length, payload). Scanning only the
length prefixes is fast (one 8-byte read per record); it builds the offsets index
and finds every framing problem without parsing a payload.
"""
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

import numpy as np
cimport numpy as cnp

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
