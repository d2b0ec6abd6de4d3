#!/usr/bin/env python3
"""atheris (libFuzzer) harness for the CTF reader.

Each input is written to a temp file and read with CTFReader under a few option
combinations picked from the input's first byte (max_errors 0/1000, skip_sequence_ids,
tiny chunk sizes and threads=2 to exercise piece splitting). Only
recordkit.errors.RecordkitError may escape the reader; anything else is re-raised so
libFuzzer records a crash (and a segfault in the compiled kernel is caught by libFuzzer
itself). FormatErrors must name the file.

    .venv/bin/python fuzz/fuzz_ctf.py -max_total_time=600 tests/fuzz/corpus/ctf
"""
import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports():
    from recordkit import StreamSpec
    from recordkit.errors import FormatError, RecordkitError
    from recordkit.formats.ctf import CTFReader

STREAM_SETS = [
    [StreamSpec("a", "dense", 3), StreamSpec("b", "sparse", 10, "b")],
    [StreamSpec("x", "dense", 4), StreamSpec("s", "sparse", 6), StreamSpec("y", "dense", 1)],
    [StreamSpec("F0", "sparse", 100)],
    [StreamSpec("F0", "dense", 10), StreamSpec("A", "dense", 1), StreamSpec("B", "sparse", 5)],
]
CHUNK_SIZES = [1 << 20, 1, 16, 100]

_DIR = tempfile.mkdtemp(prefix="rk-atheris-ctf-")
PATH = os.path.join(_DIR, "input.ctf")
warnings.simplefilter("ignore")


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    opts, body = data[0], data[1:]
    with open(PATH, "wb") as f:
        f.write(body)
    streams = STREAM_SETS[opts & 3]
    max_errors = 0 if opts & 4 else 1000
    skip_ids = bool(opts & 8)
    chunk_size = CHUNK_SIZES[(opts >> 4) & 3]
    threads = 2 if opts & 64 else 1
    try:
        r = CTFReader(PATH, streams, max_errors=max_errors, skip_sequence_ids=skip_ids, chunk_size=chunk_size)
        try:
            for chunk in r.iter_chunks(threads=threads):
                for _seq in chunk:
                    pass
        finally:
            r.close()
    except RecordkitError as e:
        if isinstance(e, FormatError) and (e.path != PATH or PATH not in str(e)):
            raise AssertionError(f"FormatError does not name the file: {e}")


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
