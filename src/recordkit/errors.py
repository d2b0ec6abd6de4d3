"""The error and warning types every recordkit reader and writer raises.

A user who feeds a corrupt file must learn *which* file and *where*: text formats
locate problems as ``line:column`` (1-based, columns counted in bytes), binary
formats as a byte offset plus the record or chunk index. ``FormatError`` carries
those fields so callers can act on them programmatically, and formats them into a
compiler-style message (``path:line:col: what was expected``) for people.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from collections import Counter


class RecordkitError(Exception):
    """Base class of every error recordkit raises on purpose."""


class UsageError(RecordkitError, ValueError):
    """The caller asked for something inconsistent (streams that do not match a file, ...)."""


class NotRegularFileError(RecordkitError, OSError):
    """A FIFO, device or socket given where a file is read: refused before any ``open()``
    (opening a FIFO blocks until a writer comes; a device reads forever or nothing)."""


class NotADataSetError(RecordkitError, IsADirectoryError):
    """A directory given as a data set that does not say it is one (no description, no numbered
    parts: ``train.parquet`` beside ``test.parquet``): refused, never read as whatever files
    happen to share an extension (``formats/directories.py``)."""


class UnrepresentableError(RecordkitError, ValueError):
    """A value the target format cannot hold (inf/nan in CTF text, an empty sequence...): says
    which stream, sequence (its key) and sample, so the user finds it in the source."""


class FormatError(RecordkitError, ValueError):
    """Malformed input, located in its file.

    ``line``/``column`` are 1-based (text formats); ``offset`` is a byte offset
    (binary formats, or the text offset where known); ``record`` names the record,
    sequence or chunk index when that helps.
    """

    def __init__(self, path: str | os.PathLike[str], message: str, *, line: int | None = None,
                 column: int | None = None, offset: int | None = None, record: str | int | None = None) -> None:
        self.path = str(path)
        self.message = message
        self.line = line
        self.column = column
        self.offset = offset
        self.record = record
        super().__init__(self._render())

    def __reduce__(self):
        # the keyword fields are not in ``args``: rebuild from the instance's state, so the error
        # crosses process boundaries (multiprocessing, Ray tasks) with its file and position
        return _rebuild_error, (type(self), self.args, dict(self.__dict__))

    def _render(self) -> str:
        where = self.path
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        extra = []
        if self.line is None and self.offset is not None:
            extra.append(f"byte offset {self.offset}")
        if self.record is not None:
            extra.append(str(self.record))
        suffix = f" ({', '.join(extra)})" if extra else ""
        return f"{where}: {self.message}{suffix}"


class ErrorBudgetExceeded(FormatError):
    """Raised when more errors were found than ``max_errors`` allows.

    The message is that of the error that broke the budget; ``errors_seen`` says
    how many errors were counted in total, this one included.
    """

    def __init__(self, cause: FormatError, errors_seen: int, max_errors: int):
        self.cause = cause
        self.errors_seen = errors_seen
        self.max_errors = max_errors
        super().__init__(cause.path, cause.message, line=cause.line, column=cause.column,
                         offset=cause.offset, record=cause.record)
        if max_errors > 0:
            self.args = (f"{self.args[0]} [error {errors_seen}: more than maxErrors={max_errors}]",)


def _rebuild_error(cls, args, state):
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class RecordkitWarning(UserWarning):
    """Something in the input was accepted but is probably not what the author meant."""


class RecordkitInfo(RecordkitWarning):
    """Information at trace level 2 (CNTK's ``traceLevel`` Info): a chunk loaded with its
    sequences and samples, a sweep started. A ``RecordkitWarning``, so filtering recordkit's
    warnings filters these too; the command line prints them as ``recordkit: info: ...``."""


# CNTK's traceLevel: 0 errors only, 1 warnings too (the default), 2 information too.
TRACE_ERRORS, TRACE_WARNINGS, TRACE_INFO = 0, 1, 2
_default_trace_level = TRACE_WARNINGS


def trace_level(level=None) -> int:
    """``level`` checked: an integer >= 0 (0 errors only, 1 warnings too, 2 and above information
    too; CNTK accepts higher levels); None: the process-wide default that ``set_trace_level``
    sets (1 unless changed)."""
    if level is None:
        return _default_trace_level
    if isinstance(level, bool) or not isinstance(level, int) or level < 0:
        raise UsageError(f"trace_level must be 0 (errors only), 1 (warnings too) or 2 (information too), "
                         f"not {level!r}")
    return level


def set_trace_level(level: int) -> int:
    """Set the trace level of readers and sources created without one (and of the warnings of code
    that has none, such as index caches and SINGA stores); returns the previous default. The
    command line sets it from ``--trace-level``."""
    global _default_trace_level
    previous, _default_trace_level = _default_trace_level, trace_level(level)
    return previous


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB = os.path.dirname(os.path.abspath(warnings.__file__)) + os.sep
# standard-library frames between recordkit and its caller (thread pools, context managers)
_PLUMBING = (_STDLIB + "threading.py", _STDLIB + "concurrent" + os.sep, _STDLIB + "contextlib.py")


def warn(message: str, category: type = RecordkitWarning, level: int | None = None) -> None:
    """Report ``message`` if trace ``level`` (the emitter's, else the default) shows its
    ``category``: information from level 2, warnings from level 1.

    ``warnings.warn`` attributed to the first caller outside recordkit, so Python's default
    display shows the user's own line (``train.py:12: RecordkitWarning: data.ctf:3:5: ...``),
    not a line of recordkit's source under every warning. A warning raised on a worker thread
    (no user code on its stack) is attributed to ``<recordkit>`` and shows no source line."""
    needed = TRACE_INFO if issubclass(category, RecordkitInfo) else TRACE_WARNINGS
    if trace_level(level) < needed:
        return
    frame = sys._getframe(1)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith((_PACKAGE,) + _PLUMBING):
        frame = frame.f_back
        level += 1
    if frame is None:
        warnings.warn_explicit(message, category, "<recordkit>", 0, module="recordkit")
    else:
        warnings.warn(message, category, stacklevel=level)


WARNINGS_PER_KIND = 20  # beyond this, a source's warnings of one kind are counted but not printed

# (source, kind) -> warnings counted but not shown, while a command collects them (``unshown_warnings``)
_unshown: Counter | None = None
_unshown_lock = threading.Lock()


class WarningLimit:
    """Shows at most ``limit`` warnings of each kind from one source (a file), then one line saying
    that further ones are counted but not shown, and counts the rest: a file with a million short
    rows must not print a million lines. What was not shown is not lost: within
    ``unshown_warnings()`` (the command line runs every command inside it) the counts per source
    and kind are collected, and the command prints them at its end."""

    def __init__(self, source, *, limit: int = WARNINGS_PER_KIND, level: int | None = None):
        self.source = str(source)
        self.limit = int(limit)
        self.level = level
        self.shown: Counter = Counter()  # kind -> warnings given to this limit so far, shown or not

    def warn(self, kind: str, text: str) -> None:
        """One warning of ``kind`` (words naming it, e.g. "dense input padded with zeros")."""
        if trace_level(self.level) < TRACE_WARNINGS:
            return  # nothing is shown at this level, so nothing is "not shown" either
        given = self.shown[kind]
        self.shown[kind] = given + 1
        if given < self.limit:
            warn(text, level=self.level)
            return
        if given == self.limit:
            warn(f"{self.source}: further warnings of this kind are counted but not shown", level=self.level)
        _count_unshown(self.source, kind, 1)

    def unshown(self, kind: str, n: int) -> None:
        """``n`` warnings of ``kind`` that were counted without their details (beyond what a kernel
        records): never shown one by one, so counted as not shown."""
        if n <= 0 or trace_level(self.level) < TRACE_WARNINGS:
            return
        if self.shown[kind] <= self.limit:
            warn(f"{self.source}: further warnings of this kind are counted but not shown ({n} of them: {kind})",
                 level=self.level)
            self.shown[kind] = self.limit + 1
        _count_unshown(self.source, kind, n)


def _count_unshown(source: str, kind: str, n: int) -> None:
    if _unshown is None:
        return
    with _unshown_lock:
        if _unshown is not None:
            _unshown[(source, kind)] += n


@contextlib.contextmanager
def unshown_warnings():
    """Within: the counts of warnings ``WarningLimit`` did not show are collected into the Counter
    it yields, ``(source, kind) -> count`` in the order first counted."""
    global _unshown
    with _unshown_lock:
        previous, _unshown = _unshown, Counter()
        collected = _unshown
    try:
        yield collected
    finally:
        with _unshown_lock:
            _unshown = previous


class ErrorBudget:
    """CNTK's ``maxErrors``: how many input errors to tolerate before failing.

    Every error is counted once and, while the budget lasts, reported as a warning
    with its location; the (max_errors + 1)th raises ``ErrorBudgetExceeded``. The
    count spans the whole reader (index and every chunk), like CNTK's counter.
    """

    def __init__(self, max_errors: int = 0, *, warn=None):
        if max_errors < 0:
            raise ValueError(f"max_errors must be >= 0, not {max_errors}")
        self.max_errors = int(max_errors)
        self.count = 0
        self._warn = warn

    @property
    def remaining(self) -> int:
        return self.max_errors - self.count

    def charge(self, error: FormatError, *, consequence: str = "") -> None:
        """Count one error: warn about it, or raise when it breaks the budget."""
        self.count += 1
        if self.count > self.max_errors:
            raise ErrorBudgetExceeded(error, self.count, self.max_errors)
        if self._warn is not None:
            self._warn(f"{error} [error {self.count} of at most {self.max_errors}{'; ' + consequence if consequence else ''}]")

    def charge_unlocated(self, path, n: int, what: str, *, line: int | None = None,
                         column: int | None = None) -> None:
        """Count ``n`` errors whose details were not recorded (beyond the event cap); ``line``/``column``
        point at where the region holding them starts, when the caller knows it."""
        for _ in range(n):
            self.charge(FormatError(path, what, line=line, column=column))


def trace_chunk_loaded(path, chunk, sequences: int | None = None, samples: int | None = None, *,
                       level: int | None = None) -> None:
    """The trace level 2 line of a chunk read and decoded: ``chunk`` is its ``ChunkInfo``;
    ``sequences``/``samples`` what it delivered (fewer than described when errors dropped some)."""
    sequences = chunk.num_sequences if sequences is None else sequences
    samples = chunk.num_samples if samples is None else samples
    where = f", {chunk.size} bytes at offset {chunk.offset}" if chunk.size else ""
    warn(f"{path}: chunk {chunk.id} loaded: {sequences} sequences, {samples} samples{where}", RecordkitInfo, level)
