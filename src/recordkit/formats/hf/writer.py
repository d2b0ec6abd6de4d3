"""HFWriter: sequences out as a Hugging Face ``datasets`` directory (``Dataset.save_to_disk``'s layout).

``datasets.load_from_disk(OUT)`` opens what this writes: ``data-NNNNN-of-NNNNN.arrow`` (Arrow IPC
streams, the columns of the Parquet mapping, ``formats/parquet/arrow.py``), ``state.json`` (the
files in order) and ``dataset_info.json`` (the features, and under ``recordkit`` the stream
declarations, which ``datasets`` ignores and recordkit reads back). The files are written
without importing ``datasets`` when it is absent (the features JSON is then built here in the
form of datasets 4+); with ``datasets`` installed its own ``Features`` serialization is used,
so the installed version reads them. The directory is written aside and put in place whole.
"""
from __future__ import annotations

import json
import os
import uuid
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from recordkit.formats.sharding import ShardCutter, sequence_bytes
from recordkit.storage.atomic import AtomicFile
from recordkit.engine.streams import check_streams, resolve_precision, streams_to_json
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.parquet.arrow import chunk_to_batch, schema_for, sequence_runs

if TYPE_CHECKING:
    from recordkit.engine.chunk import ChunkData
    from recordkit.engine.streams import StreamSpec

INFO_KEY = "recordkit"


def data_file_name(i: int, n: int) -> str:
    return f"data-{i:05d}-of-{n:05d}.arrow"


def _feature(t: pa.DataType) -> dict:
    """A ``datasets`` feature dict for an Arrow type of the mapping (datasets 4+ form)."""
    if pa.types.is_fixed_size_list(t):
        return {"feature": _feature(t.value_type), "length": t.list_size, "_type": "List"}
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return {"feature": _feature(t.value_type), "_type": "List"}
    if pa.types.is_struct(t):
        return {t.field(i).name: _feature(t.field(i).type) for i in range(t.num_fields)}
    return {"dtype": {"double": "float64", "float": "float32", "halffloat": "float16"}.get(str(t), str(t)),
            "_type": "Value"}


def features_json(schema: pa.Schema) -> dict:
    try:
        from datasets import Features
    except ImportError:
        return {f.name: _feature(f.type) for f in schema}
    return Features.from_arrow_schema(schema.remove_metadata()).to_dict()


def _is_data_file(name: str) -> bool:
    import re
    return re.fullmatch(r"data-\d+-of-\d+\.arrow(\.rkcrc)?|state\.json|dataset_info\.json", name) is not None


class HFWriter(AtomicWriter):
    """Write a ``save_to_disk`` directory. ``parts=N``: N data files of consecutive sequences
    (needs ``total_sequences``); ``shard_size=S``: a new file after S bytes of data (as the shard
    formats count: ``formats/sharding.ShardCutter``). Default one file."""

    def __init__(self, path: str | os.PathLike[str], streams: Sequence[StreamSpec], *, parts: int | None = None,
                 shard_size: int | None = None, precision: str = "float", checksums: bool = False,
                 storage_options: dict | None = None, total_sequences: int | None = None, **_: Any) -> None:
        from recordkit.storage.staged_directory import StagedDirectory
        self.path = path if isinstance(path, str) else os.fspath(path)
        self._streams = check_streams(streams)
        self.dtype = resolve_precision(precision)
        self.precision = "double" if self.dtype == np.float64 else "float"
        self.checksums = bool(checksums)
        self.storage_options = storage_options
        base = schema_for(self._streams, self.precision)
        feats = features_json(base)
        self.features = feats
        meta = dict(base.metadata)
        meta[b"huggingface"] = json.dumps({"info": {"features": feats}}).encode()
        self.schema = base.with_metadata(meta)
        if shard_size is None and parts is not None and int(parts) > 1 and total_sequences is None:
            raise ValueError("parts=N needs total_sequences to balance the parts (or give shard_size)")
        # where data files end (formats/sharding.py): balanced parts, or shard_size data bytes each
        self._cutter = ShardCutter(parts=parts or (1 if shard_size is None else None), shard_size=shard_size,
                                   total=total_sequences)
        self._nparts = int(parts or 1) if shard_size is None else 1
        from recordkit.storage import location
        if self.checksums and location.is_url(self.path):
            raise ValueError("checksum sidecars for a Hugging Face directory are written for local outputs only")
        self._dir = StagedDirectory(self.path, _is_data_file, storage_options=storage_options, what="Hugging Face dataset")
        self.sequences_written = 0
        self._part = -1
        self._parts: list[tuple[str, AtomicFile]] = []  # (staged name, file) in order; names fixed at close
        self._file = None
        self._writer = None

    @property
    def streams(self):
        return list(self._streams)

    def _open(self, k: int) -> None:
        self._close_part()
        self._part = k
        # the final name needs the number of files, known only at the end for shard_size: stage under
        # a provisional name, rename within the staging directory at close
        name = f"data-{k:05d}.arrow.tmp"
        self._file = AtomicFile(self._dir.path(name), storage_options=self.storage_options)
        self._writer = pa.ipc.new_stream(self._file.file, self.schema)
        self._parts.append((name, self._file))

    def _close_part(self) -> None:
        if self._writer is None:
            return
        self._writer.close()
        self._writer = None
        self._file.commit()
        self._file = None

    def write_chunk(self, chunk: ChunkData) -> None:
        n = len(chunk)
        if n == 0:
            return
        runs = sequence_runs(chunk, self._streams)
        for k, a, b in self._cutter.assign(sequence_bytes(chunk, self._streams, self.dtype.itemsize)):
            if k != self._part:
                self._open(k)
            for x, y in runs:
                x, y = max(x, a), min(y, b)
                if x < y:
                    self._writer.write_batch(chunk_to_batch(chunk, self._streams, self.schema, self.dtype, x, y))
            self.sequences_written += b - a

    def close(self) -> None:
        try:
            wanted = self._nparts
            while self._part + 1 < wanted:
                self._open(self._part + 1)
            self._close_part()
            names = self._finish_names()
            self._write_json("state.json", {
                "_data_files": [{"filename": n} for n in names], "_fingerprint": uuid.uuid4().hex[:16],
                "_format_columns": None, "_format_kwargs": {}, "_format_type": None,
                "_output_all_columns": False, "_split": None})
            self._write_json("dataset_info.json", {
                "citation": "", "description": "", "features": self.features, "homepage": "", "license": "",
                INFO_KEY: {"streams": streams_to_json(self._streams, self.precision),
                           "sequences": self.sequences_written}})
            self._dir.commit()
        except BaseException:
            self.abort()
            raise

    def _finish_names(self) -> list[str]:
        """Give the staged files their ``data-i-of-n`` names (now that n is known)."""
        from recordkit.storage import location
        n = len(self._parts)
        names = []
        for i, (tmp, f) in enumerate(self._parts):
            final = data_file_name(i, n)
            src, dst = self._dir.path(tmp), self._dir.path(final)
            self._dir.written.remove(tmp)
            location.move(src, dst, self.storage_options)
            if self.checksums:
                from recordkit.storage import checksum
                from recordkit.storage.atomic import write_sidecar
                write_sidecar(dst, checksum.compute_local(dst))
            names.append(final)
        return names

    def _write_json(self, name: str, value) -> None:
        with AtomicFile(self._dir.path(name), storage_options=self.storage_options,
                        checksums=self.checksums) as out:
            out.write(json.dumps(value, indent=2).encode("utf-8"))

    def abort(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001
                pass
            self._writer = None
        for _, f in self._parts:
            f.discard()
        self._dir.abort()
