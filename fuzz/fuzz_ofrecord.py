"""Coverage-guided fuzzing of the OFRecord decoders, with atheris.

    .venv/bin/pip install atheris
    .venv/bin/python fuzz/fuzz_ofrecord.py -atheris_runs=0 -max_total_time=120 [corpus_dir]

One input drives every path: the first byte picks the target (codec.decode,
_kernel.decode_record, _kernel.decode_numeric over the input split into records, and
the frame scan + OFRecordReader records/batches over the input written as a part
file). Anything escaping other than ``RecordkitError`` is a finding (atheris reports
the traceback and saves the input as ``crash-*``); a segfault in a compiled kernel is
caught by libFuzzer's signal handler the same way.
"""
from __future__ import annotations

import os
import struct
import sys
import tempfile
import warnings

import atheris

import numpy as np

with atheris.instrument_imports(include=["recordkit"]):
    from recordkit.errors import FormatError, RecordkitError
    from recordkit.formats.ofrecord import _kernel, codec
    from recordkit.formats.ofrecord.dataset import scan_part
    from recordkit.formats.ofrecord.reader import OFRecordReader

TMP = tempfile.mkdtemp(prefix="rk-atheris-")
PART = os.path.join(TMP, "part-00000")
SPEC = {"x": ((3,), np.float32), "y": ((), np.int64),
        "b": {"shape": (4,), "dtype": "uint8", "truncate": True},
        "z": {"shape": (2,), "dtype": "float64", "dim1_varying_length": True}}
DTYPES = ["float32", "float64", "int8", "int32", "int64", "uint8"]


def seeds():
    rec = codec.encode({"x": np.arange(3, dtype=np.float32), "y": 7, "b": b"abcd", "z": np.ones(2)})
    return [bytes([i]) + rec for i in range(5)] + [
        bytes([4]) + struct.pack("<q", len(rec)) + rec + struct.pack("<q", 2**62)]


def _located(e: FormatError, path: str) -> None:
    if e.path != path or (e.offset is None and e.line is None):
        raise AssertionError(f"error not located in {path}: {e!r} (path={e.path}, offset={e.offset})")


def test_one_input(data: bytes) -> None:
    if not data:
        return
    target, body = data[0] % 5, data[1:]
    if target == 0:
        try:
            codec.decode(body, path="P", offset=0, index=0)
        except FormatError as e:
            _located(e, "P")
    elif target == 1:
        _kernel.decode_record(np.frombuffer(body, np.uint8))
    elif target == 2:
        fdp = atheris.FuzzedDataProvider(body)
        k = fdp.ConsumeIntInRange(0, 9)
        dtype = DTYPES[fdp.ConsumeIntInRange(0, 5)]
        mode = fdp.ConsumeIntInRange(0, 2)
        name = fdp.PickValueInList([b"x", b"y", b"b", b"z"])
        cuts = sorted(fdp.ConsumeIntInRange(0, 1 << 16) for _ in range(fdp.ConsumeIntInRange(0, 4)))
        rest = fdp.ConsumeBytes(1 << 20)
        bounds = [0] + [min(c, len(rest)) for c in cuts] + [len(rest)]
        offsets = np.array(bounds[:-1], np.int64)
        lengths = np.diff(np.array(bounds, np.int64))
        buf = np.frombuffer(rest, np.uint8) if rest else np.zeros(0, np.uint8)
        arr, problem = _kernel.decode_numeric(buf, offsets, lengths, name, k, dtype, mode)
        assert arr.shape == (len(offsets), k)
    else:
        with open(PART, "wb") as f:
            f.write(body)
        err = scan_part(PART).error()
        if err is not None:
            _located(err, PART)
        how = [None, ("x", "y"), ("b", "z")][data[0] // 5 % 3]
        reader = OFRecordReader(PART, batch_size=3, epochs=1, rank=0, world_size=1,
                                max_errors=0 if target == 3 else 1000)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if how is None:
                    for _ in reader:
                        pass
                else:
                    for _ in reader.batches({k: SPEC[k] for k in how}):
                        pass
        except FormatError as e:
            _located(e, PART)
        finally:
            reader.close()


def main() -> None:
    args = list(sys.argv)
    corpus = [a for a in args[1:] if not a.startswith("-")]
    if corpus:
        os.makedirs(corpus[0], exist_ok=True)
        for i, s in enumerate(seeds()):
            p = os.path.join(corpus[0], f"seed-{i}")
            if not os.path.exists(p):
                with open(p, "wb") as f:
                    f.write(s)
    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
