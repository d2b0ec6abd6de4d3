"""recordkit's errors across Ray's process boundary.

A read or write task runs in a worker; when it fails Ray pickles the exception and the
driver re-raises it as ``RayTaskError(FormatError)``, which is also an instance of the
original class (so ``except FormatError`` and ``e.path`` work; ``FormatError.__reduce__``
keeps its fields across the pickling).
"""
from __future__ import annotations

from recordkit.errors import RecordkitError


def recordkit_cause(error: BaseException) -> BaseException | None:
    """The recordkit error (or file error) behind an exception Ray raised for a failed task, if any.

    Ray Data re-raises a task's failure as ``RayTaskError(Cls)``; its ``cause`` is the
    original exception. Walks causes and contexts, so wrappers added by Ray Data are seen through.
    The error's message is its own again: Ray Data appends its retry advice to the exception's
    first argument (``Failed to apply UDF transform after 1/1 attempts ... configure
    DataContext``), which is about Ray's retries, not the user's data.
    """
    seen = set()
    todo = [error]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        cause = getattr(e, "cause", None)
        if isinstance(cause, (RecordkitError, OSError)):
            return _own_message(cause)
        if isinstance(e, (RecordkitError, OSError)) and type(e).__module__.startswith(("recordkit", "builtins")):
            return _own_message(e)
        todo += [cause if isinstance(cause, BaseException) else None, e.__cause__, e.__context__]
    return None


_RAY_RETRY_NOTE = "\nFailed to "  # how Ray Data's retry annotation starts (ray.data._internal.util)


def _own_message(error: BaseException) -> BaseException:
    """``error`` with Ray Data's retry annotation cut from its first argument."""
    args = error.args
    if args and isinstance(args[0], str) and _RAY_RETRY_NOTE in args[0]:
        error.args = (args[0].split(_RAY_RETRY_NOTE, 1)[0],) + args[1:]
    return error
