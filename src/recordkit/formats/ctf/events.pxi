# The CTF kernel's event codes: errors and warnings it records as small integers (code, sequence,
# line, column, stream, a, b) without the GIL. Included by _kernel.pyx; formats/ctf/messages.py
# gives each its words, and tests/test_ctf_errors.py checks that every code here has the same value
# and a message there.
# Errors that drop the whole sequence:
DEF E_NUMBER = 1          # a value does not start like a number
DEF E_SIGN = 2            # a sign not followed by a digit
DEF E_EXPONENT = 3        # 'e' not followed by digits
DEF E_AFTER_NUMBER = 4    # a number followed by a byte that cannot end it
DEF E_SPARSE_INDEX = 5    # a sparse pair does not start with an index
DEF E_INDEX_OVERFLOW = 6  # sparse index beyond 64 bits
DEF E_INDEX_RANGE = 7     # sparse index >= dim
DEF E_COLON = 8           # index not followed by ':'
DEF E_TOO_MANY = 9        # more dense values than dim
DEF E_NO_VALUES = 10      # input name with no values where the file ends
DEF E_DUPLICATE_INPUT = 11  # the same input twice on one line
# Errors that skip only themselves:
DEF E_STRAY = 20          # a byte where '|' was expected
DEF E_EMPTY_NAME = 21     # '|' not followed by a name
DEF E_ID_ALONE = 22       # a sequence id with nothing else on its line
# Index errors (the sequence is left out of the index):
DEF E_DUPLICATE_ID = 30   # an id reused by a non-adjacent sequence
DEF E_ID_OVERFLOW = 31    # an id beyond 64 bits
DEF E_NO_ID = 32          # id mode, but the first content line has no id (cannot happen after mode detection)
# Warnings:
DEF W_PADDED = 40         # dense sample shorter than dim, zero padded
DEF W_UNKNOWN = 41        # undeclared input skipped
DEF W_EMPTY_SEQUENCE = 42 # sequence with no samples of any declared stream, left out

