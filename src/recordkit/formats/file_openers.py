"""A data set as picklable openers, one per input file: how a distributed read plans the formats
it reads file by file (CBF parts, OFRecord data sets, SINGA stores, CTF files).

The Ray datasource and the Spark data source (``integrations/chunk_plan.py``) open each input
once on the driver to learn its chunks, then again in every task from its opener (a
``functools.partial`` of the reader class), so nothing open crosses a process boundary. A
format that is planned this way names its function below as ``file_openers`` in its registry
entry (``formats/registry.py``); every function takes ``(path, streams, *, precision,
storage_options, cache_dir, ...)`` and returns the openers. Formats without one are read
through their one reader.
"""
from __future__ import annotations

import functools
import os
from typing import Callable

from recordkit.engine.streams import StreamSpec
from recordkit.errors import UsageError


def input_paths(paths) -> list[str]:
    if isinstance(paths, (str, bytes, os.PathLike)):
        paths = [paths]
    out = [os.fspath(p) for p in paths]
    if not out:
        raise UsageError("no input files given")
    return out


def stream_specs(streams) -> list[StreamSpec]:
    """StreamSpecs from specs or CLI-style strings ``NAME=FORMAT:DIM[:ALIAS]``."""
    return [StreamSpec.parse(s) if isinstance(s, str) else s for s in streams]


def cbf_files(path) -> list[str]:
    """A CBF file, or the numbered ``*.cbf`` parts of a directory in part order (``part-2`` before
    ``part-10``); any other directory is not one data set (``formats/directories.py``)."""
    from recordkit.formats.cbf.parts import cbf_part_paths
    path = os.fspath(path)
    return cbf_part_paths(path) if os.path.isdir(path) else [path]


def ctf_openers(paths, streams, **reader_options) -> list[Callable]:
    from recordkit.formats.ctf import CTFReader
    specs = stream_specs(streams)
    return [functools.partial(CTFReader, p, specs, **reader_options) for p in input_paths(paths)]


def cbf_openers(paths, streams=None, **reader_options) -> list[Callable]:
    from recordkit.formats.cbf import CBFReader
    files = [f for p in input_paths(paths) for f in cbf_files(p)]
    selection = streams if streams is None or isinstance(streams, dict) else stream_specs(streams)
    return [functools.partial(CBFReader, f, selection, **reader_options) for f in files]


def ofrecord_openers(dirs, streams, **reader_options) -> list[Callable]:
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    specs = stream_specs(streams)
    return [functools.partial(OFRecordDeserializer, d, specs, **reader_options) for d in input_paths(dirs)]


def singa_openers(paths, store: str | None = None, **reader_options) -> list[Callable]:
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
    if store in ("csv", "textfile"):
        if "count" not in reader_options:
            raise UsageError("read_singa(store='csv') needs count=N, the values per line")
        return [functools.partial(SingaCSVDeserializer, p, **reader_options) for p in input_paths(paths)]
    return [functools.partial(SingaRecordDeserializer, p, store, **reader_options) for p in input_paths(paths)]


# -- the registry's file_openers ---------------------------------------------------------------------------
def _storage(storage_options, cache_dir) -> dict:
    return {k: v for k, v in (("storage_options", storage_options), ("cache_dir", cache_dir)) if v}


def cbf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, allow_empty_streams=None, **_):
    """Every CBF file of ``path`` (a directory's parts in order); ``streams`` select."""
    return cbf_openers(path, streams, precision=precision, allow_empty_streams=allow_empty_streams,
                       **_storage(storage_options, cache_dir))


def ofrecord(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, **_):
    """The OFRecord data set at ``path`` with ``streams``, or the declarations it records."""
    if streams is None:
        from recordkit.formats.ofrecord.dataset import read_streams
        streams = read_streams(path, storage_options=storage_options)
    if streams is None:
        raise UsageError(f"{path}: the OFRecord data set records no stream declarations: give --stream")
    return ofrecord_openers(path, streams, precision=precision or "float", **_storage(storage_options, cache_dir))


def singa(path, streams=None, *, precision=None, storage_options=None, **_):
    """The SINGA record store at ``path`` (its kind sniffed)."""
    return singa_openers(path, precision=precision or "float", storage_options=storage_options)


def ctf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, **reader_options):
    """The CTF file at ``path`` with the declared ``streams`` (required); ``reader_options`` are
    CTFReader's (``max_errors``, ``chunk_size``, ``cache_index``...)."""
    if not streams:
        from recordkit.formats import registry
        from recordkit.formats.detect import streams_needed
        raise UsageError(streams_needed(path, registry.get("ctf"), storage_options))
    return ctf_openers(path, streams, precision=precision or "float", **reader_options,
                       **_storage(storage_options, cache_dir))
