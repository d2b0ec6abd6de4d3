"""Where a DataLoader's time goes per item (the breakdown under the torch_loader.py table).

    .venv/bin/python benchmarks/torch_item_costs.py [--cbf bench-data/dense.cbf] [--sweeps 5]

* ``direct``: the MinibatchSource + to_torch loop's wall and CPU time per minibatch;
* ``protocol``: a DataLoader worker yielding small ints (DataLoader's own per-item cost), and
  yielding opaque 450 KB / 4.5 MB bytearrays (what the pipe costs per item of that size);
* ``worker``: MinibatchDataset with 1 fork worker, ring on and off: the time the worker takes to make
  each minibatch, the time it is away (queue put, waiting for the next index), and the time the main
  process waits in ``next()``.
"""
from __future__ import annotations

import argparse
import functools
import os
import sys
import time

from torch.utils.data import DataLoader, IterableDataset


class _Opaque:
    """A bytearray the DataLoader passes through untouched (a bare one is a Sequence it would convert)."""

    def __init__(self, data):
        self.data = data

    def __reduce__(self):
        return _Opaque, (self.data,)


class _Items(IterableDataset):
    def __init__(self, n, payload):
        self.n, self.payload = n, payload

    def __iter__(self):
        for i in range(self.n):
            yield i if self.payload == 0 else _Opaque(bytearray(self.payload))


def protocol(payload: int, n: int = 400) -> float:
    """Steady ms per item of a fork worker yielding ``payload``-byte items."""
    first, k = None, 0
    for _ in DataLoader(_Items(n, payload), batch_size=None, num_workers=1, multiprocessing_context="fork"):
        k += 1
        if first is None:
            first = time.perf_counter()
    return (time.perf_counter() - first) / (k - 1) * 1e3


def make_source(path, sweeps):
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.cbf import CBFReader
    return MinibatchSource(CBFReader(path), randomize=False, max_sweeps=sweeps)


def direct(path, sweeps, mb):
    from recordkit.integrations.torch import to_torch
    src = make_source(path, sweeps)
    t0, c0, n = time.perf_counter(), time.process_time(), 0
    while (m := src.next_minibatch(mb)) is not None:
        to_torch(m)
        n += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return wall / n * 1e3, cpu / n * 1e3


def _timed_dataset():
    from recordkit.integrations.torch import MinibatchDataset

    class Timed(MinibatchDataset):
        def _iterate(self):
            it, busy, away, n, last = super()._iterate(), 0.0, 0.0, 0, None
            while True:
                t = time.perf_counter()
                if last is not None:
                    away += t - last
                try:
                    x = next(it)
                except StopIteration:
                    break
                busy += time.perf_counter() - t
                n += 1
                last = time.perf_counter()
                yield x
            print(f"    worker: makes a minibatch in {busy / n * 1e3:.3f} ms, away {away / n * 1e3:.3f} ms",
                  file=sys.stderr)
    return Timed


def worker(path, sweeps, mb, ring):
    import recordkit.integrations.torch_transfer as transfer
    transfer.RING_ENABLED = ring
    ds = _timed_dataset()(functools.partial(make_source, path, sweeps), mb)
    it = iter(DataLoader(ds, batch_size=None, num_workers=1, multiprocessing_context="fork"))
    n, wait, first = 0, 0.0, None
    while True:
        t = time.perf_counter()
        try:
            item = next(it)
        except StopIteration:
            break
        if first is None:
            first = time.perf_counter()
            continue
        wait += time.perf_counter() - t
        n += 1
        int(item["lengths"].sum())
    return (time.perf_counter() - first) / n * 1e3, wait / n * 1e3


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cbf", default="bench-data/dense.cbf")
    ap.add_argument("--sweeps", type=int, default=5)
    ap.add_argument("--mb", type=int, default=1024)
    args = ap.parse_args(argv)
    if not os.path.exists(args.cbf):
        sys.exit(f"{args.cbf}: missing (see benchmarks/torch_loader.py)")
    wall, cpu = direct(args.cbf, args.sweeps, args.mb)
    print(f"direct loop: {wall:.3f} ms wall, {cpu:.3f} ms CPU per minibatch ({cpu / wall:.2f} cores)")
    for payload in (0, 450_000, 4_500_000):
        print(f"DataLoader protocol, 1 fork worker, {payload:,}-byte items: {protocol(payload):.3f} ms per item")
    for ring in (True, False):
        print(f"MinibatchDataset, 1 fork worker, {'ring' if ring else 'pipe only'}:", flush=True)
        per, wait = worker(args.cbf, args.sweeps, args.mb, ring)
        time.sleep(0.2)  # the worker's line first
        print(f"    main: {per:.3f} ms per minibatch, of which waiting in next() {wait:.3f} ms")


if __name__ == "__main__":
    main()
