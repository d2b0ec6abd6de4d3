# cython: language_level=3
"""Byte ranges of a buffer copied out one after another, the GIL released: the payloads of the
bridge formats' records (TFRecord features, WebDataset members, MDS columns) cut out of a read
shard. A list of slices joined by Python cost about 1 us a range: 0.25 s for the 220 k feature
payloads of a 55 MB TFRecord file."""
from libc.stdint cimport int64_t, uint8_t
from libc.string cimport memcpy

import numpy as np


def concat_ranges(const uint8_t[::1] data, const int64_t[::1] starts, const int64_t[::1] lengths):
    """The bytes ``data[starts[i]:starts[i] + lengths[i]]`` one after another (each range within
    ``data``, else ValueError)."""
    cdef Py_ssize_t n = starts.shape[0], i, total = 0, at = 0, size = data.shape[0]
    if lengths.shape[0] != n:
        raise ValueError(f"{n} starts, {lengths.shape[0]} lengths")
    for i in range(n):
        if starts[i] < 0 or lengths[i] < 0 or starts[i] > size - lengths[i]:
            raise ValueError(f"range {i} ({starts[i]}, {lengths[i]}) outside {size} bytes")
        total += lengths[i]
    out = np.empty(total, dtype=np.uint8)
    cdef uint8_t[::1] o = out
    with nogil:
        for i in range(n):
            if lengths[i]:
                memcpy(&o[at], &data[starts[i]], lengths[i])
                at += lengths[i]
    return out
