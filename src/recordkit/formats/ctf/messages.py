"""Turning the kernel's error and warning events into located messages.

The compiled parser records events as small integer tuples (code, sequence,
line, column, stream, a, b) so it never needs the GIL; this module is the one
place that knows what each code means in words.
"""
from __future__ import annotations

# the kernel's codes (events.pxi, checked against these by tests/test_ctf_errors.py)
E_NUMBER, E_SIGN, E_EXPONENT, E_AFTER_NUMBER = 1, 2, 3, 4
E_SPARSE_INDEX, E_INDEX_OVERFLOW, E_INDEX_RANGE, E_COLON = 5, 6, 7, 8
E_TOO_MANY, E_NO_VALUES, E_DUPLICATE_INPUT = 9, 10, 11
E_STRAY, E_EMPTY_NAME, E_ID_ALONE = 20, 21, 22
E_DUPLICATE_ID, E_ID_OVERFLOW, E_NO_ID = 30, 31, 32
W_PADDED, W_UNKNOWN, W_EMPTY_SEQUENCE = 40, 41, 42

DROPS_SEQUENCE = {E_NUMBER, E_SIGN, E_EXPONENT, E_AFTER_NUMBER, E_SPARSE_INDEX, E_INDEX_OVERFLOW,
                  E_INDEX_RANGE, E_COLON, E_TOO_MANY, E_NO_VALUES, E_DUPLICATE_INPUT,
                  E_DUPLICATE_ID, E_ID_OVERFLOW}


def describe_byte(b: int) -> str:
    if b == 256:
        return "end of file"
    if b == 10:
        return "end of line"
    if 32 <= b < 127:
        return repr(chr(b))
    return f"byte 0x{b:02x}"


def error_message(code: int, stream: str | None, a: int, b: int) -> str:
    s = f"input '{stream}'" if stream is not None else "input"
    if code == E_NUMBER:
        return f"malformed value in {s}: expected a number, found {describe_byte(a)}"
    if code == E_SIGN:
        return f"malformed value in {s}: expected a digit after the sign, found {describe_byte(a)}"
    if code == E_EXPONENT:
        return f"malformed value in {s}: expected exponent digits, found {describe_byte(a)}"
    if code == E_AFTER_NUMBER:
        return (f"malformed value in {s}: unexpected {describe_byte(a)} after a number "
                f"(expected a space, tab, '|' or end of line)")
    if code == E_SPARSE_INDEX:
        return f"malformed sparse value in {s}: expected INDEX:VALUE with a non-negative index, found {describe_byte(a)}"
    if code == E_INDEX_OVERFLOW:
        return f"sparse index in {s} does not fit in 64 bits"
    if code == E_INDEX_RANGE:
        return f"sparse index {a} in {s} is out of range: expected 0 <= index < dim {b}"
    if code == E_COLON:
        return f"malformed sparse value in {s}: expected ':' after index {b}, found {describe_byte(a)}"
    if code == E_TOO_MANY:
        return f"too many values for dense {s}: expected at most dim {a} values"
    if code == E_NO_VALUES:
        return f"{s} has no values: expected values before the end of the file (file cut off?)"
    if code == E_DUPLICATE_INPUT:
        return f"{s} appears twice on one line: expected at most one sample per input per line"
    if code == E_STRAY:
        return f"unexpected {describe_byte(a)}: expected '|' followed by an input name"
    if code == E_EMPTY_NAME:
        return f"'|' is followed by {describe_byte(a)}: expected an input name"
    if code == E_ID_ALONE:
        return "sequence id with no samples on its line: expected '|' followed by an input name"
    if code == E_DUPLICATE_ID:
        return (f"sequence id {a} was already used by the sequence starting on line {b}: "
                f"expected ids to repeat only on consecutive lines")
    if code == E_ID_OVERFLOW:
        return "sequence id does not fit in 64 bits: expected at most 18446744073709551615"
    if code == E_NO_ID:
        return "expected a sequence id at the start of the line"
    return f"error code {code}"
