"""Progress bars: shown on a terminal (stderr), never in pipes, logs or CI."""
from __future__ import annotations

import sys

from tqdm import tqdm


def byte_progress(total: int, desc: str, *, stdout_shared: bool = False):
    """A bar over ``total`` bytes; disabled unless stderr is a TTY (and, when the command
    prints to a terminal itself, disabled so it does not mangle that output)."""
    enabled = sys.stderr.isatty() and not (stdout_shared and sys.stdout.isatty())
    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024,
                disable=not enabled, leave=False, file=sys.stderr)
