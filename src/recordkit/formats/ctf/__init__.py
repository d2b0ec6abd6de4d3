"""CNTK text format (CTF): reader, writer and index.

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"CTFReader": "recordkit.formats.ctf.reader", "CTFWriter": "recordkit.formats.ctf.writer", "write_ctf": "recordkit.formats.ctf.writer"}
__all__ = ["CTFReader", "CTFWriter", "write_ctf"]
__getattr__ = resolver(__name__, _SOURCES)
