"""The Deserializer protocol every format implements.

This is CNTK's contract, kept: a deserializer names its streams, describes its chunks
(id, number of sequences, number of samples) without loading them, and loads one chunk
at a time as columnar sequences. Randomizers, packers, MinibatchSource and conversion
work against this protocol only, never against a file layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Protocol, runtime_checkable

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

    @property
    def streams(self) -> list[StreamSpec]:
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return list(self._chunks)

    def sequence_keys(self, chunk_id: int):
        return self.load_chunk(chunk_id).keys

    def iter_chunks(self, threads: int = 2, prefetch: int | None = None, **_) -> Iterator[ChunkData]:
        """Every chunk in order, ``threads`` decoded at once."""
        yield from load_in_order(self.load_chunk, len(self._chunks), threads=threads, prefetch=prefetch,
                                 name=f"recordkit-{type(self).__name__}")

    def __iter__(self) -> Iterator[Sequence]:
        for chunk in self.iter_chunks():
            yield from chunk


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
