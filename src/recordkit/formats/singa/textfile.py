"""TextFileStore (SINGA 0.2-0.3; same bytes as 1.x TextFileWriter/Reader): one value per line.

Writing stores ``value + "\\n"`` and ignores the key. Reading yields the 0-based line
number as the key (``b"0"``, ``b"1"``, ...) and the line without its ``"\\n"``: a ``"\\r"``
stays in the value, blank lines are empty values, a last line without newline counts.
There is no escaping, so a value holding ``"\\n"`` comes back as several tuples; recordkit
writes it as SINGA does but warns.

Append is SINGA 1.x's (0.x TextFileStore crashes on kAppend), made crash-safe by copying:
if the existing file does not end with a newline one is added first, so the first new
value does not get glued onto the old last line.
"""
from __future__ import annotations

from recordkit.formats.singa.base import Store, report
from recordkit.storage.location import file_size


class TextFileStore(Store):
    kind = "textfile"

    def _next(self):
        line = self._file.readline()
        if not line:
            return None
        key = str(self._index).encode("ascii")
        self._index += 1
        self._pos += len(line)
        return key, (line[:-1] if line.endswith(b"\n") else line)

    def _encode(self, key: bytes, value: bytes) -> bytes:
        breaks = value.count(b"\n")
        if breaks:
            report(f"{self.path}: a value with {breaks} newline(s) reads back as {breaks + 1} tuples "
                   f"(TextFile has no escaping)", stacklevel=4)
        return value + b"\n"

    def _prepare_append(self) -> None:
        with self.location.open_read() as old:
            size = file_size(old)
            self._out.copy_from(old, size)
            if size:
                old.seek(size - 1)
                if old.read(1) != b"\n":
                    self._out.write(b"\n")

    def seek(self, offset: int) -> None:
        """A no-op, as in SINGA's TextFileStore."""
