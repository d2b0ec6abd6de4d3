# distutils: language = c++
# cython: language_level=3
"""Compiled CTF kernels: the index scan, the chunk parser and the value formatter.

Everything here runs without the GIL, so chunks parse in parallel threads. The
kernels only *record* problems (error and warning events with byte positions and
line numbers); turning them into messages, warnings and exceptions, and applying
the error budget, is the Python layer's job (reader.py), which keeps this file a
plain byte-level state machine.

Lexical classes follow CNTK 2.7 (TextReaderConstants.h): space and TAB delimit
values; every byte < 0x20 or >= 0x80 except '\n' is a column delimiter (so '\r'
of CRLF files is skipped); '|' starts a sample, '|#' a comment running to the next
'|' or end of line.
"""
from libc.stdint cimport uint64_t, int64_t, int32_t, uint32_t, uint8_t
from libc.string cimport memchr, memcpy, memcmp
from libc.stdlib cimport strtod, strtof, malloc, free, realloc
from cpython.buffer cimport PyBuffer_FillInfo
from libc.stdio cimport snprintf
from libcpp.vector cimport vector
from libcpp.unordered_map cimport unordered_map
from cython.operator cimport dereference as deref

import numpy as np
cimport numpy as cnp

cnp.import_array()

# The event codes: events.pxi, the one place they are written (messages.py says what each means
# in words; tests/test_ctf_errors.py checks that the two agree code for code).
include "events.pxi"

# The kernel, one file per job (each included here, so it stays one module):
include "_lexical.pxi"
include "_numbers.pxi"
include "_index_scan.pxi"
include "_parse.pxi"
include "_format.pxi"
