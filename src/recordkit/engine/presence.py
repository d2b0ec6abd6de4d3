"""Declared streams that never occur: an error at the end of a sweep, not silent data loss.

A stream declared with a mistyped alias (``features F dense 4`` on a file whose input is
``f``) matches nothing: every sample of the real input is skipped as undeclared and the
declared stream stays empty in every sequence, so a conversion used to write a file whose
stream is empty everywhere and exit 0. A stream that is empty in *some* sequences is normal
(README, "Differences from CNTK 2.7", item 1); one that is empty in *all* of them almost
never is. So a reader counts, chunk by chunk, the samples of every declared stream (and,
for text formats, the undeclared input names it skipped); once every chunk has been counted
(the end of a sweep, in whatever order the chunks were read) a declared stream without a
single sample is an ``EmptyStreamError``, unless the caller allowed it
(``allow_empty_streams=`` / ``--allow-empty-stream NAME``). The message names the declared
alias and, where the file has a similar undeclared input, that input and where it first
occurs ("declared 'F', the file has 'f'").

Undeclared inputs alone are not an error: reading a subset of a file's inputs is ordinary
(CNTK's conformance case 31, "extra input should be ignored"); they matter here only as the
likely intended name of an empty declared stream.

The same holds for a dense dim larger than the data (``features=dense:5`` over rows of 4): CTF
pads a short dense row with zeros, and short rows in *some* samples are the format's own
(CNTK pads them too), but when *no* sample of a stream reaches its declared dim every value
past the widest row is padding: the dim is wrong. Readers that pad report, chunk by chunk, the
widest dense sample of each stream; at the end of a sweep such a stream is a
``PaddedStreamError`` naming both widths ("declared 5, the data has 4"),
unless the caller allowed it (``allow_padding=`` / ``--allow-padding NAME``).
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from recordkit.errors import FormatError, UsageError


class StreamCheckError(FormatError):
    """The end-of-sweep check found declared streams the data does not fill (``streams``: their
    names); raised once, by the load that completed the sweep."""

    def __init__(self, path, message, *, streams=(), **where):
        super().__init__(path, message, **where)
        self.streams = list(streams)


class EmptyStreamError(StreamCheckError):
    """A declared stream had no sample in the whole input (``streams``: the empty stream names)."""


class PaddedStreamError(StreamCheckError):
    """No sample of a declared dense stream had its declared dim: every sample was zero padded
    (``streams``: their names; ``widths``: name -> (declared dim, widest sample))."""

    def __init__(self, path, message, *, streams=(), widths=None, **where):
        super().__init__(path, message, streams=streams, **where)
        self.widths = dict(widths or {})


def resolve_allowed(streams, allow, option: str = "allow_empty_streams") -> frozenset:
    """The stream names ``allow`` (names or aliases) refers to; an unknown name is a UsageError
    (a typo there would silently allow nothing)."""
    if allow is None:
        return frozenset()
    if isinstance(allow, str):
        allow = [allow]
    by_name: dict[str, str] = {}
    for s in streams:
        by_name.setdefault(s.name, s.name)
        by_name.setdefault(s.alias, s.name)
    out = set()
    for name in allow:
        if name not in by_name:
            raise UsageError(f"{option}: no stream '{name}' is declared "
                             f"(declared: {', '.join(s.name for s in streams)})")
        out.add(by_name[name])
    return frozenset(out)


class StreamPresence:
    """Samples per declared stream over the chunks counted so far, and the check at the end.

    ``count(chunk_id, samples)`` is called once per chunk (again for the same chunk is a no-op,
    so re-reading a chunk in a later sweep changes nothing); ``check()`` raises once every chunk
    has been counted and a declared, not allowed stream is still empty, located at the first
    occurrence of the near-miss input if there is one, else at ``where`` (where the reader
    expected the stream: the first sequence, the header declaring it). It raises at most once:
    a reader calls it at the end of a sweep and again on close.
    """

    def __init__(self, path, streams, num_chunks: int, allow=None, *, where=None, allow_padding=None):
        self.path = str(path)
        self.where = dict(where or {})  # the error's location when no near miss locates it
        self.streams = list(streams)
        self.allowed = resolve_allowed(self.streams, allow)
        self.allowed_padding = resolve_allowed(self.streams, allow_padding, "allow_padding")
        self.num_chunks = int(num_chunks)
        self.samples = {s.name: 0 for s in self.streams}
        self.widest: dict[str, int] = {}         # dense stream -> most values a sample had (readers that pad)
        self.first_padded: dict[str, tuple] = {}  # dense stream -> (line, column) of its first padded sample
        self.undeclared: dict[str, tuple] = {}   # input name -> (line, column) of its first recorded occurrence
        self.sequences = 0        # sequences read (kept)
        self.skipped_empty = 0    # sequences skipped for having no sample of any declared stream
        self._counted: set[int] = set()
        self._lock = threading.Lock()
        self.checked = False

    def count(self, chunk_id: int, samples, *, sequences: int = 1, skipped_empty: int = 0, widest=None) -> bool:
        """Add a chunk's samples per stream (``{name: n}`` or a list in stream order), the
        sequences it delivered and those skipped for holding no declared stream, and (readers
        that pad dense samples) the most values a dense sample of each stream had, in the same
        forms; False if the chunk was counted before."""
        with self._lock:
            if chunk_id in self._counted:
                return False
            self._counted.add(chunk_id)
            self.sequences += int(sequences)
            self.skipped_empty += int(skipped_empty)
            for name, n in self._items(samples):
                self.samples[name] += int(n)
            for name, n in self._items(widest or ()):
                self.widest[name] = max(self.widest.get(name, 0), int(n))
            return True

    def count_many(self, chunk_ids, samples: np.ndarray, sequences: np.ndarray) -> None:
        """``count`` for several chunks at once (no padding, nothing skipped): ``samples[k]`` per
        stream in stream order and ``sequences[k]`` are chunk ``chunk_ids[k]``'s. One lock and a
        sum instead of a call per chunk (a run of small chunks loads hundreds at once)."""
        with self._lock:
            new = [k for k, c in enumerate(chunk_ids) if c not in self._counted]
            if not new:
                return
            self._counted.update(chunk_ids[k] for k in new)
            self.sequences += int(np.asarray(sequences)[new].sum())
            totals = np.asarray(samples)[new].sum(axis=0)
            for spec, n in zip(self.streams, totals.tolist()):
                self.samples[spec.name] += int(n)

    def _items(self, values):
        return values.items() if isinstance(values, dict) else zip((s.name for s in self.streams), values)

    def note_padded(self, name: str, line=None, column=None) -> None:
        """A padded sample of dense stream ``name`` (the earliest one locates the error)."""
        with self._lock:
            known = self.first_padded.get(name)
            if known is None or (line is not None and (known[0] is None or (line, column) < known)):
                self.first_padded[name] = (line, column)

    def note_undeclared(self, name: str, line=None, column=None) -> None:
        """An undeclared input the reader skipped (where a name first occurs in the file is kept;
        chunks may be read in any order)."""
        with self._lock:
            known = self.undeclared.get(name)
            if known is None or (line is not None and (known[0] is None or (line, column) < known)):
                self.undeclared[name] = (line, column)

    @property
    def complete(self) -> bool:
        return len(self._counted) >= self.num_chunks

    def suppress(self) -> None:
        """Do not check any more (the reader is being closed because of another error)."""
        self.checked = True

    def empty(self) -> list:
        """The declared, not allowed streams without a sample so far."""
        return [s for s in self.streams if self.samples[s.name] == 0 and s.name not in self.allowed]

    def narrow(self) -> list:
        """The declared dense streams, not allowed padding, with samples of which none had the
        declared dim (only where the reader reported widths)."""
        return [s for s in self.streams if not s.is_sparse and s.name in self.widest and self.samples[s.name]
                and self.widest[s.name] < s.dim and s.name not in self.allowed_padding]

    def check(self) -> None:
        """Raise ``EmptyStreamError`` if every chunk was counted and a declared stream stayed empty,
        else ``PaddedStreamError`` if a dense stream's samples were all narrower than its dim.

        Not for an input without chunks (reading an empty data set as empty is deliberate), nor
        when every sequence was dropped for a tolerated error (those errors were reported, and
        said more than "empty" would)."""
        with self._lock:  # chunks may finish on several threads: judge (and raise) once
            if self.checked or not self.complete:
                return
            self.checked = True
        if self.num_chunks == 0:
            return  # an input without sequences (a CBF file with no chunks) lacks nothing in particular
        if self.sequences == 0 and self.skipped_empty == 0:
            return  # every sequence was dropped for an error, each already reported (under max_errors)
        empty = self.empty()
        if not empty:
            self._check_widths()
            return
        parts, where = [], None
        for s in empty:
            near = self._near_miss(s)
            if near is not None:
                text = (f"stream '{s.name}' has no sample in the whole input: declared '{s.alias}', "
                        f"the file has '{near}' (an undeclared input, skipped)")
                line, column = self.undeclared[near]
                if where is None and line is not None:
                    where = dict(line=line, column=column)
            else:
                declared = f"stream '{s.name}'" + (f" (input '{s.alias}')" if s.alias != s.name else "")
                text = f"{declared} has no sample in the whole input"
                others = sorted(self.undeclared)
                if others:
                    shown = ", ".join(f"'{n}'" for n in others[:5]) + (", ..." if len(others) > 5 else "")
                    text += f" (undeclared inputs skipped: {shown})"
            parts.append(text)
        names = [s.name for s in empty]
        message = ("; ".join(parts) + ". Check the stream declarations, or allow it: "
                   + " ".join(f"--allow-empty-stream {n}" for n in names) + f" (allow_empty_streams={names!r})")
        raise EmptyStreamError(self.path, message, streams=names, **(where or self.where))

    def _check_widths(self) -> None:
        """Raise ``PaddedStreamError`` for the streams ``narrow()`` names."""
        narrow = self.narrow()
        if not narrow:
            return
        parts = []
        for s in narrow:
            widest = self.widest[s.name]
            parts.append(f"dense stream '{s.name}' is wider than its data: declared {s.dim}, the data has {widest} "
                         f"(no sample has more than {widest} value{'s' if widest != 1 else ''}; all "
                         f"{self.samples[s.name]} samples were zero padded)")
        names = [s.name for s in narrow]
        message = ("; ".join(parts) + ". Check the --stream dims, or allow it: "
                   + " ".join(f"--allow-padding {n}" for n in names) + f" (allow_padding={names!r})")
        line, column = self.first_padded.get(names[0], (None, None))
        where = dict(line=line, column=column) if line is not None else self.where
        raise PaddedStreamError(self.path, message, streams=names, widths={s.name: (s.dim, self.widest[s.name])
                                                                             for s in narrow}, **where)

    def _near_miss(self, spec):
        """The undeclared input that most likely was meant by ``spec``: the same name in another
        case, the stream's name used as the input name, or a close spelling."""
        names = [n for n in self.undeclared]
        if not names:
            return None
        for n in names:
            if n.lower() == spec.alias.lower() or n == spec.name:
                return n
        import difflib
        lowered = {n.lower(): n for n in names}
        close = difflib.get_close_matches(spec.alias.lower(), list(lowered), n=1, cutoff=0.75)
        return lowered[close[0]] if close else None


class ChecksPresence:
    """For readers that hold a ``StreamPresence`` in ``self._presence``: ``close()`` ends with
    ``check_presence()``; an error ending a ``with`` block, or the garbage collector, suppresses
    the check (it must not hide the real error, nor be raised from nowhere)."""

    if TYPE_CHECKING:  # what the reader using this mixin has
        _presence: Any
        close: Callable[[], None]

    def check_presence(self) -> None:
        presence = getattr(self, "_presence", None)
        if presence is not None:
            presence.check()

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and getattr(self, "_presence", None) is not None:
            self._presence.suppress()  # do not hide the error that ends the with block
        self.close()

    def __del__(self):
        if getattr(self, "_presence", None) is not None:
            self._presence.suppress()  # the garbage collector is no place to report it
        super().__del__()  # type: ignore[misc]  # the reader's other base (ClosingReader) has one
