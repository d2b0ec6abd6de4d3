"""PyTorch's answers to ``engine/environment.py``, without importing torch.

A reader built inside a ``torch.distributed`` job or a DataLoader worker learns the rank, the
world size and the worker count from here; when the program has not imported torch there is
nothing to learn, and torch (hundreds of milliseconds to import) is never imported for it.
"""
from __future__ import annotations

import sys


def distributed_partition() -> tuple[int, int] | None:
    """(world size, rank) when torch.distributed is initialized, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    dist = getattr(torch, "distributed", None)
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_world_size(), dist.get_rank()
    except Exception:
        pass
    return None


def loader_workers() -> int | None:
    """The number of DataLoader workers when this runs in one, else None."""
    torch = sys.modules.get("torch")
    try:
        info = torch.utils.data.get_worker_info() if torch is not None else None
    except Exception:
        info = None
    return int(getattr(info, "num_workers", 1) or 1) if info is not None else None


def providers() -> dict:
    """The providers ``engine/environment.register`` takes (it asks for them: this module imports
    nothing of the engine, so the two form no import circle)."""
    return {"partition": distributed_partition, "workers": loader_workers}
