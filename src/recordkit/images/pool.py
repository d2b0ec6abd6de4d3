"""One thread pool for the images of a batch: ``parallel_for(n, fn)`` runs ``fn(0) .. fn(n - 1)`` on
every core.

OpenCV's ``imdecode``/``resize`` and NumPy's ufunc loops release the GIL, so threads (not
processes) put every core to work on a batch without copying its bytes anywhere. The calling
thread takes part (it would only wait otherwise), so the pool has one thread fewer than the
process may use cores; the workers pull image indices from a shared counter, so a slow image holds
up only its own thread. Errors do not depend on scheduling: every index runs, and the error of the
lowest failing index is raised, as a loop over the batch would have raised it.
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

_lock = threading.Lock()
_executor: ThreadPoolExecutor | None = None
_executor_pid: int | None = None

#: Threads working on one batch (the caller included); None: the cores this process may use.
THREADS: int | None = None


def cores() -> int:
    """Cores this process may run on (its CPU affinity where the platform tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return max(1, os.cpu_count() or 1)


def threads() -> int:
    """Threads working on one batch, the calling thread included (:data:`THREADS`, else :func:`cores`)."""
    n = THREADS if THREADS is not None else cores()
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"recordkit.images.pool.THREADS must be a positive int or None, not {n!r}")
    return n


def _pool(workers: int) -> ThreadPoolExecutor:
    """The shared executor with at least ``workers`` threads (a new one after a fork: threads do not
    survive it)."""
    global _executor, _executor_pid
    with _lock:
        if (_executor is None or _executor_pid != os.getpid()
                or _executor._max_workers < workers):  # noqa: SLF001 - grown only, never shrunk
            _executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="recordkit-images")
            _executor_pid = os.getpid()
        return _executor


def parallel_for(n: int, fn: Callable[[int], object], *, workers: int | None = None) -> None:
    """Call ``fn(i)`` for every ``i`` in ``range(n)``, on ``workers`` threads (default :func:`threads`)
    counting the caller; returns when all are done, raising the exception of the lowest failing ``i``."""
    n = int(n)
    workers = min(n, threads() if workers is None else int(workers))
    if workers <= 1:
        for i in range(n):
            fn(i)
        return
    counter = itertools.count()  # next() on it is atomic under the GIL
    errors: dict[int, BaseException] = {}

    def run() -> None:
        for i in iter(counter.__next__, None):
            if i >= n:
                return
            try:
                fn(i)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, lowest index first
                errors[i] = exc

    futures = [_pool(workers - 1).submit(run) for _ in range(workers - 1)]
    run()
    for f in futures:
        f.result()
    if errors:
        raise errors[min(errors)]


_ahead_executor: ThreadPoolExecutor | None = None
_ahead_pid: int | None = None


def ahead(fn: Callable[[], object]):
    """Run ``fn()`` on the one thread that prepares next batches while the caller uses this one; a
    ``Future``. (Not a pool thread: a batch prepared ahead runs its images through
    :func:`parallel_for` like any caller, and a pool thread waiting on the pool could starve it.)"""
    global _ahead_executor, _ahead_pid
    with _lock:
        if _ahead_executor is None or _ahead_pid != os.getpid():
            _ahead_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recordkit-images-ahead")
            _ahead_pid = os.getpid()
        return _ahead_executor.submit(fn)
