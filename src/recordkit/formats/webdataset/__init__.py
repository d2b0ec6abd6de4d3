"""WebDataset: a directory of ``shard-NNNNNN.tar`` files, one sample per sequence (see writer.py).

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"WebDatasetReader": "recordkit.formats.webdataset.reader", "looks_like": "recordkit.formats.webdataset.reader", "WebDatasetWriter": "recordkit.formats.webdataset.writer"}
__all__ = ["WebDatasetReader", "looks_like", "WebDatasetWriter"]
__getattr__ = resolver(__name__, _SOURCES)
