"""The encoded images of TFRecord files, for :class:`recordkit.images.ImageStage`: one bytes feature
(``image/encoded`` by convention) of every ``tf.train.Example``, with its file and record."""
from __future__ import annotations

from typing import Iterator

from recordkit.errors import FormatError
from recordkit.formats.sharding import read_whole
from recordkit.formats.tfrecord import framing
from recordkit.formats.tfrecord.reader import part_paths


def encoded_images(path, feature: str = "image/encoded", *, verify_crc: bool = True, storage_options=None,
                   cache_dir=None) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (file, "record i"))`` per record, file by file (a directory's ``.tfrecord`` files in
    name order). Framing and CRCs are checked as the TFRecord reader checks them; a record that is
    not an Example, or whose ``feature`` is missing or not one bytes value, is a located
    ``FormatError``."""
    from recordkit.formats.tfrecord.schema import Example
    for part in part_paths(path, storage_options):
        data = read_whole(part, storage_options=storage_options, cache_dir=cache_dir)
        offs, lens = framing.scan(data, part, verify=verify_crc)
        view = memoryview(data)
        for k, (o, n) in enumerate(zip(offs.tolist(), lens.tolist())):
            where = dict(offset=o - 12, record=f"record {k}")
            msg = Example()
            try:
                msg.ParseFromString(view[o:o + n])
            except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
                raise FormatError(part, f"record is not a tf.train.Example: {e}", **where) from None
            if feature not in msg.features.feature:
                raise FormatError(part, f"feature {feature!r} is missing", **where)
            f = msg.features.feature[feature]
            if f.WhichOneof("kind") != "bytes_list" or len(f.bytes_list.value) != 1:
                raise FormatError(part, f"feature {feature!r} must be one bytes value for the image stage", **where)
            yield f.bytes_list.value[0], (part, f"record {k}")
