"""TFRecord framing: ``uint64 length | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)``.

CRC-32C (Castagnoli) with TensorFlow's mask (rotate right by 15, add 0xa282ead8). The CRC
comes from the ``crc32c`` package (hardware instructions where the CPU has them, several
GB/s; it is what the ``tfrecord`` package uses too), an optional dependency of the
``[tfrecord]`` extra: a missing package is an error naming the extra.
"""
from __future__ import annotations

import struct

import numpy as np

from recordkit.errors import FormatError, UsageError

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
MAX_RECORD = 1 << 31  # TensorFlow's reader refuses records of 2 GiB or more as corrupt too
FRAME_BYTES = _LEN.size + 2 * _CRC.size  # the bytes a record takes besides its data


def _crc_function():
    try:
        from crc32c import crc32c
    except ImportError:
        raise UsageError("TFRecord needs the 'crc32c' package: pip install 'recordkit[tfrecord]'") from None
    return crc32c


def masked_crc(data, crc=None) -> int:
    c = (crc or _crc_function())(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


class FrameEncoder:
    def __init__(self):
        self._crc = _crc_function()
        self.crc = self._crc  # the raw CRC-32C, for callers that mask column-wise

    def frame(self, data) -> bytes:
        n = _LEN.pack(len(data))
        c = self._crc
        return b"".join((n, _CRC.pack(masked_crc(n, c)), data, _CRC.pack(masked_crc(data, c))))


def scan(data, path, *, verify: bool = True, first_record: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(data offsets, lengths) of every record in ``data`` (a whole file), checking both CRCs.

    A length whose CRC does not match, data whose CRC does not match, or a record that runs
    past the end of the file is a ``FormatError`` with the byte offset and the record index.
    The walk and the CRCs are compiled (``_kernel.scan_frames``: per record in Python, the two
    CRC calls cost more than decoding the record).
    """
    from recordkit.formats.tfrecord import _kernel
    buf = np.frombuffer(data, dtype=np.uint8) if len(data) else np.zeros(0, dtype=np.uint8)
    offs, lens, problem = _kernel.scan_frames(buf, verify, MAX_RECORD)
    if problem is not None:
        code, pos, k, n = problem
        total = len(buf)
        where = dict(offset=pos, record=f"record {first_record + k}")
        if code == 1:
            raise FormatError(path, f"{total - pos} bytes at the end are too few for a record header "
                                    f"(truncated file?)", **where)
        if code == 2:
            raise FormatError(path, "length CRC mismatch: corrupt record header", **where)
        if code == 3:
            raise FormatError(path, f"record of {n} bytes runs past the end of the file (truncated file?)", **where)
        raise FormatError(path, "data CRC mismatch: the record's bytes are corrupt", **where)
    return offs, lens
