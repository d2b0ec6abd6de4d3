"""Apache Parquet (``pip install 'recordkit[parquet]'``): the stream mapping in Arrow columns
(``arrow.py``), ``ParquetWriter`` (one file or a directory of parts) and ``ParquetDeserializer``."""
from recordkit.formats.parquet.reader import ParquetDeserializer
from recordkit.formats.parquet.writer import ParquetWriter

__all__ = ["ParquetDeserializer", "ParquetWriter"]
