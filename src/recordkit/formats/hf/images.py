"""The encoded images of a Hugging Face ``save_to_disk`` directory, for
:class:`recordkit.images.ImageStage`: an ``Image`` column (or a binary one) of every row of the data
files ``state.json`` lists, in order, with the file and row of each."""
from __future__ import annotations

from typing import Iterator

from recordkit.formats.hf.description import data_files
from recordkit.formats.hf.reader import _read, open_stream
from recordkit.formats.parquet.images import column_images
from recordkit.storage import location


def encoded_images(path, column: str, *, storage_options=None,
                   cache_dir=None) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (data file, "row i"))`` per row; ``state.json`` is checked as the HF reader checks
    it (files inside the directory, all present); column errors as
    :func:`recordkit.formats.parquet.images.column_images`."""
    path = str(path)
    state_path = location.join(path, "state.json")
    for p in data_files(path, state_path, _read(state_path, storage_options), storage_options):
        _buffer, batches, schema = open_stream(p, storage_options)
        yield from column_images(p, schema, column, batches)
