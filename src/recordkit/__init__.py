"""recordkit: read, write and feed to training the record formats of deep-learning frameworks.

The public face, in one place:

* ``recordkit.open(path, streams=None, **options)``: the reader for any data set recordkit knows
  (the format told by its content, then its name), a Deserializer;
* ``recordkit.convert(src, dst, to=None)``, ``recordkit.verify(src, dst)``,
  ``recordkit.validate(path)``: the ``convert``, ``verify`` and ``validate`` commands as functions;
* ``MinibatchSource`` and its companions (``StreamSpec``, ``ChunkPartition``, ``Mixture``,
  ``CompositeDeserializer``), ``from_config`` for a BrainScript reader section;
* ``recordkit.readers`` and ``recordkit.writers``: every reader and writer class.

Names are imported on first use, so ``import recordkit`` (and ``recordkit --help``) pays for no
NumPy, SciPy or pyarrow: a command imports only what it uses.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from recordkit._lazy import resolver
from recordkit.errors import FormatError, RecordkitError, RecordkitWarning

if TYPE_CHECKING:
    from recordkit.engine.chunk_partition import ChunkPartition
    from recordkit.engine.composite import CompositeDeserializer
    from recordkit.compose.convert import Conversion
    from recordkit.engine.deserializer import Deserializer
    from recordkit.engine.mixture import Mixture
    from recordkit.engine.source import MinibatchSource
    from recordkit.engine.streams import StreamSpec
    from recordkit.compose.verify import VerifyResult
    from recordkit.formats.validate import Problem

__version__ = "0.1.0"

_SOURCES = {"StreamSpec": "recordkit.engine.streams", "MinibatchSource": "recordkit.engine.source",
            "ChunkPartition": "recordkit.engine.chunk_partition",
            "CompositeDeserializer": "recordkit.engine.composite", "Mixture": "recordkit.engine.mixture"}
__getattr__ = resolver(__name__, _SOURCES)

PathLike = "str | os.PathLike[str]"

def open(path: str | os.PathLike[str], streams: Iterable[StreamSpec | str] | None = None, *,
         format: str | None = None, precision: str | None = None, storage_options: dict | None = None,
         cache_dir: str | None = None, cache_limit: int | str | None = None, offline: bool = False,
         **options: Any) -> Deserializer:
    """The reader for the data set at ``path``, in any format of the registry.

    The format is told from the content (magic numbers, a directory's description), then from
    the name; ``format=`` names it instead (``"ctf"``, ``"cbf"``, ``"parquet"``... as
    ``recordkit convert --to`` does). ``streams``: ``StreamSpec`` objects or the command line's
    ``NAME=FORMAT:DIM[:ALIAS]`` texts; needed where the data does not describe itself (CTF), else a
    selection and renaming of the recorded streams. ``options`` are the format's reader options
    (CTF: ``max_errors``, ``skip_sequence_ids``, ``chunk_size``, ``cache_index``, ``trace_level``).
    ``cache_dir`` keeps the ranges read from remote files; ``cache_limit`` bounds it (bytes or
    "20GB"); ``offline=True`` reads from it alone, never asking the store (docs/remote-storage.md).

    The reader is a Deserializer (``streams``, ``chunks``, ``load_chunk``, iteration in file order)
    and a context manager::

        with recordkit.open("demo.ctf", ["word=sparse:5000:w", "features=dense:4:f"]) as reader:
            for sequence in reader:
                sequence["features"]        # NumPy (samples, 4) float32
    """
    from recordkit.compose.convert import open_reader
    from recordkit.storage.range_cache import cache_dir_of
    return open_reader(os.fspath(path), source_format=format, streams=streams, precision=precision,
                       storage_options=storage_options,
                       cache_dir=cache_dir_of(cache_dir, cache_limit=cache_limit, offline=offline), **options)

def convert(src: Any, dst: str | os.PathLike[str], to: str | None = None,
            streams: Iterable[StreamSpec | str] | None = None, **kwargs: Any) -> Conversion:
    """Convert ``src`` (a path in any format, or a Deserializer) into ``dst`` in format ``to``
    (any format of the registry; by default told from ``dst``'s extension). Returns a
    ``Conversion`` (sequences, bytes, seconds, the size estimate). ``kwargs``: the options of
    ``recordkit.compose.convert.convert`` (``parts``, ``shard_size``, ``checksums``, ``precision``...)."""
    from recordkit.compose.convert import convert as run
    return run(src, dst, to, streams, **kwargs)

def verify(src: Any, dst: Any, *, streams: Iterable[StreamSpec | str] | None = None,
           dst_streams: Iterable[StreamSpec | str] | None = None, max_differences: int = 10,
           compare_keys: bool | None = None) -> VerifyResult:
    """Compare every sequence of ``src`` and ``dst`` (paths or Deserializers): a conversion is
    lossless when ``result.equal``. ``streams`` declares ``src``'s streams where it does not describe
    them itself (CTF); ``dst_streams`` the same for ``dst``, by default the streams ``convert``
    writes for ``src`` (its names, and CTF's aliases kept where ``convert`` keeps them). Sequences
    are matched by key where both sides keep keys, else by position."""
    from recordkit.compose.verify import verify as compare
    a = open(src, streams) if isinstance(src, (str, os.PathLike)) else src
    try:
        b = dst if not isinstance(dst, (str, os.PathLike)) else _open_output(dst, dst_streams, a)
        try:
            return compare(a, b, max_differences=max_differences, compare_keys=compare_keys)
        finally:
            if b is not dst:
                _close(b)
    finally:
        if a is not src:
            _close(a)


def _close(reader: object) -> None:
    close = getattr(reader, "close", None)
    if close is not None:
        close()


def _open_output(path: str | os.PathLike[str], streams: Iterable[StreamSpec | str] | None,
                 source: Deserializer) -> Deserializer:
    """``path`` opened with ``streams``, or as it describes itself, or, where its format needs
    declarations (CTF), with the streams a conversion from ``source`` writes into it."""
    if streams is None:
        from recordkit.formats import registry
        from recordkit.formats.detect import sniff_format
        fmt = registry.get(sniff_format(os.fspath(path)))
        if fmt.needs_streams:
            from recordkit.compose.convert import output_streams
            streams = output_streams(source, fmt.name)
        return open(path, streams, format=fmt.name)  # told once, not sniffed again
    return open(path, streams)


def validate(path: str | os.PathLike[str], format: str | None = None, **options: Any) -> Iterator[Problem]:
    """Every problem of the data set at ``path`` (each a ``Problem`` with its location), read to
    the end; lazy, so stopping early stops the reading. ``options`` as ``recordkit validate``'s
    (``streams`` for CTF, as ``StreamSpec`` objects or ``NAME=FORMAT:DIM[:ALIAS]`` texts;
    ``storage_options``...)."""
    from recordkit.compose.convert import stream_specs
    from recordkit.formats.validate import validate as run
    if options.get("streams") is not None:
        options["streams"] = stream_specs(options["streams"])
    return run(os.fspath(path), format, **options)

def from_config(text: str, **kwargs: Any) -> MinibatchSource:
    """A MinibatchSource from a CNTK BrainScript reader section (see compat/config_source.py)."""
    from recordkit.compat.config_source import from_config as build
    return build(text, **kwargs)

__all__ = ["ChunkPartition", "CompositeDeserializer", "FormatError", "MinibatchSource", "Mixture", "RecordkitError",
           "RecordkitWarning", "StreamSpec", "__version__", "convert", "from_config", "open", "validate", "verify"]
