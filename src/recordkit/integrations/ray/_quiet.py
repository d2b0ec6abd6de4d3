"""Ray's own output under ``recordkit convert --engine ray``: the user sees recordkit's lines.

One bad CTF line used to bury the one located error under ~250 lines: Ray Data logs its
progress (INFO) and the failed task's traceback (ERROR) on the console, every worker's
stderr is forwarded to the driver (``log_to_driver``, with the task's traceback again), and
Ray's configuration raises deprecation warnings, which the command line printed as recordkit
warnings. recordkit already raises the located error behind Ray's wrapper
(``_errors.recordkit_cause``), so below trace level 2 all of that stays in Ray's session logs
(``/tmp/ray/session_*/logs``, where Ray Data's console lines also go); ``--trace-level 2``
shows it as before.
"""
from __future__ import annotations

import contextlib
import logging
import warnings

from recordkit.errors import TRACE_INFO, RecordkitWarning, trace_level as _trace_level

_QUIET = logging.CRITICAL + 10  # above every level: the handler passes nothing


def verbose(trace_level=None) -> bool:
    """Whether Ray's own logs and warnings are shown (trace level 2 and above)."""
    return _trace_level(trace_level) >= TRACE_INFO


def init_options(trace_level=None) -> dict:
    """``ray.init`` keywords for a cluster the command starts or joins: worker output forwarded
    to this process and Ray's log records at WARNING only when ``verbose``."""
    if verbose(trace_level):
        return {"log_to_driver": True, "logging_level": "WARNING"}
    return {"log_to_driver": False, "logging_level": "ERROR"}


@contextlib.contextmanager
def quiet(trace_level=None):
    """Within: Ray Data's console handler passes nothing (its log file still gets everything) and
    only recordkit's own warnings are shown; both restored on the way out."""
    if verbose(trace_level):
        yield
        return
    handlers = [h for h in logging.getLogger("ray.data").handlers if _console(h)]
    levels = [h.level for h in handlers]
    for h in handlers:
        h.setLevel(_QUIET)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore")
            warnings.filterwarnings("always", category=RecordkitWarning)
            yield
    finally:
        for h, level in zip(handlers, levels):
            h.setLevel(level)


def _console(handler) -> bool:
    """A handler that writes to a terminal stream rather than a file (Ray Data's ``console``)."""
    return handler.get_name() == "console" or (isinstance(handler, logging.StreamHandler)
                                               and not isinstance(handler, logging.FileHandler))
