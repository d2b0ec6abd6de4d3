#!/usr/bin/env python3
"""atheris (libFuzzer) harness for the SINGA store readers and record decoders.

The first byte of the input picks the target, the rest is the payload:

* 0-2: the payload written as a KVFile / BinFile / TextFile and read twice (strict, then
  tolerant), with ``seek_to_first`` between two passes that must agree;
* 3: the payload sniffed and opened with the detected kind;
* 4-5: ``records.decode_record`` / ``decode_image_record_v1`` on the payload.

Only ``recordkit.errors.RecordkitError`` may escape a read, and a tolerant read may not
raise ``FormatError`` at all; a ``FormatError`` must name the file and a byte offset.
Anything else is re-raised so libFuzzer records a crash.

    .venv/bin/pip install atheris
    .venv/bin/python fuzz/fuzz_singa.py -max_total_time=600 -rss_limit_mb=2048 /tmp/rk-fuzz/singa
"""
from __future__ import annotations

import os
import sys
import tempfile
import warnings

import atheris

with atheris.instrument_imports(include=["recordkit"]):
    from recordkit.errors import FormatError, RecordkitError
    from recordkit.formats import singa
    from recordkit.formats.singa import records

_DIR = tempfile.mkdtemp(prefix="rk-atheris-singa-")
PATH = os.path.join(_DIR, "store.bin")
KINDS = ("kvfile", "binfile", "textfile")
warnings.simplefilter("ignore")


def _located(e: FormatError, path: str) -> None:
    if e.path != path or not str(e).startswith(path):
        raise AssertionError(f"FormatError does not name the file: {e}")
    if e.offset is None and e.line is None:
        raise AssertionError(f"FormatError without a position: {e}")


def _read(kind, tolerant):
    with singa.open(PATH, "read", kind, tolerant=tolerant) as store:
        first = list(store)
        store.seek_to_first()
        if list(store) != first:
            raise AssertionError("two passes over the same store disagree")


def TestOneInput(data: bytes) -> None:
    if not data:
        return
    target, payload = data[0] % 6, data[1:]
    if target >= 4:
        decode = records.decode_record if target == 4 else records.decode_image_record_v1
        try:
            decode(payload, path="S.kv", offset=0, record="tuple 0")
        except FormatError as e:
            _located(e, "S.kv")
        return
    with open(PATH, "wb") as f:
        f.write(payload)
    if target == 3:
        try:
            kind = singa.sniff(PATH)
        except FormatError as e:
            _located(e, PATH)
            return
        kinds = [kind] if kind else []
    else:
        kinds = [KINDS[target]]
    for kind in kinds:
        try:
            _read(kind, tolerant=False)
        except FormatError as e:
            _located(e, PATH)
        except RecordkitError:
            pass
        try:
            _read(kind, tolerant=True)
        except FormatError as e:
            raise AssertionError(f"tolerant read raised {e}") from e
        except RecordkitError:
            pass


def main() -> None:
    atheris.Setup(sys.argv, TestOneInput)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
