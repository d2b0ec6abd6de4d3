"""The behaviour every SINGA store shares: modes, the read/write/close protocol, reporting.

SINGA's ``io::Store`` (0.2-0.3) is ``Open(path, mode)``, ``Read(key*, value*) -> bool``,
``Write(key, value) -> bool``, ``Flush()``, ``Close()``, ``SeekToFirst()``, ``Seek(offset)``.
Here ``read()`` returns ``(key, value)`` as bytes, or ``None`` at the end; ``write`` returns
``False`` exactly where SINGA's returns false (and warns, so nothing is dropped silently);
the CamelCase names are aliases. Stores iterate (the remaining tuples) and are context
managers: a clean exit publishes what was written, an exception discards it.

Where SINGA stops quietly at a truncated or corrupt tuple, recordkit raises
``FormatError`` (file, byte offset of the tuple, ``tuple N``); with ``tolerant=True`` it
warns (``RecordkitWarning``), counts the problem in ``errors`` and ends the store there,
which is what SINGA's reader does without telling anyone.

Writers never touch the target until ``close()``: ``create`` writes a temporary file that is
renamed over the target; ``append`` copies the existing tuples (up to the last complete
one) into such a temporary, appends, and renames on close. A crash at any point leaves
the old file intact and readable. The price is one copy of the existing file per append
session; SINGA instead writes in place, which its own recovery scan then has to repair.
"""
from __future__ import annotations

import enum

from recordkit.formats.closing import AtomicWriter
from recordkit.errors import FormatError, UsageError, warn
from recordkit.formats.singa.location import StoreLocation
from recordkit.storage.location import file_size

MODES = ("read", "create", "append")


class Mode(enum.IntEnum):
    """``singa::io::Mode`` of store.h (0.2-0.3): note kCreate comes first."""
    kCreate = 0
    kRead = 1
    kAppend = 2


_MODE_NAMES = {Mode.kCreate: "create", Mode.kRead: "read", Mode.kAppend: "append",
               "r": "read", "w": "create", "a": "append"}


def normalize_mode(mode) -> str:
    if isinstance(mode, str) and mode in MODES:
        return mode
    if isinstance(mode, (int, str)) and mode in _MODE_NAMES:
        return _MODE_NAMES[mode]
    raise UsageError(f"mode must be one of {', '.join(MODES)} (or a singa Mode), not {mode!r}")


def as_bytes(data, what: str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes or str, not {type(data).__name__}")


def report(message: str, stacklevel: int = 3) -> None:
    """A ``RecordkitWarning`` shown at the caller's line outside recordkit (``stacklevel`` is kept
    for callers; ``recordkit.errors.warn`` finds that line itself)."""
    warn(message)


class Store(AtomicWriter):
    """Base class; subclasses define the tuple codec (``_next``, ``_encode``, ...)."""

    kind = "?"
    appendable = True

    def __init__(self, path, mode="read", *, tolerant: bool = False, storage_options=None,
                 checksums: bool | None = None):
        self.mode = normalize_mode(mode)
        self.tolerant = bool(tolerant)
        self.storage_options = storage_options
        self.location = self._resolve(StoreLocation(path, storage_options))
        self.path = str(self.location)
        self.errors = 0          # problems reported (tolerant mode, append recovery)
        self.written = 0         # tuples written in this session
        self._file = None
        self._out = None
        self._closed = False
        self._ended = False
        if self.mode == "read":
            self._file = self.location.open_read()
            self._size = file_size(self._file)
            self._rewind()
        elif self.mode == "create":
            self._out = self.location.atomic_output(checksums=bool(checksums))
        else:
            if not self.appendable:
                raise UsageError(f"{self.path}: a {self.kind} store cannot be opened for append")
            if not self.location.exists():
                raise FileNotFoundError(f"{self.path}: append needs an existing {self.kind} store")
            if checksums is None:  # keep the store's checksum sidecar if it has one
                from recordkit.storage.checksum import sidecar_path
                checksums = StoreLocation(sidecar_path(self.location.display), storage_options).exists()
            self._out = self.location.atomic_output(checksums=bool(checksums))
            try:
                self._prepare_append()
            except BaseException:
                self._out.discard()
                raise

    # -- hooks ---------------------------------------------------------------------------------
    def _resolve(self, location: StoreLocation) -> StoreLocation:
        return location

    def _rewind(self) -> None:
        self._file.seek(0)
        self._pos = 0
        self._index = 0
        self._ended = False

    def _next(self):  # pragma: no cover - abstract
        """(key, value) of the next tuple, None at a clean end; FormatError when broken."""
        raise NotImplementedError

    def _encode(self, key: bytes, value: bytes) -> bytes:  # pragma: no cover - abstract
        raise NotImplementedError

    def _refuse(self, key: bytes, value: bytes) -> str | None:
        """Why SINGA's Write would return false for this tuple (None: accepted)."""
        return None

    def _prepare_append(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the SINGA protocol ----------------------------------------------------------------------
    def _need(self, reading: bool, op: str) -> None:
        if self._closed:
            raise UsageError(f"{self.path}: {op}() on a closed store")
        if reading and self.mode != "read":
            raise UsageError(f"{self.path}: {op}() needs a store opened in read mode, not {self.mode}")
        if not reading and self.mode == "read":
            raise UsageError(f"{self.path}: {op}() needs a store opened in create or append mode")

    def broken(self, offset: int, index: int, message: str) -> FormatError:
        return FormatError(self.path, message, offset=offset, record=f"tuple {index}")

    def read(self):
        """The next ``(key, value)``, or ``None`` at the end of the store."""
        self._need(True, "read")
        if self._ended:
            return None
        try:
            item = self._next()
        except FormatError as e:
            if not self.tolerant:
                raise
            self.errors += 1
            self._ended = True
            report(f"{e} [tolerated: reading stops here, as SINGA's reader does]")
            return None
        if item is None:
            self._ended = True
        return item

    def write(self, key, value) -> bool:
        """Append one tuple; ``False`` (with a warning) where SINGA's Write returns false."""
        self._need(False, "write")
        key, value = as_bytes(key, "key"), as_bytes(value, "value")
        why = self._refuse(key, value)
        if why is not None:
            report(f"{self.path}: tuple not written: {why}")
            return False
        self._out.write(self._encode(key, value))
        self.written += 1
        return True

    def flush(self) -> None:
        """Push buffered tuples to the temporary file (they appear under the name on close)."""
        self._need(False, "flush")
        self._out.flush()

    # -- recordkit's own (random access for the engine; not SINGA's API) -----------------------------
    @property
    def position(self) -> tuple[int, int]:
        """(byte offset, tuple index) of the next tuple ``read()`` returns."""
        return self._pos, self._index

    def resume_at(self, offset: int, index: int) -> None:
        """Continue reading at a tuple whose ``position`` was taken before (read mode only)."""
        self._need(True, "resume_at")
        self._file.seek(offset)
        self._pos, self._index = int(offset), int(index)

    def seek_to_first(self) -> None:
        """Restart reading at the first tuple (read mode only, as in SINGA)."""
        self._need(True, "seek_to_first")
        self._rewind()

    def seek(self, offset: int) -> None:
        """SINGA's ``Seek``: not supported by KVFileStore (fatal there)."""
        raise UsageError(f"{self.path}: a {self.kind} store does not support seek()")

    def count(self) -> int:
        """Number of tuples ``read()`` yields from the start (a separate pass; the cursor stays)."""
        self._need(True, "count")
        other = type(self)(self.path, "read", tolerant=self.tolerant, storage_options=self.storage_options)
        with other:
            return sum(1 for _ in other)

    def close(self) -> None:
        """Reading: release the file. Writing: publish the new content atomically."""
        if self._closed:
            return
        self._closed = True
        if self._file is not None:
            self._file.close()
        if self._out is not None:
            self._out.commit()

    def abort(self) -> None:
        """Writing: forget this session; the target keeps its previous content (if any)."""
        if self._closed:
            return
        self._closed = True
        if self._out is not None:
            self._out.discard()
        if self._file is not None:
            self._file.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- Python conveniences ----------------------------------------------------------------------
    def __iter__(self):
        while True:
            item = self.read()
            if item is None:
                return
            yield item

    def __del__(self):
        # An unclosed writer is treated like a crash: its temporary is dropped, the
        # target is left as it was (SINGA >= 0.2 would flush here instead).
        try:
            self.abort()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r} mode={self.mode}>"

    # SINGA spellings
    def Read(self):
        return self.read()

    def Write(self, key, value) -> bool:
        return self.write(key, value)

    def Flush(self) -> None:
        self.flush()

    def Close(self) -> None:
        self.close()

    def SeekToFirst(self) -> None:
        self.seek_to_first()

    def Seek(self, offset: int) -> None:
        self.seek(offset)

    def Count(self) -> int:
        return self.count()
