"""A directory of CBF parts read as one data set.

``recordkit convert --engine ray IN OUT.cbf`` (and ``CBFDatasink``) writes OUT as a directory
of ``part-NNNNN.cbf`` files, each a run of consecutive sequences. Read in part order (the
number in the name, so ``part-2`` before ``part-10``) they hold what one CBF file would, and
``CBFParts`` presents them as that one file: chunks numbered across the parts, keys (CBF keys
are ordinals) continuing from part to part, every part's streams checked against the first's.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from recordkit.engine.chunk import ChunkData
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.errors import FormatError
from recordkit.formats.closing import ClosingReader
from recordkit.formats.directories import part_paths
from recordkit.storage import location

if TYPE_CHECKING:
    from recordkit.engine.streams import StreamSpec

def cbf_part_paths(path, storage_options=None) -> list[str]:
    """The numbered ``*.cbf`` parts of a directory in part order (hidden files, e.g. temporaries,
    skipped); any other directory is not one data set (``formats/directories.py``)."""
    return part_paths(path, (".cbf",), storage_options)


def open_cbf_data_set(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, **options):
    """A ``CBFReader`` for a file, ``CBFParts`` for a directory of parts."""
    from recordkit.formats.cbf import CBFReader
    from recordkit.storage.range_cache import settings
    path = path if isinstance(path, str) else os.fspath(path)
    offline = settings(cache_dir)[1]  # a file, as the cache recorded it: asking the store is not allowed
    if not offline and location.isdir(path, storage_options):
        return CBFParts(path, streams, precision=precision, storage_options=storage_options, cache_dir=cache_dir,
                        **options)
    return CBFReader(path, streams, precision=precision, storage_options=storage_options, cache_dir=cache_dir,
                     **options)


class CBFParts(DeserializerBase, ClosingReader):
    """The CBF parts of directory ``path`` as one Deserializer (same options as ``CBFReader``)."""

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec] | dict[str, str] | None = None, *,
                 precision: str | None = None, storage_options: dict | None = None, cache_dir: str | None = None,
                 **options: Any) -> None:
        from recordkit.formats.cbf import CBFReader
        self.path = path if isinstance(path, str) else os.fspath(path)
        self.paths = cbf_part_paths(self.path, storage_options)
        self.parts = []
        try:
            for p in self.paths:
                self.parts.append(CBFReader(p, streams, precision=precision, storage_options=storage_options,
                                            cache_dir=cache_dir, **options))
        except BaseException:
            self.close()
            raise
        first = self.parts[0]
        want = [(s.name, s.format, s.dim, str(s.dtype)) for s in first.streams]
        for p, r in zip(self.paths[1:], self.parts[1:]):
            got = [(s.name, s.format, s.dim, str(s.dtype)) for s in r.streams]
            if got != want:
                raise FormatError(p, f"this part's streams {got} differ from those of {self.paths[0]} {want}: "
                                     f"not parts of one data set", offset=0)
        self._where = []  # (part index, chunk id within the part)
        self._chunks = []
        self._first_key = []
        base = 0
        for k, r in enumerate(self.parts):
            for info in r.chunks:
                self._chunks.append(ChunkInfo(len(self._chunks), info.num_sequences, info.num_samples,
                                              info.offset, info.size))
                self._where.append((k, info.id))
            self._first_key.append(base)
            base += r.num_sequences
        self.num_sequences = base

    @property
    def streams(self):
        return self.parts[0].streams

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    @property
    def dtype(self):
        return self.parts[0].dtype

    def load_chunk(self, chunk_id: int) -> ChunkData:
        k, local = self._where[chunk_id]
        chunk = self.parts[k].load_chunk(local)
        return ChunkData(chunk_id, chunk.keys + np.uint64(self._first_key[k]), chunk.lengths, chunk.columns,
                         chunk.positions)

    def sequence_lengths(self, chunk_id: int) -> np.ndarray:
        k, local = self._where[chunk_id]
        return self.parts[k].sequence_lengths(local)

    def sequence_location(self, chunk_id: int, i: int, sample: int | None = None) -> str:
        """Where sequence ``i`` of a chunk is: part file, chunk of the part, byte offset (what ``verify`` prints)."""
        k, local = self._where[chunk_id]
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.paths[k]}: chunk {local} at byte offset {self._chunks[chunk_id].offset}, sequence {i} of the " \
               f"chunk{sam}"

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        k, local = self._where[chunk_id]
        return self.parts[k].sequence_keys(local) + np.uint64(self._first_key[k])


    def close(self) -> None:
        for r in getattr(self, "parts", []):
            r.close()
