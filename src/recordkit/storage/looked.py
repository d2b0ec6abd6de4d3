"""The answers of the look at a remote path made for the open under way (``probe.py`` makes it).

Kept apart from ``probe.py`` so that ``location`` and ``source`` can consult them without
importing what looks (which needs them).
"""
from __future__ import annotations

import contextlib
import contextvars

_current: contextvars.ContextVar = contextvars.ContextVar("recordkit_probe", default=None)


class Probe:
    """What one look found at ``url``: ``info`` (a file's listing entry, or None), ``directory``
    (whether a directory of that name exists), ``entries`` (its listing entries, or None),
    ``sidecar`` (whether the file has a ``.rkcrc``), ``sidecar_data`` (its bytes if fetched; None
    otherwise) and ``blocks`` (``[(offset, bytes)]`` of the file's version)."""

    def __init__(self, url: str, info, directory: bool, entries, sidecar: bool, sidecar_data, blocks):
        self.url, self.info, self.directory, self.entries = url, info, directory, entries
        self.sidecar, self.sidecar_data, self.blocks = sidecar, sidecar_data, blocks
        self.sidecar_version = None  # the ETag of the sidecar bytes held, where known

    def known_file(self) -> dict | None:
        """``open_source``'s ``known`` for the file (None: not a file)."""
        if self.info is None:
            return None
        known = {"info": self.info, "sidecar": self.sidecar, "blocks": self.blocks}
        if self.sidecar_data is not None:
            known["sidecar_data"] = self.sidecar_data
            known["sidecar_version"] = self.sidecar_version
        return known

    def names(self) -> list[str]:
        return [_name(e) for e in self.entries or ()]


def _name(entry: dict) -> str:
    return entry["name"].rstrip("/").rsplit("/", 1)[-1]


def current(url) -> Probe | None:
    """The look at ``url`` made for the open under way, if any."""
    probe = _current.get()
    if probe is None or not isinstance(url, str) or url.rstrip("/") != probe.url.rstrip("/"):
        return None
    return probe


def current_directory(url) -> Probe | None:
    """The look at ``url`` if it found a directory listed in full."""
    probe = current(url)
    return probe if probe is not None and probe.entries is not None else None


@contextlib.contextmanager
def answering(probe):
    """``probe``'s answers current while the block runs (in this thread)."""
    token = _current.set(probe)
    try:
        yield probe
    finally:
        _current.reset(token)
