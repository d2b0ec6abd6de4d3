"""Integers read into recordkit's float streams, exactly or not at all.

recordkit's streams hold float32 or float64 (``engine/streams.py``): an integer a data set stores
(a TFRecord int64_list, a WebDataset ``.cls`` label or integer ``.npy``) is converted only where
the float holds it exactly: |v| <= 2^24 for float32, 2^53 for float64, and larger values that
happen to be exact. Any other value is refused by the caller, located; never rounded silently.
"""
from __future__ import annotations

import numpy as np


def exact_floats(values: np.ndarray, dtype) -> tuple[np.ndarray, int | None]:
    """Integer ``values`` as ``dtype`` and the index of the first one it does not hold exactly (or None)."""
    values = np.asarray(values)
    out = values.astype(dtype)
    if values.dtype.kind not in "iu" or values.dtype.itemsize <= 2:
        return out, None  # 8/16-bit integers: every value is exact in float32
    ok = out.astype(np.float64) == values.astype(np.float64)  # exact comparison while |v| <= 2^53
    big = np.flatnonzero((values > 2**53) | (values < -2**53)) if values.dtype.kind == "i" else \
        np.flatnonzero(values > 2**53)
    for i in big.tolist():
        ok.flat[i] = bool(np.isfinite(out.flat[i])) and int(out.flat[i]) == int(values.flat[i])
    bad = np.flatnonzero(~ok.reshape(-1))
    return out, (int(bad[0]) if len(bad) else None)


def refusal(value, dtype) -> str:
    """Why ``value`` is refused, and the way out where there is one."""
    hint = " (--precision double holds integers up to 2^53)" if np.dtype(dtype) == np.float32 else ""
    return f"integer {value} has no exact {np.dtype(dtype)} (recordkit's streams hold float32/float64){hint}"
