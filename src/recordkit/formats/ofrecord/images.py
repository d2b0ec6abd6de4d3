"""The encoded images of an OFRecord data set, for :class:`recordkit.images.ImageStage`: the single
bytes value of one feature of every record, with where it came from."""
from __future__ import annotations

from typing import Iterator

from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.decoders import _feature, _single_bytes
from recordkit.formats.ofrecord.reader import OFRecordReader


def encoded_images(ofrecord_dir, feature: str, **reader_options) -> Iterator[tuple[bytes, tuple[str, str]]]:
    """``(bytes, (part path, "record i"))`` per record, in the reader's order; ``reader_options`` go to
    :class:`~recordkit.formats.ofrecord.reader.OFRecordReader` (one epoch unless ``epochs`` says
    otherwise; ``random_shuffle``, ``rank``/``world_size``, ``max_errors`` as there). A record without
    the feature, or whose feature is not one bytes value, is a located ``FormatError``."""
    reader_options.setdefault("epochs", 1)
    reader = OFRecordReader(ofrecord_dir, **reader_options)
    try:
        for payload, (path, i, offset) in reader.frames():
            record = codec.decode(payload, path=path, offset=offset, index=i)
            loc = (path, i)
            yield _single_bytes(_feature(record, feature, loc), feature, loc, "image stage"), (path, f"record {i}")
    finally:
        reader.close()
