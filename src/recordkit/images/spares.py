"""``Spares``: arrays handed out earlier, written again once nothing but the list refers to them.

A batch of float32 images (64 x 3 x 224 x 224: 38 MB) is larger than the allocator keeps for
reuse: every new one is fresh memory the kernel maps and zeroes page by page. An array kept here
is handed out again only when nobody else holds it -- no array, view, tensor or buffer export of
it is left (a raw address or a weak reference kept without the array is not a reference) --, so
reuse never changes what anyone holds; a taken array leaves the list until it is given back, so
two threads never write the same one. An owner stays picklable: a copy of it has no spares.
"""
from __future__ import annotations

import sys
import threading

_lock = threading.Lock()  # one for every list (a Spares pickles without one)


def _refs(items: list, k: int) -> int:
    """``items[k]``'s reference count as seen from here (compared with :data:`_LONE`, counted the same way)."""
    return sys.getrefcount(items[k])


#: :func:`_refs` of an object nothing but its list holds (None where the interpreter keeps no counts).
_LONE = _refs([object()], 0) if hasattr(sys, "getrefcount") else None


class Spares:
    """The last ``keep`` arrays handed out, to be written again once nothing else refers to them."""

    def __init__(self, keep: int):
        self.keep = int(keep)
        self.items: list = []

    def take(self, shape: tuple | None = None, dtype=None):
        """A kept array (of ``shape`` and ``dtype`` when given) nothing else refers to, out of the list; or None."""
        if _LONE is None:
            return None
        with _lock:
            items = self.items
            for k in range(len(items)):
                if _refs(items, k) == _LONE and (shape is None or (
                        items[k].shape == tuple(shape) and items[k].dtype == dtype)):
                    return items.pop(k)
        return None

    def give(self, array) -> None:
        """``array`` is handed out now: keep it (forgetting the oldest beyond ``keep``)."""
        with _lock:
            self.items = (self.items + [array])[-self.keep:]

    def __getstate__(self) -> dict:
        return {"keep": self.keep, "items": []}
