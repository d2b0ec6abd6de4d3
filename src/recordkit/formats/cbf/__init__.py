"""CNTK binary format (CBF): reader, writer, header layout.

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"CBFReader": "recordkit.formats.cbf.reader", "CBFWriter": "recordkit.formats.cbf.writer"}
__all__ = ["CBFReader", "CBFWriter"]
__getattr__ = resolver(__name__, _SOURCES)
