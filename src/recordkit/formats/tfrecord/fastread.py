"""The fast path's shared pieces: the signal to fall back, and payloads cut out of a read file.

The canonical layout (what recordkit, TensorFlow and the protobuf package write: packed lists,
one ``features``/``feature_lists`` field a record, a name once) is walked record by record in
compiled code (``_kernel.example_features``, ``_kernel.sequence_examples``). Anything else
raises ``NotCanonical`` and the reader falls back to the protobuf path, which also produces the
located errors for damaged records.
"""
from __future__ import annotations

import numpy as np


class NotCanonical(Exception):
    """Not the layout the compiled walkers take: use the protobuf path."""


def gather(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The payload bytes ``arr[starts[i]:starts[i]+lens[i]]`` concatenated (ranges in file order)."""
    from recordkit.formats.sharding import gather_ranges
    try:
        return gather_ranges(arr, starts, lens)
    except ValueError:
        raise NotCanonical from None
