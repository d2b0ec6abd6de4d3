"""Opening a SINGA store by backend name (``CreateStore``/``OpenStore``) or by its content.

``open(path, mode="read", store=None)``: ``store`` is SINGA's backend string
(``"kvfile"``, ``"binfile"``, ``"textfile"``); without it the kind is sniffed from the
content (read and append only - a new file has none). SINGA's other backend names exist
but are not provided: ``"lmdb"``/``"imagefolder"`` were never implemented in SINGA 0.x
and ``"hdfsfile"`` needs an HDFS cluster (its framing differs).
"""
from __future__ import annotations

from recordkit.errors import FormatError, UsageError
from recordkit.formats.singa.base import Mode, normalize_mode
from recordkit.formats.singa.binfile import BinFileStore
from recordkit.formats.singa.kvfile import KVFileStore
from recordkit.formats.singa.sniff import sniff_store
from recordkit.formats.singa.textfile import TextFileStore

STORES = {"kvfile": KVFileStore, "binfile": BinFileStore, "textfile": TextFileStore}
_NOT_PROVIDED = {"lmdb", "imagefolder", "hdfsfile", "hdfs"}


def store_class(backend: str):
    """SINGA's ``CreateStore(backend)``: the Store class for an exact backend name."""
    try:
        return STORES[backend]
    except KeyError:
        why = "is not supported by recordkit" if backend in _NOT_PROVIDED else "is unknown"
        raise UsageError(f"store backend {backend!r} {why}; use one of {', '.join(STORES)}") from None


def open(path, mode="read", store: str | None = None, *, tolerant: bool = False, storage_options=None,
         **options):
    """Open a store for ``"read"``, ``"create"`` or ``"append"`` (or a ``Mode``); see ``base.Store``."""
    mode = normalize_mode(mode)
    if store is None:
        if mode == "create":
            raise UsageError(f"{path}: say which store to create (store='kvfile', 'binfile' or 'textfile')")
        store = sniff_store(path, storage_options)
        if store is None:
            raise FormatError(path, "cannot tell which SINGA store this is (empty, unknown or ambiguous "
                                    "content); pass the store kind (store=... / --store kvfile|binfile|textfile)")
    return store_class(store)(path, mode, tolerant=tolerant, storage_options=storage_options, **options)


def Open(path, mode=Mode.kRead, store: str | None = None, **kwargs):
    """SINGA's ``OpenStore(backend, path, mode)`` spelled as ``Open(path, mode, store)``."""
    return open(path, mode, store, **kwargs)


CreateStore = store_class
