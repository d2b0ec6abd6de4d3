"""PyTorch DataLoader over MinibatchDataset vs iterating MinibatchSource directly.

    .venv/bin/python benchmarks/torch_loader.py [--cbf bench-data/dense.cbf] [--mb 1024] [--repeat 3]

One process runs every variant side by side on the same CBF file (file order, one sweep,
minibatches of --mb samples):

* ``direct``: ``MinibatchSource(CBFReader(path)).next_minibatch(mb)`` until the sweep ends, each
  minibatch turned into tensors with ``to_torch`` (what a training loop without a DataLoader does);
* ``workers=K``: ``DataLoader(MinibatchDataset(...), batch_size=None, num_workers=K)`` for K = 0, 1, 2,
  with the start method (fork / forkserver / spawn), ``persistent_workers`` and ``pin_memory``;
  ``minibatch_collate``: the same with ``collate_fn=minibatch_collate`` (no ``default_convert`` walk);
  ``pipe only``: the same with the workers' shared-memory ring off (integrations/torch_transfer.py).

For each: the time to the first minibatch (start-up: worker processes, their import of torch and
recordkit, opening the file), the steady-state rate (samples/s from the first minibatch to the
last) and the whole epoch; with ``persistent_workers`` the second epoch is timed too (workers
already running). Best of --repeat per variant. The ratio column is steady-state samples/s
relative to ``direct``. Then --rounds rounds of the in-process variants interleaved, so the machine's
slow and fast phases fall on all of them (median epochs, ratios and the time each adds an item):
direct; ``MinibatchDataset`` iterated alone; workers=0 with and without ``minibatch_collate``; and,
as a diagnostic of where the rest goes, workers=0 with ``minibatch_collate`` and torch's per-item
``record_function`` replaced by a null context.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time


SWEEPS = 1  # --sweeps: several make the steady state include every chunk's decode


def make_source(path, sweeps=1):
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.cbf import CBFReader
    return MinibatchSource(CBFReader(path), randomize=False, max_sweeps=sweeps)


def run_direct(path, mb):
    from recordkit.integrations.torch import to_torch
    t0 = time.perf_counter()
    source = make_source(path, SWEEPS)
    first = None
    samples = count = 0
    while True:
        m = source.next_minibatch(mb)
        if m is None:
            break
        item = to_torch(m)
        samples += int(item["lengths"].sum())
        count += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    return dict(first=first - t0, total=end - t0, steady=samples / max(end - first, 1e-9), samples=samples,
                count=count, per_item=(end - first) / max(count - 1, 1))


def run_dataset_alone(path, mb):
    """``MinibatchDataset`` iterated without a DataLoader (what the loader adds is the rest)."""
    from recordkit.integrations.torch import MinibatchDataset
    t0 = time.perf_counter()
    first = None
    samples = 0
    for item in MinibatchDataset(functools.partial(make_source, path, SWEEPS), mb):
        samples += int(item["lengths"].sum())
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    return dict(first=first - t0, total=end - t0, steady=samples / max(end - first, 1e-9), samples=samples)


class _NoRecordFunction:
    """Stands in for ``torch.autograd.profiler.record_function`` (diagnostic rows only): the
    DataLoader enters one around every item it hands out, profiler or not."""

    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def run_loader(path, mb, workers, context=None, persistent=False, pin=False, epochs=1, ring=True, collate=False,
               record_function=True):
    import torch
    from torch.utils.data import DataLoader
    import recordkit.integrations.torch_transfer as transfer
    from recordkit.integrations.torch import MinibatchDataset, minibatch_collate
    transfer.RING_ENABLED = ring and transfer.RING_ENABLED  # fork workers inherit it
    os.environ["RECORDKIT_TORCH_RING"] = "1" if ring else "0"  # spawn/forkserver workers read it
    ds = MinibatchDataset(functools.partial(make_source, path, SWEEPS), mb)
    kwargs = dict(batch_size=None, num_workers=workers, pin_memory=pin)
    if collate:
        kwargs["collate_fn"] = minibatch_collate
    if workers:
        kwargs.update(persistent_workers=persistent, multiprocessing_context=context)
    loader = DataLoader(ds, **kwargs)
    out = {}
    saved_rf = torch.autograd.profiler.record_function
    if not record_function:
        torch.autograd.profiler.record_function = _NoRecordFunction
    try:
        _epochs(loader, epochs, out)
    finally:
        torch.autograd.profiler.record_function = saved_rf
    del loader
    transfer.RING_ENABLED = transfer.platform.machine().lower() in ("x86_64", "amd64", "i686", "x86")
    os.environ.pop("RECORDKIT_TORCH_RING", None)
    torch.set_num_threads(torch.get_num_threads())
    return out


def _epochs(loader, epochs, out):
    for epoch in range(epochs):
        t0 = time.perf_counter()
        first = None
        samples = 0
        for item in loader:
            samples += int(item["lengths"].sum())
            if first is None:
                first = time.perf_counter()
        end = time.perf_counter()
        out[epoch] = dict(first=first - t0, total=end - t0, steady=samples / max(end - first, 1e-9),
                          samples=samples)


class ReadyItems:
    """The transport floor: a worker that yields one ready-made item ``count`` times.

    The item is the sweep's first minibatch as ``MinibatchDataset`` makes it (tensors and
    ``__state__``), wrapped the same way for the trip to the main process, so what a DataLoader
    epoch over it costs is what the workers' protocol and the transfer cost without any reading:
    the least a worker can add to the direct loop. ``small``: a 1-element tensor instead (the
    DataLoader protocol alone). Built lazily in the worker (fork only: a module-level class)."""

    def __init__(self, path, mb, count, small=False):
        self.path, self.mb, self.count, self.small = path, mb, count, small

    def __iter__(self):
        import torch
        from torch.utils.data import get_worker_info
        from recordkit.integrations.torch import MinibatchDataset
        from recordkit.integrations.torch_transfer import _PackedItem
        info = get_worker_info()
        share = self.count if info is None else len(range(info.id, self.count, info.num_workers))
        if self.small:
            item = {"lengths": torch.ones(1, dtype=torch.int64)}
        else:
            made = MinibatchDataset(functools.partial(make_source, self.path, 1), self.mb)._iterate()
            item = dict(getattr(first := next(made), "item", first))  # a worker's item is wrapped (_PackedItem)
            made.close()  # closes the source now, not whenever the generator is collected
        for _ in range(share):
            yield _PackedItem(item) if info is not None else item


def run_floor(path, mb, count, workers, small=False):
    """An epoch of ``count`` ready items through ``DataLoader(num_workers=workers)`` (fork)."""
    from torch.utils.data import DataLoader, IterableDataset
    ds = type("ReadyItemsDataset", (ReadyItems, IterableDataset), {})(path, mb, count, small)
    loader = DataLoader(ds, batch_size=None, num_workers=workers,
                        multiprocessing_context="fork" if workers else None)
    t0 = time.perf_counter()
    first = None
    n = 0
    for item in loader:
        n += 1
        if first is None:
            first = time.perf_counter()
    end = time.perf_counter()
    del loader
    return dict(first=first - t0, total=end - t0, items=n, per_item=(end - first) / max(n - 1, 1))


def best(runs, key="total"):
    return min(runs, key=lambda r: r[key])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cbf", default="bench-data/dense.cbf")
    ap.add_argument("--mb", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sweeps", type=int, default=1,
                    help="sweeps per epoch (1: the steady state leaves out the first chunk's decode)")
    ap.add_argument("--rounds", type=int, default=7,
                    help="interleaved rounds of the in-process variants (0: none)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    global SWEEPS
    SWEEPS = args.sweeps
    if not os.path.exists(args.cbf):
        sys.exit(f"{args.cbf}: missing (python benchmarks/gen_ctf_corpora.py bench-data --mb 100; "
                 f"recordkit convert bench-data/dense.ctf {args.cbf} --stream features=dense:100 "
                 f"--stream labels=dense:10)")
    import torch  # noqa: F401  (imported once, outside every timing)
    rows = []
    direct = best([run_direct(args.cbf, args.mb) for _ in range(args.repeat)])
    rows.append(("direct (MinibatchSource + to_torch)", direct))
    variants = [("workers=0", dict(workers=0)), ("workers=0 minibatch_collate", dict(workers=0, collate=True))]
    for ctx in ("fork", "forkserver", "spawn"):
        for k in (1, 2):
            variants.append((f"workers={k} {ctx}", dict(workers=k, context=ctx)))
            if ctx == "fork":  # the same without the shared-memory ring: every item by the pipe
                variants.append((f"workers={k} fork, pipe only", dict(workers=k, context=ctx, ring=False)))
    variants.append(("workers=2 fork minibatch_collate", dict(workers=2, context="fork", collate=True)))
    variants.append(("workers=2 fork pin_memory", dict(workers=2, context="fork", pin=True)))
    for name, kw in variants:
        rows.append((name, best([run_loader(args.cbf, args.mb, **kw)[0] for _ in range(args.repeat)])))
    runs = [run_loader(args.cbf, args.mb, workers=2, context="fork", persistent=True, epochs=2)
            for _ in range(args.repeat)]
    rows.append(("workers=2 fork persistent, epoch 1", best([r[0] for r in runs])))
    rows.append(("workers=2 fork persistent, epoch 2", best([r[1] for r in runs])))
    # in-process variants interleaved round by round (the machine's phases hit all alike): medians
    in_process = {
        "direct": lambda: run_direct(args.cbf, args.mb),
        "MinibatchDataset alone (no DataLoader)": lambda: run_dataset_alone(args.cbf, args.mb),
        "workers=0": lambda: run_loader(args.cbf, args.mb, workers=0)[0],
        "workers=0 minibatch_collate": lambda: run_loader(args.cbf, args.mb, workers=0, collate=True)[0],
        "  the same, record_function nulled *": lambda: run_loader(args.cbf, args.mb, workers=0, collate=True,
                                                                  record_function=False)[0],
    }
    rounds = {name: [] for name in in_process}
    for _ in range(args.rounds):
        for name, run in in_process.items():
            rounds[name].append(run()["total"])
    floors = []
    for k in (1, 2):
        floors.append((f"ready item, workers={k} fork", best([run_floor(args.cbf, args.mb, direct["count"], k)
                                                          for _ in range(args.repeat)])))
        floors.append((f"1-element item, workers={k} fork", best([run_floor(args.cbf, args.mb, direct["count"], k,
                                                                      small=True) for _ in range(args.repeat)])))
    if args.json:
        print(json.dumps({"rows": {name: r for name, r in rows}, "floors": {name: r for name, r in floors},
                          "interleaved": rounds}, indent=1))
        return
    print(f"{args.cbf}: {direct['samples']} samples ({args.sweeps} sweep(s)), minibatches of {args.mb}, "
          f"best of {args.repeat}")
    print(f"{'variant':40s} {'first mb s':>10s} {'epoch s':>8s} {'steady samples/s':>17s} {'vs direct':>9s}")
    for name, r in rows:
        print(f"{name:40s} {r['first']:10.3f} {r['total']:8.3f} {r['steady']:17,.0f} "
              f"{r['steady'] / direct['steady']:9.2f}")
    if args.rounds:
        mid = {k: statistics.median(v) for k, v in rounds.items()}
        n_items = direct["count"]
        print(f"\nIn process, {args.rounds} rounds interleaved (an epoch of each per round), median epoch s and "
              f"direct / variant")
        for name, m in mid.items():
            print(f"{name:40s} {m:8.3f} {mid['direct'] / m:9.2f}  {(m - mid['direct']) / n_items * 1e6:+7.0f} us an item")
        print("* diagnostic only: torch's DataLoader enters torch.autograd.profiler.record_function around every "
              "item; here it is replaced by a null context")
    print(f"\nTransport floor: {direct['count']} items, each made once in the worker and sent again and again "
          f"(no reading); the direct loop takes {direct['per_item'] * 1e3:.3f} ms a minibatch")
    print(f"{'floor':40s} {'first s':>10s} {'epoch s':>8s} {'ms/item':>9s} {'vs direct mb':>12s}")
    for name, r in floors:
        print(f"{name:40s} {r['first']:10.3f} {r['total']:8.3f} {r['per_item'] * 1e3:9.3f} "
              f"{r['per_item'] / direct['per_item']:12.2f}")


if __name__ == "__main__":
    main()
