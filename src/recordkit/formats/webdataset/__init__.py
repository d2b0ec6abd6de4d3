"""WebDataset: a directory of ``shard-NNNNNN.tar`` files, one sample per sequence (see writer.py)."""
from recordkit.formats.webdataset.reader import WebDatasetReader, looks_like
from recordkit.formats.webdataset.writer import WebDatasetWriter

__all__ = ["WebDatasetReader", "WebDatasetWriter", "looks_like"]
