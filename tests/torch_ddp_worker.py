"""One rank of a torch.distributed (gloo) run over a MinibatchDataset, for test_integration_torch.py.

Run by the tests as separate processes (one per rank) with MASTER_ADDR=127.0.0.1 and
MASTER_PORT set; each rank reads through a DataLoader with --num-workers workers and
writes what it got as JSON to --out:

    {"rank", "world_size", "items": [{"keys", "sweeps", "partition_index",
     "num_partitions", "worker_id", "rank", "world_size", "phase"}...]}

With --resume-after K the rank takes K items, keeps the last state of each worker
(StateTracker), round-trips it through JSON, and reads the rest with a new dataset
resumed from it (phase 1); items taken before are phase 0. Each DataLoader worker
notes in ``<out>.worker<id>`` whether it sees the process group (it does not when
started by spawn or forkserver).
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import sys

import torch


def make_source(path: str, max_sweeps: int, seed: int):
    from recordkit import StreamSpec
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.ctf import CTFReader
    reader = CTFReader(path, [StreamSpec("x", "dense", 2, "x"), StreamSpec("y", "sparse", 5, "y")], chunk_size=256)
    return MinibatchSource(reader, randomize=True, seed=seed, max_sweeps=max_sweeps)


def note_dist(out: str, worker_id: int) -> None:
    """DataLoader worker_init_fn: does this worker process see torch.distributed initialized?"""
    with open(f"{out}.worker{worker_id}", "w") as f:
        json.dump({"dist_initialized": torch.distributed.is_initialized()}, f)


def _record(item, phase):
    st = item["__state__"]
    return {"keys": [int(k) for k in item["keys"].numpy().view("uint64")],
            "sweeps": [int(s) for s in item["sweeps"]],
            "partition_index": st["partition_index"], "num_partitions": st["num_partitions"],
            "worker_id": st["worker_id"], "rank": st["rank"], "world_size": st["world_size"],
            "phase": phase}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world-size", type=int, required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--num-workers", type=int, default=2)
    ap.add_argument("--mb-size", type=int, default=8)
    ap.add_argument("--max-sweeps", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--context", default=None, help="DataLoader multiprocessing_context (fork, spawn, ...)")
    ap.add_argument("--resume-after", type=int, default=None)
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)

    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from recordkit.integrations.torch import MinibatchDataset, StateTracker

    dist.init_process_group("gloo", init_method="env://", rank=args.rank, world_size=args.world_size,
                            timeout=datetime.timedelta(seconds=args.timeout))
    try:
        factory = functools.partial(make_source, args.data, args.max_sweeps, args.seed)

        context = args.context
        if context == "forkserver":  # the server imports these once; each worker forks from it ready
            import multiprocessing
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["torch", "recordkit.integrations.torch", "__main__"])

        def loader(ds):
            kw = {}
            if args.num_workers:
                kw = {"multiprocessing_context": context, "timeout": args.timeout,
                      "worker_init_fn": functools.partial(note_dist, args.out)}
            return DataLoader(ds, batch_size=None, num_workers=args.num_workers, **kw)

        items = []
        tracker = StateTracker()
        ds = MinibatchDataset(factory, args.mb_size)
        for n, item in enumerate(loader(ds)):
            if args.resume_after is not None and n >= args.resume_after:
                break
            tracker.update(item)
            items.append(_record(item, 0))
        if args.resume_after is not None:
            saved = json.loads(json.dumps(tracker.state_dict()))
            ds = MinibatchDataset(factory, args.mb_size, resume_state=saved)
            for item in loader(ds):
                items.append(_record(item, 1))
        with open(args.out + ".tmp", "w") as f:
            json.dump({"rank": args.rank, "world_size": args.world_size, "items": items}, f)
        os.replace(args.out + ".tmp", args.out)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
