"""Every reader recordkit has, in one place: each is a Deserializer (``streams``, ``chunks``,
``load_chunk``) that ``MinibatchSource``, the PyTorch and Grain adapters and ``convert`` take.

``recordkit.open(path)`` picks the right one for a path; import a class from here to pass it
options of its own.

    from recordkit.readers import CBFReader
    with CBFReader("train.cbf") as reader:
        print(reader.streams, len(reader.chunks))
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from recordkit._lazy import resolver

if TYPE_CHECKING:
    from recordkit.formats.cbf.parts import CBFParts
    from recordkit.formats.cbf.reader import CBFReader
    from recordkit.formats.ctf.reader import CTFReader
    from recordkit.formats.hf.reader import HFDeserializer
    from recordkit.formats.mds.reader import MDSReader
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    from recordkit.formats.ofrecord.reader import OFRecordReader
    from recordkit.formats.parquet.reader import ParquetDeserializer
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
    from recordkit.formats.tfrecord.reader import TFRecordReader
    from recordkit.formats.webdataset.reader import WebDatasetReader

_SOURCES = {
    "CTFReader": "recordkit.formats.ctf.reader",
    "CBFReader": "recordkit.formats.cbf.reader",
    "CBFParts": "recordkit.formats.cbf.parts",
    "OFRecordDeserializer": "recordkit.formats.ofrecord.deserializer",
    "OFRecordReader": "recordkit.formats.ofrecord.reader",
    "ParquetDeserializer": "recordkit.formats.parquet.reader",
    "HFDeserializer": "recordkit.formats.hf.reader",
    "WebDatasetReader": "recordkit.formats.webdataset.reader",
    "TFRecordReader": "recordkit.formats.tfrecord.reader",
    "MDSReader": "recordkit.formats.mds.reader",
    "SingaRecordDeserializer": "recordkit.formats.singa.deserializer",
    "SingaCSVDeserializer": "recordkit.formats.singa.deserializer",
}

__all__ = sorted(_SOURCES)
__getattr__ = resolver(__name__, _SOURCES)
