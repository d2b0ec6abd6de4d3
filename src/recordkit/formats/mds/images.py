"""The encoded images of an MDS (MosaicML Streaming) data set, for :class:`recordkit.images.ImageStage`:
a ``jpeg``, ``png`` or ``bytes`` column of every sample, shard by shard, with the shard and sample."""
from __future__ import annotations

from typing import Iterator

from recordkit.errors import FormatError
from recordkit.formats.mds.index import read_index
from recordkit.formats.mds.reader import column_spans, sample_table
from recordkit.formats.sharding import read_whole

#: Column encodings whose bytes are an encoded image (``pil`` is raw pixels, not one).
IMAGE_ENCODINGS = ("jpeg", "png", "bytes")


def encoded_images(path, column: str, *, storage_options=None,
                   cache_dir=None) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (shard, "sample k"))`` per sample; ``index.json`` and every shard's sample table are
    checked as the MDS reader checks them; a missing column or one of another encoding is a located
    ``FormatError``."""
    index = read_index(str(path), storage_options, cache_dir)
    for i, shard in enumerate(index.shards):
        names = [c for c, _, _ in shard.columns]
        if column not in names:
            raise FormatError(index.path, f"shards[{i}].column_names: shard {shard.name} has no column {column!r} "
                                          f"(columns: {', '.join(names)})")
        j = names.index(column)
        if shard.columns[j][1] not in IMAGE_ENCODINGS:
            raise FormatError(index.path, f"shards[{i}].column_encodings[{j}]: column {column!r} is encoded "
                                          f"{shard.columns[j][1]!r}, the image stage needs one of "
                                          f"{', '.join(IMAGE_ENCODINGS)}")
        data = read_whole(shard.path, storage_options=storage_options, cache_dir=cache_dir)
        offs = sample_table(data, shard.path, shard.samples, shard.nbytes)
        view = memoryview(data)
        for k in range(shard.samples):
            pos, size = column_spans(data, offs, shard.columns, k, shard.path)[j]
            yield bytes(view[pos:pos + size]), (shard.path, f"sample {k}")
