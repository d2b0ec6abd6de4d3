"""Context-manager plumbing shared by readers and writers."""
from __future__ import annotations


class ClosingReader:
    """``with reader:`` closes it; so does garbage collection, quietly."""

    def close(self) -> None:  # pragma: no cover - every reader overrides it
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class AtomicWriter:
    """``with writer:`` publishes the file on success (``close``) and discards it on error (``abort``)."""

    def close(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def abort(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            self.abort()
