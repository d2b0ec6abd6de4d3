"""CNTK binary format (CBF): reader, writer, header layout."""
from recordkit.formats.cbf.reader import CBFReader
from recordkit.formats.cbf.writer import CBFWriter

__all__ = ["CBFReader", "CBFWriter"]
