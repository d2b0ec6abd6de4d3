"""MosaicML Streaming (MDS): ``index.json`` + ``shard.NNNNN.mds`` (see writer.py).

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"MDSReader": "recordkit.formats.mds.reader", "looks_like": "recordkit.formats.mds.reader", "MDSWriter": "recordkit.formats.mds.writer"}
__all__ = ["MDSReader", "looks_like", "MDSWriter"]
__getattr__ = resolver(__name__, _SOURCES)
