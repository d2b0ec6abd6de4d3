"""Protobuf wire-format pieces for building hostile records by hand, independent of the code under test."""
from __future__ import annotations


def varint(v: int) -> bytes:
    """Base-128 varint of ``v`` taken as a 64-bit two's complement value (negative numbers: 10 bytes)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)
