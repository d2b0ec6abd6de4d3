"""``.npy`` member headers (NumPy's format 1.0), made and parsed with a cache.

A shard holds one small array per member; ``np.save``/``np.load`` per member would cost a
``BytesIO`` and a ``literal_eval`` each. Members of one stream differ only in their first
dimension, so the header bytes of each (dtype, shape) are built once, and a header read back
is parsed once per distinct byte string.
"""
from __future__ import annotations

import ast
import struct

import numpy as np

MAGIC = b"\x93NUMPY"
MAX_BYTES = 1 << 62  # a header claiming more is damaged (far beyond any tar member)
_built: dict = {}
_parsed: dict = {}


def header(dtype: np.dtype, shape: tuple) -> bytes:
    """The header (magic .. newline) of a C-ordered little-endian array; padded to 64 bytes."""
    key = (dtype.str, shape)
    h = _built.get(key)
    if h is None:
        d = "{'descr': %r, 'fortran_order': False, 'shape': %r, }" % (np.dtype(dtype).newbyteorder("<").str, shape)
        total = len(MAGIC) + 4 + len(d) + 1
        d += " " * ((64 - total % 64) % 64) + "\n"
        h = _built[key] = MAGIC + b"\x01\x00" + struct.pack("<H", len(d)) + d.encode("latin1")
        if len(_built) > 4096:
            _built.clear()
    return h


class NpyError(ValueError):
    pass


def parse(buf, offset: int, size: int):
    """(dtype, shape, data offset, data bytes) of the ``.npy`` member at ``buf[offset:offset+size]``."""
    if size < 10 or bytes(buf[offset:offset + 6]) != MAGIC:
        raise NpyError("not a .npy array (no \\x93NUMPY magic)")
    major = buf[offset + 6]
    if major == 1:
        hlen = struct.unpack_from("<H", buf, offset + 8)[0]
        start = offset + 10
    elif major in (2, 3):
        if size < 12:
            raise NpyError("truncated .npy header")
        hlen = struct.unpack_from("<I", buf, offset + 8)[0]
        start = offset + 12
    else:
        raise NpyError(f"unknown .npy version {major}")
    end = start + hlen
    if end > offset + size:
        raise NpyError(f".npy header of {hlen} bytes runs past the member")
    dtype, shape, n = parse_text(bytes(buf[start:end]))
    if end + n > offset + size:
        raise NpyError(f".npy data of shape {shape} needs {n} bytes, the member has {offset + size - end}")
    return dtype, shape, end, n


def parse_text(text: bytes):
    """(dtype, shape, data bytes) of a ``.npy`` header dictionary (cached by its bytes)."""
    got = _parsed.get(text)
    if got is None:
        try:
            d = ast.literal_eval(text.decode("latin1"))
            dtype = np.dtype(d["descr"])
            shape = tuple(int(x) for x in d["shape"])
            fortran = bool(d["fortran_order"])
        except Exception as e:  # noqa: BLE001 - any malformed header is the same problem
            raise NpyError(f"unreadable .npy header {text[:80]!r}: {e}") from None
        if dtype.hasobject:
            raise NpyError(".npy member holds Python objects (refused: loading them would run pickle)")
        if any(x < 0 for x in shape):
            raise NpyError(f".npy shape {shape} has a negative dimension")
        if fortran and len(shape) > 1:
            raise NpyError(".npy member in Fortran order is not supported")
        count = 1
        for x in shape:
            count *= x
        if count * dtype.itemsize > MAX_BYTES:  # no member holds it; and sizes stay int64 arithmetic
            raise NpyError(f".npy shape {shape} of {dtype} claims {count * dtype.itemsize} bytes")
        got = (dtype, shape, count * dtype.itemsize)
        if len(_parsed) > 4096:
            _parsed.clear()
        _parsed[text] = got
    return got
