"""LanceDeserializer: a Lance data set as a chunked Deserializer, with random access by ``take``.

A chunk is a fragment (a data file of the set), split into row ranges of about ``chunk_size``
bytes when a fragment is larger (the bytes of a row estimated from the fragment's file sizes).
Streams come from the schema metadata recordkit writes (``recordkit.streams``, as for Parquet);
a data set written by other tools is read with declared streams (``--stream``) or, without,
with the streams its column types imply (``formats/arrow_layouts.py``). Keys are the ``key`` column where the
data has one, else the row's position in the data set.

``take_sequences(rows)`` decodes just the rows asked for (Lance's ``take``): what the random
access source (``integrations/random_access.py``) uses instead of decoding a whole chunk per item.
"""
from __future__ import annotations

import json
import os

import numpy as np

os.environ.setdefault("LANCE_LOG", "error")  # Lance logs warnings (a new data set...) to stderr by default
import lance  # noqa: E402
import pyarrow as pa  # noqa: E402

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase  # noqa: E402
from recordkit.errors import FormatError  # noqa: E402
from recordkit.formats.arrow_layouts import PROBE_ROWS  # noqa: E402
from recordkit.formats.closing import ClosingReader  # noqa: E402
from recordkit.formats.parquet.arrow import KEY, batch_to_chunk, select_streams, to_numpy  # noqa: E402
from recordkit.storage import location  # noqa: E402

META_SAMPLES = b"recordkit.fragment_samples"


def lance_error(path, e: Exception, where: str | None = None) -> FormatError:
    """A Lance/Arrow failure as a located FormatError (the first line of Lance's message)."""
    msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return FormatError(path, f"cannot read the Lance data set: {msg}", record=where)


def open_dataset(path: str):
    if not location.is_url(path) and not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such directory (a Lance data set is a directory)")
    try:
        return lance.dataset(path if location.is_url(path) else location.local_path(path))
    except (ValueError, OSError, pa.ArrowException) as e:
        if isinstance(e, (FileNotFoundError, PermissionError)):
            raise
        raise lance_error(path, e) from None


class LanceDeserializer(DeserializerBase, ClosingReader):
    """Read a Lance data set. ``streams``: None for the recorded (or implied) streams; else
    StreamSpecs selecting columns by alias. ``precision``: None keeps the data's type."""

    keeps_aliases = True

    def __init__(self, path, streams=None, *, precision=None, chunk_size: int = DEFAULT_CHUNK_SIZE, **_):
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._ds = open_dataset(self.path)
        schema = self._ds.schema
        self._selected = select_streams(schema, self.path, streams, precision, probe=self._probe)
        self.keys_are_ids = KEY in schema.names
        self._columns = [c for c, _ in self._selected] + ([KEY] if self.keys_are_ids else [])
        self._chunks, self._where = [], []
        self._describe(int(chunk_size), (schema.metadata or {}).get(META_SAMPLES))

    def _describe(self, chunk_size: int, recorded) -> None:
        """The chunk table: fragments, cut into row ranges of about ``chunk_size`` bytes."""
        try:
            fragments = self._ds.get_fragments()
            samples = json.loads(recorded) if recorded else None
        except (ValueError, OSError) as e:
            raise lance_error(self.path, e) from None
        if not (isinstance(samples, list) and len(samples) == len(fragments)):
            samples = None
        first = 0
        self.paths = []  # the data files (what validation checks against checksum sidecars, if any)
        for i, frag in enumerate(fragments):
            rows = frag.count_rows()
            meta = frag.metadata
            files = meta.files if hasattr(meta, "files") else meta.data_files()
            nbytes = sum(int(getattr(d, "file_size_bytes", 0) or 0) for d in files)
            self.paths += [location.join(location.join(self.path, "data"), d.path) for d in files]
            step = rows if nbytes <= chunk_size or rows == 0 else max(1, rows * chunk_size // nbytes)
            for a in range(0, max(rows, 1), max(step, 1)):
                n = min(step, rows - a)
                whole = n == rows
                s = int(samples[i]) if samples is not None and whole else n
                self._chunks.append(ChunkInfo(len(self._chunks), n, s, 0, nbytes * n // max(rows, 1)))
                self._where.append((frag, a, first + a))
            first += rows

    def _probe(self, columns):
        """The first rows of ``columns`` (what tells the dim of a list column)."""
        try:
            return self._ds.head(PROBE_ROWS, columns=columns)
        except (ValueError, OSError, pa.ArrowException) as e:
            raise lance_error(self.path, e, "the first rows") from None

    @property
    def streams(self):
        return [s for _, s in self._selected]

    @property
    def num_sequences(self) -> int:
        return sum(c.num_sequences for c in self._chunks)

    def _decode(self, table, where: str, chunk_id: int, first_key: int):
        return batch_to_chunk(table if table.num_rows else None, self._selected, path=self.path, where=where,
                              chunk_id=chunk_id, first_key=first_key)

    def load_chunk(self, chunk_id: int, **_):
        frag, a, first = self._where[chunk_id]
        n = self._chunks[chunk_id].num_sequences
        where = f"fragment {frag.fragment_id} rows {a}..{a + n - 1}"
        try:
            table = frag.to_table(columns=self._columns, offset=a, limit=n)
        except (ValueError, OSError, pa.ArrowException) as e:
            raise lance_error(self.path, e, where) from None
        chunk = self._decode(table, where, chunk_id, first)
        if len(chunk) != n:
            raise FormatError(self.path, f"{where}: decoded {len(chunk)} rows, the fragment holds {n}", record=where)
        return chunk

    def take_sequences(self, rows) -> "object":
        """The sequences at ``rows`` (positions in the data set) as one ChunkData (chunk id -1),
        decoded by Lance's ``take``: only those rows are read."""
        rows = np.asarray(rows, dtype=np.int64)
        where = f"rows {rows[:3].tolist()}{'...' if len(rows) > 3 else ''}"
        try:
            table = self._ds.take(rows, columns=self._columns)
        except (ValueError, OSError, IndexError, pa.ArrowException) as e:
            raise lance_error(self.path, e, where) from None
        chunk = self._decode(table, where, -1, 0)
        if not self.keys_are_ids:
            chunk.keys = rows.astype(np.uint64)
        return chunk

    def sequence_location(self, chunk_id: int, i: int, sample: int | None = None) -> str:
        """Where sequence ``i`` of a chunk is: fragment, row (what ``verify`` prints)."""
        frag, a, first = self._where[chunk_id]
        sam = f", sample {sample}" if sample is not None else ""
        return f"{self.path}: fragment {frag.fragment_id}, row {a + i} of the fragment (row {first + i} of the " \
               f"data set{sam})"

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        frag, a, first = self._where[chunk_id]
        n = self._chunks[chunk_id].num_sequences
        if not self.keys_are_ids:
            return np.arange(first, first + n, dtype=np.uint64)
        try:
            table = frag.to_table(columns=[KEY], offset=a, limit=n)
        except (ValueError, OSError, pa.ArrowException) as e:
            raise lance_error(self.path, e, f"fragment {frag.fragment_id}") from None
        return np.concatenate([to_numpy(c) for c in table.column(0).chunks] or [np.zeros(0, np.uint64)]
                              ).astype(np.uint64)

    def close(self) -> None:
        self._ds = None
