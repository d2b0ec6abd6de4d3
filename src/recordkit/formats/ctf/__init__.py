"""CNTK text format (CTF): reader, writer and index."""
from recordkit.formats.ctf.reader import CTFReader
from recordkit.formats.ctf.writer import CTFWriter, write_ctf

__all__ = ["CTFReader", "CTFWriter", "write_ctf"]
