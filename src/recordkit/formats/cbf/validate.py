"""Validating a CBF file: prefix, header and offset table, then every chunk, located.

A damaged header or offset table leaves nothing to walk (chunk boundaries come from the
table), so it is one problem and the end. Otherwise every chunk is decoded by the compiled
walker, which checks every count against its bytes, sparse indices against the dimension and
per-sample non-zero counts against NNZ; a bad chunk is reported (byte offset, chunk, stream and
sequence) and the next chunk is checked.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from recordkit.errors import FormatError
from recordkit.formats.validate import Problem, checksum_problems, is_checksum_error

# cbf.reader._PROBLEMS codes -> kinds
CHUNK_KINDS = {1: "sample-counts-overrun", 2: "sequence-overrun", 3: "negative-nnz", 4: "sparse-index-range",
               5: "nnz-mismatch", 6: "negative-sample-nnz", 7: "chunk-trailing-bytes", 8: "chunk-too-small"}


def _kind(error: FormatError) -> str:
    from recordkit.formats.cbf.reader import _PROBLEMS
    for code, text in _PROBLEMS.items():
        if error.message.startswith(text):
            return CHUNK_KINDS[code]
    if "offset table says" in error.message:
        return "chunk-sample-count"
    if "file shrank" in error.message:
        return "file-shrank"
    return "chunk"


def validate(path, *, checked: Counter, storage_options=None, cache_dir=None, **_) -> Iterator[Problem]:
    from recordkit.formats.cbf import CBFReader
    path = str(path)
    checked["files"] += 1
    bad_blocks = list(checksum_problems(path, storage_options=storage_options))
    yield from bad_blocks
    try:
        reader = CBFReader(path, storage_options=storage_options, cache_dir=cache_dir)
    except FormatError as e:
        if not is_checksum_error(e):
            yield Problem.from_error(e, "header")
        return
    if bad_blocks:  # reported already: check the chunks' structure as the bytes are, block mismatches aside
        from recordkit.storage.source import open_source
        reader._source.close()
        reader._source = open_source(path, storage_options=storage_options, verify=False)
    with reader:
        checked["bytes"] += reader.header.file_size
        for info in reader.chunks:
            checked["chunks"] += 1
            try:
                reader.load_chunk(info.id)
            except FormatError as e:
                if not is_checksum_error(e):
                    yield Problem.from_error(e, _kind(e), record=e.record or f"chunk {info.id}")
                continue
            checked["sequences"] += info.num_sequences
