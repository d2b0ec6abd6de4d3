"""``validate``: read a data set completely and report every problem, located, for any format.

Readers stop at the first problem (or count them against ``max_errors`` while skipping data);
a person repairing a corpus wants the opposite: everything that is wrong, each with where it
is, in one run. Each format package provides one function::

    def validate(path, *, checked: collections.Counter, storage_options=None, cache_dir=None,
                 **options) -> Iterator[Problem]

that reads everything and yields a ``Problem`` per finding (ignoring options meant for other
formats), counting what it looked at in ``checked`` (``files``, ``records``/``sequences``/
``tuples``, ``chunks``, ``bytes``). ``VALIDATORS`` maps a format name to the module holding it,
imported only when used: a new format plugs in with one row here (and, to be found without
``format=``, a case in ``recordkit.formats.detect.sniff``).

Locations: text formats give ``file:line:column`` (1-based, columns in bytes); binary formats a
byte offset and the record / chunk / tuple / shard index. A problem is an ``error`` (the data
cannot be read as it is) or a ``warning`` (it is read, but probably not as meant: a dense CTF
sample padded with zeros, an undeclared input skipped).
"""
from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Iterator

from recordkit.errors import FormatError
from recordkit.formats import registry

# format -> module with ``validate(path, *, checked, **options)``: each format's registry entry says
VALIDATORS = registry.validators()


@dataclass(frozen=True)
class Problem:
    """One finding. ``kind`` is a short stable name (``malformed-number``, ``frame-truncated``...)
    for summaries and scripts; ``message`` says what was expected, in words."""

    path: str
    kind: str
    message: str
    line: int | None = None
    column: int | None = None
    offset: int | None = None
    record: str | None = None      # "record 3", "chunk 2, sequence 5 of the chunk", "tuple 7", "sequence 17"
    severity: str = "error"        # "error" | "warning"
    count: int = 1                 # occurrences it stands for (> 1: the rest of a run not located one by one)

    @property
    def location(self) -> str:
        """``file:line:column`` (text), or ``file: byte offset N, record K`` (binary)."""
        if self.line is not None:
            where = f"{self.path}:{self.line}"
            return where + (f":{self.column}" if self.column is not None else "")
        extra = ([f"byte offset {self.offset}"] if self.offset is not None else []) + \
            ([self.record] if self.record else [])
        return f"{self.path}: {', '.join(extra)}" if extra else self.path

    def __str__(self) -> str:
        tail = f" ({self.record})" if self.line is not None and self.record else ""
        return f"{self.location}: {'warning: ' if self.severity == 'warning' else ''}{self.message}{tail}"

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if v is not None and not (k == "count" and v == 1)}

    @classmethod
    def from_error(cls, error: FormatError, kind: str, *, severity: str = "error", record=None) -> "Problem":
        """A ``FormatError`` (already located by the reader that raised it) as a problem."""
        message = getattr(error, "message", None) or str(error)
        return cls(getattr(error, "path", "?"), kind, message, getattr(error, "line", None),
                   getattr(error, "column", None), getattr(error, "offset", None),
                   record if record is not None else getattr(error, "record", None), severity)


def formats() -> list[str]:
    return list(VALIDATORS)


def validator(fmt: str):
    """The ``validate`` function of format ``fmt`` (its module imported now)."""
    try:
        module = VALIDATORS[fmt]
    except KeyError:
        raise ValueError(f"no validator for format {fmt!r} (known: {', '.join(VALIDATORS)})") from None
    return importlib.import_module(module).validate


def validate(path, format: str | None = None, *, checked: Counter | None = None, storage_options=None,
             **options) -> Iterator[Problem]:
    """Every problem of the data set at ``path`` (its format sniffed unless ``format`` is given).

    Lazy: problems come as they are found, so a caller that stops early (``max_errors``) stops
    the reading too. ``checked`` (a Counter) receives what was looked at."""
    from recordkit.formats.detect import sniff
    fmt = format or sniff(path, storage_options, part_name_prefix=options.get("part_name_prefix"))
    if checked is None:
        checked = Counter()
    return validator(fmt)(path, checked=checked, storage_options=storage_options, **options)


def checksum_problems(path: str, *, storage_options=None) -> Iterator[Problem]:
    """Every block of ``path`` that differs from its ``.rkcrc`` sidecar, when it has one (nothing
    otherwise). Each format validator calls this for each file it reads, before the format checks."""
    from recordkit.storage import checksum
    from recordkit.storage.source import open_source
    src = open_source(path, storage_options=storage_options, verify=False)
    try:
        try:
            table = checksum.load_for(src, storage_options=storage_options)
        except FormatError as e:
            yield Problem.from_error(e, "checksum-sidecar")
            return
        if table is None:
            return
        import zlib
        for b in range(len(table.crcs)):
            lo, hi = table.block_range(b)
            data = src.pread(lo, hi - lo, cache=False)
            if len(data) != hi - lo or zlib.crc32(data) != int(table.crcs[b]):
                yield Problem(path, "checksum-mismatch", f"checksum mismatch in block {b} (bytes {lo}..{hi}): the "
                                                         f"data differs from what {table.path} recorded", offset=lo,
                              record=f"block {b}")
    finally:
        src.close()


def is_checksum_error(error: Exception) -> bool:
    """Whether a reader's error is a checksum mismatch (already reported by ``checksum_problems``)."""
    return str(getattr(error, "message", "")).startswith("checksum mismatch in block")


@dataclass
class Summary:
    """What a run found: counts by severity and kind, what was checked, whether it stopped early."""

    checked: Counter
    by_kind: Counter
    errors: int = 0
    warnings: int = 0
    stopped_early: bool = False

    @property
    def problems(self) -> int:
        return self.errors + self.warnings

    def to_dict(self) -> dict:
        return {"checked": dict(self.checked), "errors": self.errors, "warnings": self.warnings,
                "by_kind": dict(sorted(self.by_kind.items())), "stopped_early": self.stopped_early}


def run(paths, format: str | None = None, *, max_errors: int | None = None, on_problem=None,
        **options) -> Summary:
    """Validate every path, calling ``on_problem(problem)`` for each finding; stop after
    ``max_errors`` errors (None: never). The summary counts by kind."""
    summary = Summary(Counter(), Counter())
    for path in paths:
        problems = validate(path, format, checked=summary.checked, **options)
        try:
            for p in problems:
                summary.by_kind[p.kind] += p.count
                if p.severity == "warning":
                    summary.warnings += p.count
                else:
                    summary.errors += p.count
                if on_problem is not None:
                    on_problem(p)
                if max_errors is not None and summary.errors >= max_errors:
                    summary.stopped_early = True
                    return summary
        finally:
            close = getattr(problems, "close", None)
            if close is not None:
                close()
    return summary
