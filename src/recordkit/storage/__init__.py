"""Storage: where bytes come from and go to (local files, fsspec URLs), retries, caching, checksums.

Format codecs read through ``open_source`` (size + ``pread``) and write through
``recordkit.storage.atomic.AtomicFile``; nothing in ``formats/`` talks to fsspec directly.
"""
from recordkit.storage.location import is_url
from recordkit.storage.retry import RetryPolicy
from recordkit.storage.source import open_source
from recordkit.storage.versions import SourceChangedError

__all__ = ["is_url", "open_source", "RetryPolicy", "SourceChangedError"]
