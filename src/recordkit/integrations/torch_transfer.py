"""Moving minibatches from DataLoader workers to the main process.

A DataLoader worker sends each item through a queue (a pipe). torch's own way moves every
tensor's storage into its own shared-memory segment and passes one file descriptor per tensor:
milliseconds per minibatch. Packing the item's arrays into one ``bytearray`` (64-byte aligned)
makes it one block, but a pipe moves a 450 KB block in ~2 ms on a busy machine, eight times what
it costs to make the minibatch.

So each worker keeps a small ring of shared-memory slots (``_Ring``, ``RING_SLOTS`` of them, grown
to the largest item) and a control array of one flag per slot, both sent once to the main process
(torch shares them by file descriptor). An item is packed straight into a free slot and what
crosses the pipe is its slot number and layout (~1 KB). The main process does not copy it (a
fresh 450 KB buffer costs more in page faults than the pipe saves): the item's tensors are views
of the slot, through a NumPy view that ``torch.frombuffer`` holds, and when the last tensor that
shares it is gone, that view dies and its finalizer clears the slot's flag. The worker takes only
slots whose flag is clear; when none is (the loop keeps items, or has abandoned them unpickled),
the item goes by the pipe as before, so a slow or abandoned consumer never blocks or corrupts a
worker. The flag is cleared after the last use and read before the slot is written again, which
x86's store order makes safe; on other machines the ring is off (``RING_ENABLED``) and every
item goes by the pipe.

Unpickled, an item is the same plain dict of tensors whichever way it came (``_PackedItem``).
Measured in benchmarks/torch_loader.py.
"""
from __future__ import annotations

import os
import platform
import secrets
import warnings
import weakref
from typing import Mapping

import numpy as np
import torch
from torch.utils.data import get_worker_info

_ALIGN = 64
RING_SLOTS = 8
RING_ENABLED = platform.machine().lower() in ("x86_64", "amd64", "i686", "x86") and \
    os.environ.get("RECORDKIT_TORCH_RING", "1") != "0"


class _PackedItem:
    """An item on its way out of a DataLoader worker: pickles as (its slot in the worker's ring, or
    one buffer, and the layout) and unpickles as the plain dict of tensors. Not a Mapping on
    purpose: the DataLoader's ``default_convert`` copies mappings (which would unpack it in the
    worker) but passes other objects through."""

    __slots__ = ("item",)

    def __init__(self, item: Mapping):
        self.item = item

    def __reduce__(self):
        layout, parts, total = _plan(self.item)
        ring = _worker_ring()
        slot = ring.take(total) if ring is not None else None
        if slot is None:
            buf = bytearray(max(total, 1))
            _fill(np.frombuffer(buf, dtype=np.uint8), parts)
            return _unpack_item, (buf, layout)
        k, tensor, first_send = slot
        _fill(tensor.numpy(), parts)
        return _unpack_from_ring, (ring.token, k, total, layout, tensor if first_send else None,
                                   ring.control if ring.send_control() else None)

    # a custom ``collate_fn`` in the worker reads it like the dict it carries
    def __getitem__(self, key):
        return self.item[key]

    def __iter__(self):
        return iter(self.item)

    def __len__(self) -> int:
        return len(self.item)

    def __contains__(self, key) -> bool:
        return key in self.item

    def keys(self):
        return self.item.keys()

    def values(self):
        return self.item.values()

    def items(self):
        return self.item.items()

    def get(self, key, default=None):
        return self.item.get(key, default)


def _plan(item: Mapping) -> tuple[list, list, int]:
    """Where every top-level tensor (CSR components included) goes in one buffer, 64-byte aligned:
    (layout, [(start, tensor)], total bytes); other values stay in the layout as they are."""
    parts, layout, total = [], [], 0

    def place(t: torch.Tensor):
        nonlocal total
        t = t.contiguous()
        start = -(-total // _ALIGN) * _ALIGN
        parts.append((start, t))
        total = start + t.numel() * t.element_size()
        return (start, t.dtype, tuple(t.shape))

    for key, value in item.items():
        if isinstance(value, torch.Tensor) and value.layout == torch.sparse_csr:
            layout.append((key, "csr", (place(value.crow_indices()), place(value.col_indices()),
                                        place(value.values()), tuple(value.shape))))
        elif isinstance(value, torch.Tensor) and value.layout == torch.strided:
            layout.append((key, "dense", place(value)))
        else:
            layout.append((key, "value", value))
    return layout, parts, total


def _fill(raw: np.ndarray, parts: list) -> None:
    for start, t in parts:
        nbytes = t.numel() * t.element_size()
        if nbytes:
            raw[start:start + nbytes] = t.reshape(-1).view(torch.uint8).numpy()


# -- the worker's ring ---------------------------------------------------------------------------

class _Ring:
    """A worker's shared-memory slots and their flags (1: the main process has not copied it yet)."""

    def __init__(self):
        self.pid = os.getpid()
        self.token = f"{self.pid}-{secrets.token_hex(6)}"
        self.control = torch.zeros(RING_SLOTS, dtype=torch.uint8).share_memory_()
        self.slots: list = [None] * RING_SLOTS
        self.sent = [False] * RING_SLOTS
        self.control_sent = False
        self.next = 0

    def take(self, nbytes: int):
        """(slot, its tensor, whether the main process still needs the tensor) or None (all held)."""
        flags = self.control.numpy()
        for k in (*range(self.next, RING_SLOTS), *range(self.next)):
            if flags[k] == 0:
                break
        else:
            return None
        self.next = (k + 1) % RING_SLOTS
        slot = self.slots[k]
        if slot is None or slot.numel() < nbytes:  # grown with some room, so similar sizes fit
            slot = torch.empty(max(nbytes + nbytes // 4, 4096), dtype=torch.uint8).share_memory_()
            self.slots[k], self.sent[k] = slot, False
        self.control[k] = 1
        first = not self.sent[k]
        self.sent[k] = True
        return k, slot, first

    def send_control(self) -> bool:
        first = not self.control_sent
        self.control_sent = True
        return first


_RING: _Ring | None = None


def _worker_ring() -> _Ring | None:
    """This DataLoader worker's ring (made on first use); None in the main process or when off."""
    global _RING
    if not RING_ENABLED or get_worker_info() is None:
        return None
    if _RING is None or _RING.pid != os.getpid():
        _RING = _Ring()
    return _RING


# -- the main process ----------------------------------------------------------------------------

_RECEIVED: dict = {}  # ring token -> {"control": tensor, "slots": {slot: tensor}}


def _unpack_from_ring(token: str, k: int, total: int, layout, slot_tensor, control) -> dict:
    ring = _RECEIVED.get(token)
    if ring is None:
        _forget_exited_workers()
        ring = _RECEIVED[token] = {"control": None, "slots": {}}
    if control is not None:
        ring["control"] = control
    if slot_tensor is not None:
        ring["slots"][k] = slot_tensor
    lease = ring["slots"][k].numpy()[:max(total, 1)]
    weakref.finalize(lease, _release, ring["control"], k)  # when no tensor shares the slot any more
    with warnings.catch_warnings():
        buf = torch.frombuffer(lease, dtype=torch.uint8)
    del lease
    return _unpack_item(buf, layout)


def _release(control: torch.Tensor, k: int) -> None:
    control[k] = 0  # the worker may write the slot again


def _forget_exited_workers() -> None:
    """Drop the rings of worker processes that have ended (their slots are of no more use)."""
    for token in list(_RECEIVED):
        try:
            os.kill(int(token.split("-", 1)[0]), 0)
        except ProcessLookupError:
            del _RECEIVED[token]
        except (OSError, ValueError):
            pass


def _view(buf: torch.Tensor, spec) -> torch.Tensor:
    start, dtype, shape = spec
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    return buf[start:start + n].view(dtype).view(shape)


def _unpack_item(buf, layout) -> dict:
    if not isinstance(buf, torch.Tensor):
        with warnings.catch_warnings():  # a bytearray is writable; torch warns for read-only buffers only
            buf = torch.frombuffer(buf, dtype=torch.uint8) if len(buf) else torch.empty(0, dtype=torch.uint8)
    out = {}
    for key, kind, spec in layout:
        if kind == "dense":
            out[key] = _view(buf, spec)
        elif kind == "csr":
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*[Ss]parse CSR tensor support is in beta.*")
                out[key] = torch.sparse_csr_tensor(_view(buf, spec[0]), _view(buf, spec[1]), _view(buf, spec[2]),
                                                   size=spec[3], check_invariants=False)
        else:
            out[key] = spec
    return out
