"""The encoded images of Parquet files, for :class:`recordkit.images.ImageStage`: a binary column, or
a Hugging Face ``Image`` column (a struct whose ``bytes`` field holds the encoded image, as the Hub
stores image data sets in Parquet), with the file and row of each. :func:`column_images` is shared
with the Hugging Face ``save_to_disk`` source (the same Arrow columns in Arrow IPC files)."""
from __future__ import annotations

from typing import Iterable, Iterator

from recordkit.errors import FormatError
from recordkit.formats.parquet.reader import _open_file, arrow_error, parquet_part_paths


def column_images(path: str, schema, column: str, batches: Iterable) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (path, "row i"))`` of ``column`` over Arrow record ``batches`` of one file whose schema
    is ``schema``: a binary column or a struct with a ``bytes`` field; anything else, or a null
    image, is a located ``FormatError``."""
    import pyarrow as pa
    if column not in schema.names:
        raise FormatError(path, f"no column {column!r} (columns: {', '.join(schema.names)})")
    kind = schema.field(column).type
    image_struct = pa.types.is_struct(kind) and kind.get_field_index("bytes") >= 0
    if not (image_struct or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)):
        raise FormatError(path, f"column {column!r} is {kind}, the image stage needs binary data "
                                "(or an Image struct with a 'bytes' field)")
    row = 0
    for batch in batches:
        values = batch.column(batch.schema.get_field_index(column))
        if image_struct:
            values = values.field("bytes")
        for v in values.to_pylist():
            if v is None:
                raise FormatError(path, f"column {column!r} has no image bytes", record=f"row {row}")
            yield v, (path, f"row {row}")
            row += 1


def encoded_images(path, column: str, *, batch_rows: int = 256, storage_options=None,
                   cache_dir=None) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (file, "row i"))`` per row, file by file (a directory's ``*.parquet`` files in part
    order), read ``batch_rows`` rows at a time; errors as :func:`column_images`."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from recordkit.storage.pool import SourcePool
    files = SourcePool(None, storage_options=storage_options, cache_dir=cache_dir)  # remote files opened once
    try:
        for part in parquet_part_paths(path, storage_options):
            try:
                pf = pq.ParquetFile(_open_file(part, files))
                schema = pf.schema_arrow
                batches = pf.iter_batches(batch_size=batch_rows, columns=[column]) if column in schema.names else ()
                yield from column_images(part, schema, column, batches)
            except (OSError, pa.ArrowException) as e:
                raise arrow_error(part, e) from None
    finally:
        files.close()
