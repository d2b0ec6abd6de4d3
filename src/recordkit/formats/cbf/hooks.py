"""The format registry's hooks for CBF (``formats/registry.py``): the probes of a file and a directory of parts,
the reader and writer factories, with the registry's uniform signatures. Each imports its codec when called."""
from __future__ import annotations

import struct

from recordkit.engine import DEFAULT_CHUNK_SIZE
from recordkit.formats.directories import numbered_set
from recordkit.formats.registry import _selection


def probe_cbf(path, head, src, storage_options) -> bool:
    from recordkit.formats.cbf import layout
    return len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == layout.MAGIC


def probe_cbf_parts(names) -> bool:
    return numbered_set(names, (".cbf",)) is not None


def open_cbf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, trace_level=None,
             allow_empty_streams=None, **_):
    """A CBF file, or a directory of CBF parts (``convert --engine ray OUT.cbf``) read as one data set."""
    from recordkit.formats.cbf.parts import open_cbf_data_set
    return open_cbf_data_set(path, _selection(streams), precision=precision, storage_options=storage_options,
                             cache_dir=cache_dir, trace_level=trace_level, allow_empty_streams=allow_empty_streams)


def create_cbf(path, streams, *, precision="float", chunk_size=None, checksums=False, storage_options=None, **_):
    from recordkit.formats.cbf import CBFWriter
    return CBFWriter(path, streams, precision=precision, chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
                     checksums=checksums, storage_options=storage_options)
