"""Every writer recordkit has, in one place. Each writes aside and publishes on ``close()``
(a file renamed, a directory swapped in whole): a failed or interrupted write leaves the old
target as it was. ``recordkit.convert`` picks the right one for ``to=``; import a class from here
to write chunks or records of your own.

    from recordkit import StreamSpec
    from recordkit.writers import CTFWriter
    with CTFWriter("out.ctf", [StreamSpec("x", "dense", 3)]) as w:
        w.write({"x": [[1.0, 2.0, 3.0]]}, key=0)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from recordkit._lazy import resolver

if TYPE_CHECKING:
    from recordkit.formats.cbf.writer import CBFWriter
    from recordkit.formats.ctf.writer import CTFWriter, write_ctf
    from recordkit.formats.hf.writer import HFWriter
    from recordkit.formats.mds.writer import MDSWriter
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    from recordkit.formats.parquet.writer import ParquetWriter
    from recordkit.formats.singa.deserializer import SingaRecordWriter
    from recordkit.formats.tfrecord.writer import TFRecordWriter
    from recordkit.formats.webdataset.writer import WebDatasetWriter

_SOURCES = {
    "CTFWriter": "recordkit.formats.ctf.writer",
    "write_ctf": "recordkit.formats.ctf.writer",
    "CBFWriter": "recordkit.formats.cbf.writer",
    "OFRecordWriter": "recordkit.formats.ofrecord.writer",
    "ParquetWriter": "recordkit.formats.parquet.writer",
    "HFWriter": "recordkit.formats.hf.writer",
    "WebDatasetWriter": "recordkit.formats.webdataset.writer",
    "TFRecordWriter": "recordkit.formats.tfrecord.writer",
    "MDSWriter": "recordkit.formats.mds.writer",
    "SingaRecordWriter": "recordkit.formats.singa.deserializer",
}

__all__ = sorted(_SOURCES)
__getattr__ = resolver(__name__, _SOURCES)
