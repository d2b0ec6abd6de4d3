"""MosaicML Streaming (MDS): ``index.json`` + ``shard.NNNNN.mds`` (see writer.py)."""
from recordkit.formats.mds.reader import MDSReader, looks_like
from recordkit.formats.mds.writer import MDSWriter

__all__ = ["MDSReader", "MDSWriter", "looks_like"]
