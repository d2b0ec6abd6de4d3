"""The format registry's hooks for CTF text (``formats/registry.py``): the reader and writer factories, with the
registry's uniform signatures. Each imports its codec when called."""
from __future__ import annotations

from recordkit.engine import DEFAULT_CHUNK_SIZE
from recordkit.formats.registry import _selection


def open_ctf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, max_errors=0,
             skip_sequence_ids=False, trace_level=None, chunk_size=DEFAULT_CHUNK_SIZE, cache_index=False,
             allow_empty_streams=None, allow_padding=None, **_):
    from recordkit.errors import UsageError
    from recordkit.formats.ctf import CTFReader
    streams = _selection(streams)
    if not streams:
        from recordkit.formats import registry
        from recordkit.formats.detect import streams_needed
        raise UsageError(streams_needed(path, registry.get("ctf"), storage_options))
    return CTFReader(path, streams, precision=precision or "float", max_errors=max_errors,
                     skip_sequence_ids=skip_sequence_ids, trace_level=trace_level, chunk_size=chunk_size,
                     cache_index=cache_index, allow_empty_streams=allow_empty_streams, allow_padding=allow_padding,
                     storage_options=storage_options, cache_dir=cache_dir)


def create_ctf(path, streams, *, precision="float", checksums=False, storage_options=None, **_):
    from recordkit.formats.ctf import CTFWriter
    return CTFWriter(path, streams, precision=precision, checksums=checksums, storage_options=storage_options)
