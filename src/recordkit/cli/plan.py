"""``recordkit plan``: what a ``read`` with the same arguments would do, before it does it.

CNTK's users learned how much memory a randomized reader takes, and where an epoch ends, by
running out of one and asking about the other. ``plan`` takes exactly ``read``'s arguments,
opens the readers (building or loading the index, nothing more) and prints the chunks, the
randomization window in chunks, samples and bytes, the estimated peak memory, how sweeps,
epochs and minibatches line up, and what every partition reads. The computation is
``recordkit.compose.plan.make_plan``; this module only turns arguments into its input and
its result into text.
"""
from __future__ import annotations

import sys

from recordkit.cli import read as read_cmd


def register(sub) -> None:
    p = sub.add_parser("plan", help="show what a read would hold in memory and deliver, from the index alone",
                       description="Take the arguments of `recordkit read` and print, without reading data beyond "
                                   "the index: chunks and sizes, the randomization window (chunks, samples, "
                                   "bytes), the estimated peak memory, how sweeps, epochs and minibatches line up, "
                                   "and what each partition reads.")
    read_cmd.add_read_arguments(p)
    p.add_argument("--all-chunks", action="store_true", help="list every chunk (default: the first and last few)")
    p.set_defaults(run=run)


def build_plan(args) -> tuple[dict, list]:
    """The plan for these ``read`` arguments, and the readers it opened."""
    from recordkit.engine.memory import resident_memory
    from recordkit.compose.plan import PlanInput, make_plan
    from recordkit.cli import sources
    readers = [sources.open_reader(args, path) for path in args.path]
    deserializer = read_cmd.join_or_mix(args, readers)
    baseline = resident_memory()  # what a process holding these readers takes before reading
    window, sample_based = (args.window_samples, True) if args.window_samples else (args.window, False)
    sweeps = args.sweeps if args.sweeps is not None or args.max_samples is not None else 1
    from recordkit.engine.chunk_partition import in_chunks
    by_chunks = in_chunks(deserializer, args.partition_by, args.randomize, args.partitions)
    parts = None
    if by_chunks:
        from recordkit.engine import ChunkPartition
        parts = [ChunkPartition(deserializer, args.partitions, k) for k in range(args.partitions)]
        deserializer = parts[args.partition_index]
    request = PlanInput(randomize=args.randomize, window=window, sample_based=sample_based, seed=args.seed,
                        max_memory=read_cmd.memory_bound(args), minibatch_size=args.mb_size, max_sweeps=sweeps,
                        max_samples=args.max_samples, epoch_size=args.epoch_size, partitions=args.partitions,
                        partition_index=args.partition_index, partition_by="chunks" if by_chunks else "samples",
                        truncation_length=args.truncation_length, frame_mode=args.frame_mode)
    result = make_plan(deserializer, request, baseline_bytes=baseline, partition_deserializers=parts)
    result["files"] = list(args.path)
    from recordkit.storage.location import is_url
    from recordkit.storage.range_cache import plan as cache_plan
    remote = result["chunks"]["bytes"] if any(is_url(p) for p in args.path) else 0
    result["cache"] = cache_plan(args.cache_dir, remote)
    result["streams"] = [{"name": s.name, "format": s.format, "dim": s.dim} for s in deserializer.streams]
    return result, readers


def run(args) -> int:
    import warnings
    with warnings.catch_warnings():
        # the plan reports a reduced window itself; the engine's warning would say it twice
        warnings.filterwarnings("ignore", message="randomization window .* to fit")
        plan, readers = build_plan(args)
    for r in readers:
        r.close()
    if args.json:
        import orjson
        sys.stdout.buffer.write(orjson.dumps(plan) + b"\n")
        return 0
    sys.stdout.write(render(plan, all_chunks=args.all_chunks))
    return 0


def render(plan: dict, *, all_chunks: bool = False) -> str:
    from recordkit.sizes import format_size as fs
    out = []
    c, w, m, t = plan["chunks"], plan["window"], plan["memory"], plan["timeline"]
    out.append(f"data: {', '.join(plan['files'])}")
    out.append(f"  {c['sequences']:,} sequences, {c['samples']:,} samples in {c['count']} chunks; "
               f"{fs(c['bytes'])} on disk, about {fs(c['decoded_bytes'])} decoded "
               f"(largest chunk {fs(c['largest_decoded_bytes'])})")
    rows = c["table"]
    shown = rows if all_chunks or len(rows) <= 8 else rows[:4] + [None] + rows[-3:]
    out.append("  chunk  sequences    samples        bytes      decoded")
    for row in shown:
        if row is None:
            out.append(f"  ... {len(rows) - 7} more (--all-chunks)")
            continue
        out.append(f"  {row['id']:5d} {row['sequences']:10,d} {row['samples']:10,d} {fs(row['bytes']):>12} "
                   f"{fs(row['decoded_bytes']):>12}")
    out.append("window:")
    if w["randomize"]:
        out.append(f"  randomized, window {w['text']}: up to {w['chunks']} chunks, {w['samples']:,} samples, "
                   f"{fs(w['bytes'])} decoded")
        if w["capped"]:
            req = "the whole data set" if w["requested"] is None else \
                f"{w['requested']} {'samples' if w['sample_based'] else 'chunks'}"
            out.append(f"  reduced from {req} to fit the memory bound")
    else:
        out.append("  file order (not randomized)")
    out.append("memory:")
    out.append(f"  {m['description']}")
    out.append(f"  estimated peak {fs(m['estimated_peak_bytes'])} = {fs(m['baseline_bytes'])} process with the index "
               f"+ {fs(m['engine_bytes'])} engine positions + {fs(m['held_bytes'])} chunks held "
               f"({m['held_chunks']} at most) + {fs(m['in_flight_bytes'])} loads in flight "
               f"+ {fs(m['minibatch_bytes'])} minibatches")
    cache = plan.get("cache")
    if cache is not None:
        out.append("cache:")
        bound = "unbounded" if cache["limit"] is None else f"limit {fs(cache['limit'])}"
        mode = ", offline (the store is never asked)" if cache["offline"] else ""
        out.append(f"  {cache['directory']}: {bound}{mode}; holds {fs(cache['cached_bytes'])} of ranges now")
        if cache["sweep_bytes"]:
            if cache["refetched_bytes_per_sweep"]:
                out.append(f"  a sweep reads {fs(cache['sweep_bytes'])} of remote chunks: {fs(cache['kept_bytes'])} "
                           f"can stay cached, about {fs(cache['refetched_bytes_per_sweep'])} is fetched again "
                           f"every sweep (least recently used ranges go first)")
            else:
                out.append(f"  a sweep reads {fs(cache['sweep_bytes'])} of remote chunks: all of it stays cached, "
                           f"later sweeps ask the store for nothing")
    out.append("timeline:")
    part = t["partition"]
    who = f" (partition {part[0]} of {part[1]})" if part[1] > 1 else ""
    sweeps = "repeating forever" if t["sweeps"] is None else f"{t['sweeps']} sweep(s)"
    out.append(f"  a sweep is {t['samples_per_sweep']:,} samples in {t['sequences_per_sweep']:,} sequences; "
               f"{sweeps}" + (f", {t['total_samples']:,} samples in all" if t["total_samples"] is not None else ""))
    if t.get("minibatches") is not None or t.get("minibatches_per_sweep"):
        total = t.get("minibatches")
        per = t.get("minibatches_per_sweep", [])
        out.append(f"  minibatches of <= {t['minibatch_size']:,} samples{who}: "
                   + (f"{total:,} in all; " if total is not None else "")
                   + "per sweep " + ", ".join(f"{x:,}" for x in per[:10]) + (" ..." if len(per) > 10 else ""))
        if t.get("crossing_sweeps"):
            out.append(f"  {t['crossing_sweeps']} minibatch(es) run from one sweep into the next (end_of_sweep)")
        shown = t.get("sweeps_shown")
        part_of = f" in the first {shown} sweeps" if t["sweeps"] is None or (shown or 0) < t["sweeps"] else ""
        out.append(f"  this worker reads {t.get('sequences_read', 0):,} sequences, {t.get('samples_read', 0):,} "
                   f"samples{part_of}")
    if t.get("epoch_size"):
        out.append(f"  epochs of {t['epoch_size']:,} samples" + (f": {t['epochs_total']:,} in all"
                                                                 if t.get("epochs_total") is not None else ""))
        epochs = t.get("epochs", [])
        for e in epochs[:12]:
            out.append(f"    epoch {e['epoch']}: ends at sample {e['ends_at_sample']:,} in sweep {e['ends_in_sweep']}; "
                       f"{e['minibatches']:,} minibatches, {e['sequences']:,} sequences, {e['samples']:,} samples{who}")
        if len(epochs) > 12:
            out.append(f"    ... {len(epochs) - 12} more (--json lists up to 50)")
    elif t.get("sweeps") is not None:
        out.append("  no --epoch-size: an epoch is whatever the training loop makes of it (CNTK: one sweep)")
    if t.get("note"):
        out.append(f"  note: {t['note']}")
    out.append("partitions:")
    for p in plan["partitions"]:
        extra = f", chunk ids {p['chunk_ids']}" if p.get("chunk_ids") else ""
        out.append(f"  {p['index']}: {p['sequences']:,} sequences, {p['samples']:,} samples, {p['chunks']} chunks"
                   + (" (sweep 0)" if "chunk_ids" not in p else "") + extra)
    return "\n".join(out) + "\n"
