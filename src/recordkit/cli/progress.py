"""Progress bars: shown on a terminal (stderr), never in pipes, logs or CI."""
from __future__ import annotations

import sys


class NoProgress:
    """What ``byte_progress`` returns when no bar is shown: the same calls, doing nothing, so a
    run in a pipe or a log does not even import tqdm."""

    def update(self, n=1) -> None:
        pass

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def byte_progress(total: int, desc: str, *, stdout_shared: bool = False):
    """A bar over ``total`` bytes; disabled unless stderr is a TTY (and, when the command
    prints to a terminal itself, disabled so it does not mangle that output)."""
    if not sys.stderr.isatty() or (stdout_shared and sys.stdout.isatty()):
        return NoProgress()
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                leave=False, file=sys.stderr)
