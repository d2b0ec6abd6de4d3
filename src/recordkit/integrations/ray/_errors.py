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
            return cause
        if isinstance(e, (RecordkitError, OSError)) and type(e).__module__.startswith(("recordkit", "builtins")):
            return e
        todo += [cause if isinstance(cause, BaseException) else None, e.__cause__, e.__context__]
    return None
