"""Decoding a batch of OFRecord frames straight into NumPy arrays (the fast path).

The compiled decoder (``_kernel.decode_rows``) walks the protobuf wire format itself, in the
blocks the frames were read into (``decode_runs``: a batch is a few runs of one block each,
decoded into the rows of one output array, nothing copied together): a packed float list
becomes a row of the output with one memcpy, varints are read in place, and no protobuf object
is created per record. A batch that has a problem is decoded again frame by frame
(``decode_frames``, which joins the payloads), which locates the record and, under an error
budget, leaves it out. The rules are those of OneFlow's
``OFRecordRawDecoder`` (see ``decoders.raw_decode``, the reference path over decoded
records, which the tests compare with this one).
"""
from __future__ import annotations

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.ofrecord import _kernel
from recordkit.formats.ofrecord.blocks import frames_of

PROBLEMS = {1: "feature '{name}' is missing", 2: "feature '{name}' must hold exactly one bytes value, has {detail}",
            3: "feature '{name}' has {detail} values, expected {k} (use truncate or dim1_varying_length)",
            4: "record is malformed (not a valid OFRecord)", 5: "feature '{name}' has no kind set"}
DTYPES = {"float32", "float64", "int8", "int32", "int64", "uint8"}


def normalize_spec(features: dict) -> dict:
    out = {}
    for name, spec in features.items():
        if isinstance(spec, dict):
            shape, dtype = tuple(spec.get("shape", ())), spec.get("dtype", np.float32)
            truncate = bool(spec.get("truncate", False))
            varying = bool(spec.get("dim1_varying_length", False))
        else:
            (shape, dtype), truncate, varying = spec, False, False
            shape = tuple(shape) if isinstance(shape, (tuple, list)) else (int(shape),)
        dtype = np.dtype(dtype).name
        if dtype not in DTYPES:
            raise ValueError(f"feature '{name}': dtype {dtype} is not one of {', '.join(sorted(DTYPES))}")
        mode = 1 if truncate else (2 if varying else 0)
        out[name] = (shape, dtype, mode, int(np.prod(shape, dtype=np.int64)))
    return out


def decode_frames(frames: list, spec: dict, budget=None) -> dict:
    """{name: (n, *shape) array} for frames [(payload, (path, index, offset)), ...].

    A record with a problem is an error naming its part file, byte offset and index; with
    an error budget it is counted, reported and left out of the batch.
    """
    while True:
        payloads = [f[0] for f in frames]
        lengths = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=len(payloads))
        offsets = np.zeros(len(payloads), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        buf = np.frombuffer(b"".join(payloads), dtype=np.uint8) if payloads else np.zeros(0, np.uint8)
        out, bad = {}, None
        for name, (shape, dtype, mode, k) in spec.items():
            arr, problem = _kernel.decode_numeric(buf, offsets, lengths, name.encode("utf-8"), k, dtype, mode)
            if problem is not None:
                code, r, detail = problem
                path, index, offset = frames[r][1]
                bad = (r, FormatError(path, PROBLEMS[code].format(name=name, detail=detail, k=k), offset=offset,
                                      record=f"record {index}"))
                break
            out[name] = arr.reshape((len(payloads),) + shape)
        if bad is None:
            return out
        if budget is None:
            raise bad[1]
        budget.charge(bad[1], consequence="record skipped")
        frames = frames[:bad[0]] + frames[bad[0] + 1:]


def decode_runs(runs: list, spec: dict, budget=None) -> dict:
    """``decode_frames`` for a batch given as ``blocks.Run`` s, decoded where they were read."""
    n = sum(len(r) for r in runs)
    out = {}
    for name, (shape, dtype, mode, k) in spec.items():
        arr = np.empty((n, k), dtype=dtype)
        key, row = name.encode("utf-8"), 0
        for run in runs:
            if _kernel.decode_rows(run.data, run.offsets, run.lengths, key, k, mode, arr, row) is not None:
                return decode_frames(frames_of(runs), spec, budget)  # locates the record, or skips it
            row += len(run)
        out[name] = arr.reshape((n,) + shape)
    return out
