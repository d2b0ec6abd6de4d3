"""recordkit's errors across Ray's process boundary.

A read or write task runs in a worker; when it fails Ray pickles the exception and the
driver re-raises it as ``RayTaskError(FormatError)``, which is also an instance of the
original class (so ``except FormatError`` and ``e.path`` work). ``FormatError``'s
constructor takes keyword fields that its ``args`` do not hold, so plain pickling cannot
rebuild it and Ray would hand back an ``UnserializableException`` that names no file.
Registering a reducer that restores the instance's fields as they were fixes that for
every process that imports this package (the workers import it to run our tasks).
"""
from __future__ import annotations

import copyreg

from recordkit.errors import ErrorBudgetExceeded, FormatError, RecordkitError


def _rebuild(cls, args, state):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


def _reduce(error):
    return _rebuild, (type(error), error.args, dict(error.__dict__))


def register() -> None:
    """Make FormatError and its subclasses picklable (idempotent)."""
    for cls in (FormatError, ErrorBudgetExceeded):
        copyreg.pickle(cls, _reduce)


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
