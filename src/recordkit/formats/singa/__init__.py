"""Apache SINGA data stores: KVFile (0.x), BinFile (1.x+), TextFile, CSV records.

``open(path, mode="read", store=None)`` gives a ``Store`` with SINGA's operations
(``read``/``write``/``flush``/``close``/``seek_to_first`` and the CamelCase aliases);
paths are local or fsspec URLs. See ``base`` for the error and atomic-write policy.
"""
from __future__ import annotations

from recordkit.formats.singa.base import Mode, Store
from recordkit.formats.singa.binfile import BinFileStore
from recordkit.formats.singa.csvfile import format_csv_record, parse_csv_record, read_csv_records
from recordkit.formats.singa.kvfile import KVFileStore
from recordkit.formats.singa.sniff import sniff_store
from recordkit.formats.singa.store import STORES, CreateStore, Open, open, store_class
from recordkit.formats.singa.textfile import TextFileStore

__all__ = ["Mode", "Store", "KVFileStore", "BinFileStore", "TextFileStore", "STORES", "open", "Open",
           "CreateStore", "store_class", "sniff_store", "parse_csv_record", "format_csv_record", "read_csv_records"]
