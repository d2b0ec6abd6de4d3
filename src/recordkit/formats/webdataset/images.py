"""The encoded images of a WebDataset, for :class:`recordkit.images.ImageStage`: every member whose
extension is one of the image extensions asked for, with its shard and member name."""
from __future__ import annotations

from typing import Iterator, Sequence

from recordkit.formats.sharding import read_whole
from recordkit.formats.webdataset import tar
from recordkit.formats.webdataset.reader import shard_paths

#: Members read as images unless told otherwise.
IMAGE_EXTENSIONS = ("jpg", "jpeg", "png")


def encoded_images(path, extensions: str | Sequence[str] = IMAGE_EXTENSIONS, *, storage_options=None,
                   cache_dir=None) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (shard path, "member NAME"))`` per image member, shard by shard in order.
    ``extensions``: a sequence, or one string of comma-separated extensions (``"jpg,png"``). The
    extension is the part of the member's name after its last dot, compared without case; a shard
    that is not a well-formed tar (bad checksum, truncated member) is a located ``FormatError``."""
    if isinstance(extensions, str):
        extensions = extensions.split(",")
    wanted = {e.strip().lower().lstrip(".").encode() for e in extensions}
    for shard in shard_paths(path, storage_options):
        data = read_whole(shard, storage_options=storage_options, cache_dir=cache_dir)
        names, offs, sizes, _ = tar.scan(data, shard)
        view = memoryview(data)
        for name, off, size in zip(names, offs, sizes):
            if name.rpartition(b".")[2].lower() in wanted:
                yield bytes(view[int(off):int(off) + int(size)]), (shard, f"member {name.decode(errors='replace')}")
