"""Hugging Face ``datasets`` directories (``pip install 'recordkit[hf]'``): ``HFWriter`` writes what
``datasets.load_from_disk`` opens, ``HFDeserializer`` reads it back (the Parquet mapping's columns).

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"HFDeserializer": "recordkit.formats.hf.reader", "HFWriter": "recordkit.formats.hf.writer"}
__all__ = ["HFDeserializer", "HFWriter"]
__getattr__ = resolver(__name__, _SOURCES)
