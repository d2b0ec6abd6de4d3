"""recordkit's OFRecordReader with OneFlow 0.9's exact random streams (for ``flow.nn.OFRecordReader``).

The reading, framing, error handling and rank split are recordkit's ``OFRecordReader``; two
orders are replaced by OneFlow's draw-for-draw equivalents (``_random``):

* ``random_shuffle``: OneFlow's ``RandomShuffleDataset`` -- fill a buffer with
  ``shuffle_buffer_size`` records, then for every next record swap it with the buffer slot
  ``uniform_int(0, size - 1)`` of ``std::default_random_engine(seed_seq{seed})`` and emit the
  slot's old record (the buffer runs across epoch ends: the stream is endless);
* ``shuffle_after_epoch``: before epoch e >= 1 the global part list is shuffled again (cumulatively)
  with ``std::shuffle(..., std::mt19937(524287 + e))``, then split among ranks.
"""
from __future__ import annotations

from typing import Iterator

from recordkit.compat.oneflow import _random
from recordkit.formats.ofrecord.reader import OFRecordReader


class OneFlowOrderReader(OFRecordReader):
    _order: tuple = (0, None)  # (epoch, global part order of that epoch): the shuffles are cumulative

    def _part_order(self, epoch: int) -> list[str]:
        """The global part order of ``epoch`` as OneFlow shuffles it (``std::shuffle`` over
        ``std::mt19937``, cumulatively); the base class splits it among the ranks."""
        if not self.shuffle_after_epoch:
            return list(self.paths)
        done, order = self._order
        if order is None or epoch < done:
            done, order = 0, list(self.paths)
        order = list(order)
        for e in range(done + 1, epoch + 1):
            _random.std_shuffle(order, _random.MT19937(_random.ONEFLOW_DATASET_SEED + e))
        self._order = (epoch, order)
        return list(order)

    def frames(self) -> Iterator[tuple]:
        stream = self._stream()
        if not self.random_shuffle:
            yield from stream
            return
        engine = _random.MinStdRand0(self.seed)
        buffer = []
        for item in stream:
            if len(buffer) < self.shuffle_buffer_size:
                buffer.append(item)
                continue
            j = engine.uniform_int(0, len(buffer) - 1)
            buffer[j], item = item, buffer[j]
            yield item
        # a finite stream (epochs=N) ends: OneFlow never gets here; drain in buffer order
        yield from buffer
