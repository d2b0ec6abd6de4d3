"""Feeding training workers from a Ray dataset: engine minibatches out of Ray batches.

``Dataset.streaming_split(n)`` gives n ``DataIterator``s that share one streaming
execution, each handing its worker a disjoint share of the blocks. A worker wants what a
``MinibatchSource`` gives: padded dense arrays with masks, sparse CSR matrices, keys and
lengths. ``minibatches_from_ray`` turns each Ray batch (sequences in the column layout of
``recordkit.integrations.ray``) into exactly that: an engine ``Minibatch``, packed by the
same compiled gather kernels, so ``recordkit.integrations.torch.to_torch`` turns it into
tensors and training code written against ``MinibatchSource`` runs unchanged.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from recordkit.engine.minibatch import Minibatch, counted, pack_from_chunks
from recordkit.integrations.ray._arrow import arrow_to_chunk
from recordkit.integrations.chunk_plan import stream_specs as _streams

__all__ = ["minibatches_from_ray", "minibatch_from_batch"]


def minibatch_from_batch(batch, streams, *, end_of_sweep: bool = False) -> Minibatch:
    """One Ray batch (Arrow table, pandas frame or dict of arrays) of sequences as a Minibatch."""
    specs = _streams(streams)
    chunk = arrow_to_chunk(batch, specs)
    n = len(chunk)
    packed, keys, lengths, total = pack_from_chunks([chunk], np.zeros(n, dtype=np.int64),
                                                    np.arange(n, dtype=np.int64), specs)
    return counted(Minibatch(packed, keys, lengths, end_of_sweep=end_of_sweep, sweep=0), total)


def minibatches_from_ray(source, streams, batch_size: int, *, drop_last: bool = False,
                         **iter_batches_options) -> Iterator[Minibatch]:
    """Minibatches of ``batch_size`` sequences from a ``Dataset`` or a ``DataIterator``.

    ``source``: typically one of the iterators of ``ds.streaming_split(n)``, each used by one
    training worker. ``streams``: the streams to pack (``StreamSpec``s or
    ``"NAME=FORMAT:DIM"`` strings; the dims size the sparse matrices). The last minibatch
    has ``end_of_sweep=True``. ``iter_batches_options`` go to ``iter_batches``
    (``prefetch_batches``, ``local_shuffle_buffer_size``, ...). Batches count sequences
    (Ray's rows), not samples as ``MinibatchSource`` does.
    """
    if int(batch_size) <= 0:
        raise ValueError("batch_size must be > 0")
    specs = _streams(streams)
    batches = source.iter_batches(batch_size=int(batch_size), batch_format="pyarrow", drop_last=drop_last,
                                  **iter_batches_options)
    pending = None
    for batch in batches:
        if batch.num_rows == 0:
            continue
        if pending is not None:
            yield minibatch_from_batch(pending, specs)
        pending = batch
    if pending is not None:
        yield minibatch_from_batch(pending, specs, end_of_sweep=True)
