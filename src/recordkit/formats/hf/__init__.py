"""Hugging Face ``datasets`` directories (``pip install 'recordkit[hf]'``): ``HFWriter`` writes what
``datasets.load_from_disk`` opens, ``HFDeserializer`` reads it back (the Parquet mapping's columns)."""
from recordkit.formats.hf.reader import HFDeserializer
from recordkit.formats.hf.writer import HFWriter

__all__ = ["HFDeserializer", "HFWriter"]
