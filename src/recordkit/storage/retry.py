"""Retrying remote reads: a dropped connection must cost time, never data.

Every remote read recordkit does is a byte range (``offset``, ``length``) of an object
whose size and version were recorded when it was opened, so repeating a read is
idempotent: a retried range returns the same bytes, and a range is either delivered
whole or not at all (a short body counts as a failure). Nothing is delivered twice
because nothing is delivered until the whole range has arrived.

Which failures are retried: anything but "this cannot succeed" errors (missing object,
permission, bad argument). Network stacks raise many unrelated types (OSError,
aiohttp's ClientPayloadError, botocore's ReadTimeoutError, asyncio.TimeoutError), so a
list of retryable types would always miss one; a list of hopeless ones is short.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from recordkit.errors import RecordkitError

HOPELESS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
            ValueError, TypeError, KeyError, RecordkitError)


class ShortRead(OSError):
    """A range came back shorter than asked although the object is long enough."""


class RemoteReadError(RecordkitError):
    """A remote range could not be read after every attempt."""


@dataclass(frozen=True)
class RetryPolicy:
    """``attempts`` tries in all; the wait doubles from ``backoff`` up to ``max_backoff`` seconds."""
    attempts: int = 5
    backoff: float = 0.05
    max_backoff: float = 2.0

    @classmethod
    def default(cls) -> "RetryPolicy":
        """The policy readers use; ``RECORDKIT_RETRIES`` sets the number of attempts."""
        raw = os.environ.get("RECORDKIT_RETRIES")
        if raw is None:
            return cls()
        try:
            attempts = int(raw)
        except ValueError:
            raise RecordkitError(f"RECORDKIT_RETRIES must be a whole number of attempts, not {raw!r}") from None
        return cls(attempts=max(1, attempts))

    def call(self, fn, *, what: str, stats: dict | None = None):
        """``fn()`` until it succeeds or the attempts run out (then RemoteReadError naming ``what``)."""
        delay = self.backoff
        for attempt in range(1, self.attempts + 1):
            try:
                return fn()
            except HOPELESS:
                raise
            except Exception as e:  # noqa: BLE001 - see the module docstring
                if attempt == self.attempts:
                    raise RemoteReadError(f"{what}: failed after {attempt} attempt(s): "
                                          f"{type(e).__name__}: {e}") from e
                if stats is not None:
                    stats["retries"] = stats.get("retries", 0) + 1
                time.sleep(delay)
                delay = min(self.max_backoff, delay * 2)
        raise AssertionError("unreachable")  # pragma: no cover
