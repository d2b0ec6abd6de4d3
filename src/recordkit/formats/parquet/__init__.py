"""Apache Parquet (``pip install 'recordkit[parquet]'``): the stream mapping in Arrow columns
(``arrow.py``), ``ParquetWriter`` (one file or a directory of parts) and ``ParquetDeserializer``.

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"ParquetDeserializer": "recordkit.formats.parquet.reader", "ParquetWriter": "recordkit.formats.parquet.writer"}
__all__ = ["ParquetDeserializer", "ParquetWriter"]
__getattr__ = resolver(__name__, _SOURCES)
