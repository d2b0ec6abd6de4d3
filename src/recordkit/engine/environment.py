"""What the process a reader runs in says about partitioning: a training framework's ranks and
its data-loading worker processes.

The engine knows no framework. Readers ask ``distributed_partition()`` for (world size, rank)
when they are given no partition, and ``loader_workers()`` for how many data-loading workers
share this machine (each builds its own reader, so they share its memory bound). A framework's
integration answers by registering a provider. PyTorch's (``integrations/torch_env.py``) looks at
``torch`` only if the program has imported it and never imports it; it is registered on first
use by ``_load_defaults``, the one place here that names an integration.
"""
from __future__ import annotations

from typing import Callable

_PARTITION_PROVIDERS: list[Callable[[], tuple[int, int] | None]] = []
_WORKER_PROVIDERS: list[Callable[[], int | None]] = []
_DEFAULTS_LOADED = False


def register(*, partition: Callable[[], tuple[int, int] | None] | None = None,
             workers: Callable[[], int | None] | None = None) -> None:
    """Add a provider: ``partition()`` -> (world size, rank) or None; ``workers()`` -> count or None."""
    if partition is not None and partition not in _PARTITION_PROVIDERS:
        _PARTITION_PROVIDERS.append(partition)
    if workers is not None and workers not in _WORKER_PROVIDERS:
        _WORKER_PROVIDERS.append(workers)


def _load_defaults() -> None:
    global _DEFAULTS_LOADED
    if not _DEFAULTS_LOADED:
        _DEFAULTS_LOADED = True
        from recordkit.integrations import torch_env
        register(**torch_env.providers())


def distributed_partition() -> tuple[int | None, int | None]:
    """(world size, rank) from the first provider that knows, else (None, None)."""
    _load_defaults()
    for provider in _PARTITION_PROVIDERS:
        got = provider()
        if got is not None:
            return got
    return None, None


def loader_workers() -> int:
    """The number of data-loading worker processes this process is one of (1 when none)."""
    _load_defaults()
    for provider in _WORKER_PROVIDERS:
        got = provider()
        if got:
            return max(1, int(got))
    return 1
