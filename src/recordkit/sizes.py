"""Byte counts as people write them: ``512MB``, ``1.5GiB`` in (``parse_size``), ``1.5 GiB`` out
(``format_size``).

The memory bound of a read (``max_memory``, ``recordkit read --max-memory``) and the range
cache's limit (``cache_limit``, ``--cache-limit``) take the same sizes, so the one parser sits
below both, next to ``errors.py``: it imports nothing of recordkit.
"""
from __future__ import annotations

import numbers
import re

_UNITS = {"": 1, "b": 1, "k": 10 ** 3, "kb": 10 ** 3, "kib": 1 << 10, "m": 10 ** 6, "mb": 10 ** 6,
          "mib": 1 << 20, "g": 10 ** 9, "gb": 10 ** 9, "gib": 1 << 30, "t": 10 ** 12, "tb": 10 ** 12,
          "tib": 1 << 40}


def parse_size(text) -> int:
    """Bytes from ``512MB``, ``1.5GiB``, ``4096`` (decimal units KB/MB/GB/TB, binary KiB/MiB/GiB/TiB)."""
    if isinstance(text, numbers.Integral):  # int and NumPy's integers
        value = int(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
        unit = m.group(2).lower() if m else None
        if m is None or unit not in _UNITS:
            raise ValueError(f"not a memory size: {text!r} (examples: 512MB, 2GiB, 1000000)")
        value = int(float(m.group(1)) * _UNITS[unit])
    if value <= 0:
        raise ValueError(f"a memory size must be positive, not {text!r}")
    return value


def format_size(n) -> str:
    n = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"
