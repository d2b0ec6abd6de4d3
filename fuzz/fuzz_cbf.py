#!/usr/bin/env python3
"""atheris (libFuzzer) harness for the CBF reader.

Each input is written to a temp file, opened with CBFReader and every chunk loaded
(threads=1 or 2 and precision None/'double', picked from first XOR last byte; the
file is the input unchanged). Only recordkit.errors.RecordkitError may
escape; anything else (ValueError, MemoryError, ...) is re-raised so libFuzzer records
a crash; a segfault in the compiled kernel is caught by libFuzzer itself. FormatErrors
must name the file and a byte offset.

    .venv/bin/python fuzz/fuzz_cbf.py -max_total_time=600 -rss_limit_mb=2048 tests/fuzz/corpus/cbf
"""
import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports():
    from recordkit.errors import FormatError, RecordkitError
    from recordkit.formats.cbf import CBFReader

_DIR = tempfile.mkdtemp(prefix="rk-atheris-cbf-")
PATH = os.path.join(_DIR, "input.cbf")
warnings.simplefilter("ignore")


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    with open(PATH, "wb") as f:
        f.write(data)
    opts = data[0] ^ data[-1]
    threads = 2 if opts & 1 else 1
    precision = "double" if opts & 2 else None
    try:
        r = CBFReader(PATH, precision=precision)
        try:
            if threads > 1:
                for chunk in r.iter_chunks(threads=2):
                    for _seq in chunk:
                        pass
            else:
                for c in r.chunks:
                    r.sequence_lengths(c.id)
                    for _seq in r.load_chunk(c.id):
                        pass
        finally:
            r.close()
    except RecordkitError as e:
        if isinstance(e, FormatError):
            if e.path != PATH or PATH not in str(e):
                raise AssertionError(f"FormatError does not name the file: {e}")
            if e.offset is None:
                raise AssertionError(f"FormatError without a byte offset: {e}")


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
