"""The Deserializer protocol every format implements.

This is CNTK's contract, kept: a deserializer names its streams, describes its chunks
(id, number of sequences, number of samples) without loading them, and loads one chunk
at a time as columnar sequences. Randomizers, packers, MinibatchSource and conversion
work against this protocol only, never against a file layout.
"""
from __future__ import annotations

from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, runtime_checkable

import numpy as np

from recordkit.engine.chunk import ChunkData, Sequence
from recordkit.engine.streams import StreamSpec


@dataclass(frozen=True)
class ChunkInfo:
    """What is known about a chunk before loading it.

    ``num_samples`` is the index's estimate of the chunk's samples (for CTF: the rows
    of its sequences), which is what minibatch and epoch sizes are counted in.
    ``offset``/``size`` are the chunk's byte range in its file, where that exists.
    """
    id: int
    num_sequences: int
    num_samples: int
    offset: int = 0
    size: int = 0


@runtime_checkable
class Deserializer(Protocol):
    @property
    def streams(self) -> list[StreamSpec]: ...

    @property
    def chunks(self) -> list[ChunkInfo]: ...

    def load_chunk(self, chunk_id: int) -> ChunkData: ...


class DeserializerBase:
    """The optional half of the protocol with its defaults, for readers that keep their streams in
    ``self._streams`` and their chunk table in ``self._chunks`` and implement ``load_chunk``:
    copies of both as ``streams``/``chunks``, ``iter_chunks`` decoding ``threads`` chunks at once
    in order (``load_in_order``), iteration over sequences, and ``sequence_keys`` by decoding the
    chunk (override where keys are cheaper to get)."""

    _streams: list
    _chunks: list
    if TYPE_CHECKING:  # each reader's own
        load_chunk: Callable[..., ChunkData]

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    def sequence_keys(self, chunk_id: int) -> np.ndarray:
        return self.load_chunk(chunk_id).keys

    def iter_chunks(self, threads: int = 2, prefetch: int | None = None, **_) -> Iterator[ChunkData]:
        """Every chunk in order, ``threads`` decoded at once."""
        yield from load_in_order(self.load_chunk, len(self._chunks), threads=threads, prefetch=prefetch,
                                 name=f"recordkit-{type(self).__name__}")

    def __iter__(self) -> Iterator[Sequence]:
        for chunk in self.iter_chunks():
            yield from chunk


class WrapsDeserializers:
    """A deserializer made of others (``ChunkPartition``, ``Mixture``): ``close`` closes each of
    ``wrapped()``, ``with`` closes it."""

    def wrapped(self) -> list:  # pragma: no cover - each wrapper names its own
        raise NotImplementedError

    def close(self) -> None:
        for d in self.wrapped():
            close = getattr(d, "close", None)
            if close is not None:
                close()

    @contextmanager
    def retaining_buffers(self) -> Iterator[None]:
        """Each wrapped deserializer's ``retaining_buffers`` at once: the chunk cache opens it
        around a burst of loads (every chunk a minibatch waits for), so a CTF file behind a
        ``ChunkPartition`` or in a ``Mixture`` reuses its text buffers within the burst as it does
        on its own (a fresh text buffer per load costs its page faults)."""
        with ExitStack() as stack:
            for d in self.wrapped():
                stack.enter_context(retaining_buffers(d))
            yield

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def iter_sequences(deserializer: Deserializer) -> Iterator[Sequence]:
    """Every sequence of a deserializer in storage order."""
    for info in deserializer.chunks:
        yield from deserializer.load_chunk(info.id)


def load_in_order(load, n: int, *, threads: int = 2, prefetch: int | None = None,
                  name: str = "recordkit-chunks") -> Iterator:
    """``load(0) .. load(n-1)`` in order, ``threads`` at a time on a pool (the loaders release the
    GIL while decoding), at most ``prefetch`` ahead; pending loads are cancelled when the consumer
    stops or a load fails. The ``iter_chunks`` of every reader that decodes chunk by chunk."""
    if threads <= 1 or n <= 1:
        for i in range(n):
            yield load(i)
        return
    from concurrent.futures import ThreadPoolExecutor
    prefetch = max(threads, prefetch or threads)
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name) as pool:
        pending, nxt = {}, 0
        try:
            for i in range(n):
                while nxt < n and nxt < i + prefetch:
                    pending[nxt] = pool.submit(load, nxt)
                    nxt += 1
                yield pending.pop(i).result()
        finally:
            for fut in pending.values():
                fut.cancel()


# -- the optional half of the protocol, asked in one place --------------------------------------------
#
# Beyond streams/chunks/load_chunk, a deserializer MAY offer (callers use these functions, never
# getattr or signatures of their own):
#   sequence_lengths(chunk_id) -> int array   the index's sample count per sequence, without decoding
#                                             (None: it cannot tell; then ChunkInfo.num_samples is spread)
#   sequence_keys(chunk_id) -> uint64 array   keys without decoding the values
#   keys_are_ids: bool                        keys are ids from the file, not ordinals (else a CTF
#                                             index's id_mode says so)
#   estimated_chunk_bytes() -> int array      decoded bytes per chunk (engine/memory.py)
#   all_sequence_lengths() -> (flat, counts)  every chunk's sequence_lengths at once, flat in chunk
#                                             order, and the sequences of each chunk
#   load_chunk(chunk_id, threads=N)           may use N threads on one chunk
#   load_chunks(chunk_ids) -> [ChunkData]     several chunks at once, each ``load_chunk``'s result (CBF:
#                                             adjacent ones in one read and one decode); raises the
#                                             first wrong chunk's error. Without it: load_chunk in turn
#   load_joined(chunk_ids) -> [(ids, ChunkData)] the chunks as units: each run load_chunks would
#                                             decode together one ChunkData of all its sequences
#   run_bytes: int                            the most bytes load_chunks reads at once for chunks
#                                             smaller than that (what a load in flight holds: plan.py)
#   iter_chunks(threads=N)                    every chunk in order, N decoded at once
#   path                                      what error messages and reports name it by
#   summary() -> dict                         what it tolerated (errors skipped under a budget, warnings)

def sequence_lengths(d, chunk_id: int):
    """The index lengths of a chunk's sequences, or None when the deserializer cannot tell them
    without decoding."""
    get = getattr(d, "sequence_lengths", None)
    return None if get is None else get(chunk_id)


def all_sequence_lengths(d):
    """``d.all_sequence_lengths()`` -- (every chunk's index lengths flat in chunk order, sequences per
    chunk) -- where the deserializer has it, else None."""
    get = getattr(d, "all_sequence_lengths", None)
    return None if get is None else get()


def has_keys(d) -> bool:
    return getattr(d, "sequence_keys", None) is not None


def keys_are_ids(d) -> bool:
    """Whether the keys are ids from the file (a CTF file in id mode, records with a key), not ordinals."""
    said = getattr(d, "keys_are_ids", None)
    if said is not None:
        return bool(said)
    return bool(getattr(getattr(d, "index", None), "id_mode", False))


def chunk_sequence_keys(d, chunk_id: int):
    """A chunk's keys: ``sequence_keys`` where the deserializer has it, else by loading the chunk."""
    get = getattr(d, "sequence_keys", None)
    return get(chunk_id) if get is not None else d.load_chunk(chunk_id).keys


def takes_rows(d) -> bool:
    """Whether ``d.take_sequences(rows)`` reads the sequences at ``rows`` (positions in storage order)
    without decoding their chunks (Lance's ``take``): what random access asks for items."""
    return callable(getattr(d, "take_sequences", None))


def takes_threads(d) -> bool:
    """Whether ``d.load_chunk`` takes ``threads=`` (asked once per deserializer by its callers)."""
    return accepts_keyword(d.load_chunk, "threads")


def splits_chunks(d) -> bool:
    """Whether ``d`` parses one chunk on several threads when ``load_chunk(cid, threads=N)`` offers
    them (CTF: byte-balanced pieces), so that a caller waiting on several chunks does better
    loading them one after another with every thread than one chunk per thread: chunks of unequal
    size leave threads idle (measured: four CTF chunks of 31, 31, 31, 4 MB, 240 ms one per thread
    on 2 threads, 124 ms one after another with both). A reader says so by ``splits_chunks =
    True``; wrappers answer for what they wrap."""
    return bool(getattr(d, "splits_chunks", False))


def retaining_buffers(d):
    """``d.retaining_buffers()`` where the deserializer has it (CTF: its chunk loads pass their
    text buffers on to the next load inside it), else a context that does nothing."""
    retain = getattr(d, "retaining_buffers", None)
    if retain is None:
        return nullcontext()
    return retain()


def loads_batches(d) -> bool:
    """Whether ``d`` has ``load_chunks`` (asked once per deserializer by its callers)."""
    return callable(getattr(d, "load_chunks", None))


def loads_joined(d) -> bool:
    """Whether ``d`` has ``load_joined`` (runs of small chunks decoded into one ChunkData each)."""
    return callable(getattr(d, "load_joined", None))


def load_chunks(d, chunk_ids) -> list[ChunkData]:
    """``d.load_chunks(chunk_ids)`` where the deserializer has it, else ``load_chunk`` of each in turn."""
    batch = getattr(d, "load_chunks", None)
    if callable(batch):
        return batch(chunk_ids)
    return [d.load_chunk(c) for c in chunk_ids]


def run_bytes(d) -> int:
    """The most bytes ``d.load_chunks`` reads at once for small chunks (0: a chunk at a time)."""
    return int(getattr(d, "run_bytes", 0) or 0)


def load_chunk(d, chunk_id: int, threads: int | None, takes: bool) -> ChunkData:
    """``d.load_chunk(chunk_id, threads=threads)`` where it takes threads (``takes``: what
    ``takes_threads(d)`` said) and some are offered, else ``d.load_chunk(chunk_id)``, all the
    protocol asks."""
    if threads is not None and takes:
        return d.load_chunk(chunk_id, threads=threads)
    return d.load_chunk(chunk_id)


def name_of(d, default: str | None = None) -> str:
    """What messages call a deserializer: its ``path``, else ``default``, else its type's name."""
    import os
    path = getattr(d, "path", None)
    return os.fspath(path) if path is not None else (default if default is not None else type(d).__name__)


def tolerated(d) -> dict:
    """What the deserializer tolerated (``summary()``), or {} when it keeps no such account."""
    get = getattr(d, "summary", None)
    return get() if get is not None else {}


def all_chunks(d, threads: int = 2) -> Iterator[ChunkData]:
    """Every chunk in order: ``iter_chunks`` (``threads`` at once where it takes them), else one
    ``load_chunk`` after another."""
    it = getattr(d, "iter_chunks", None)
    if it is not None:
        yield from (it(threads=threads) if accepts_keyword(it, "threads") else it())
        return
    for info in d.chunks:
        yield d.load_chunk(info.id)


def accepts_keyword(fn, name: str) -> bool:
    """Whether ``fn`` takes keyword ``name`` (e.g. ``load_chunk(..., threads=N)``): asked once,
    instead of retrying on a TypeError, which would also swallow a TypeError raised inside a
    reader and load the chunk twice."""
    import inspect
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
