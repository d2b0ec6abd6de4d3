"""The timeline and memory of a read, computed from the index alone (``recordkit plan``).

``make_plan``: everything ``recordkit plan`` prints: chunks, window, estimated peak memory,
how sweeps, epochs and minibatches line up, what each partition reads. Nothing is parsed: the
memory half is the engine's own estimate (``engine/memory.py``, what ``MinibatchSource``
applies for ``max_memory``), the timeline follows the source's sweep orders and shares.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from recordkit.engine.deserializer import splits_chunks
from recordkit.engine.memory import (ENGINE_BYTES_PER_SEQUENCE, by_id, choose_window, chunk_bytes, held_peak,
                                     load_bytes, machine_memory_bound, randomizer_for)
from recordkit.engine.sweep import share_bounds  # the source's split of a sweep among workers
from recordkit.sizes import parse_size


# -- the whole plan ------------------------------------------------------------------------------------
def minibatch_ends(lengths: np.ndarray, size: int, cuts=()) -> np.ndarray:
    """End position of every minibatch over positions with these lengths, never crossing a
    position in ``cuts`` (epoch ends, the end of the data): cut by the rule the source's picks
    apply (``_gather.minibatch_ends``: the first sequence always, then sequences while they fit
    in ``size`` samples)."""
    from recordkit.engine import _gather
    lengths = np.ascontiguousarray(lengths, dtype=np.int64)
    n = len(lengths)
    bounds = sorted({0, n, *[int(c) for c in cuts if 0 < c < n]})
    ends = [_gather.minibatch_ends(lengths, int(size), a, b) for a, b in zip(bounds[:-1], bounds[1:])]
    return np.concatenate(ends) if ends else np.zeros(0, dtype=np.int64)


@dataclass
class PlanInput:
    """What a read is asked to do (the arguments of ``recordkit read``)."""
    randomize: bool = False
    window: int | None = None
    sample_based: bool = False
    seed: int = 0
    max_memory: object = "auto"
    prefetch: int = 2
    threads: int = 2
    minibatch_size: int = 1
    max_sweeps: int | None = 1
    max_samples: int | None = None
    epoch_size: int | None = None
    partitions: int = 1
    partition_index: int = 0
    partition_by: str = "samples"
    truncation_length: int = 0
    frame_mode: bool = False
    extra: dict = field(default_factory=dict)


MAX_LISTED_EPOCHS = 50
MAX_TIMELINE_SWEEPS = 64
MAX_TIMELINE_POSITIONS = 20_000_000


def _bound(spec) -> tuple[int | None, str]:
    if isinstance(spec, str) and spec.strip().lower() == "auto":
        return machine_memory_bound(), "machine"
    if spec is None:
        return None, "none"
    return parse_size(spec), "argument"


def _estimated_lengths(deserializer) -> np.ndarray:
    """Index lengths of every described sequence, flattened in chunk order (as the engine counts)."""
    from recordkit.engine.deserializer import sequence_lengths
    parts = []
    for c in deserializer.chunks:
        known = sequence_lengths(deserializer, c.id)
        if known is not None:
            parts.append(np.asarray(known, dtype=np.int64))
        else:
            base, extra = divmod(c.num_samples, max(c.num_sequences, 1))
            est = np.full(c.num_sequences, base, dtype=np.int64)
            est[:extra] += 1
            parts.append(est)
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def make_plan(deserializer, request: PlanInput, *, baseline_bytes: int = 0, partition_deserializers=None) -> dict:
    """Everything ``recordkit plan`` reports, from the index only (nothing is parsed).

    ``deserializer``: what the read's MinibatchSource reads (for ``partition_by="chunks"`` the
    partition being read); ``partition_deserializers``: with ``partition_by="chunks"``, every
    partition's ``ChunkPartition`` (for the per-partition table); ``baseline_bytes``: the memory
    of a process that has opened these readers (the caller's resident set), to which the plan
    adds the engine's arrays, the chunks held, loads in flight and minibatches."""
    r = request
    chunks = list(deserializer.chunks)
    C = len(chunks)
    nbytes = chunk_bytes(deserializer)
    loading = load_bytes(deserializer, nbytes)
    bound, frm = _bound(r.max_memory)
    cache: dict = {}
    make = getattr(deserializer, "make_randomizer", None)  # a mixture's own order, for the memory choice
    choice = choose_window(chunks, nbytes, loading, max_memory=bound, bound_from=frm, randomize=r.randomize,
                           window=r.window, sample_based=r.sample_based, seed=r.seed, prefetch=r.prefetch,
                           threads=r.threads, cache=cache, make=make)
    randomizer = randomizer_for(chunks, randomize=r.randomize, window=choice.window, sample_based=r.sample_based,
                                seed=r.seed, cache=None if make else cache)  # the timeline: the union's order
    est = _estimated_lengths(deserializer)
    base = np.zeros(max((c.id for c in chunks), default=-1) + 2, dtype=np.int64)
    for c in chunks:
        base[c.id + 1] = c.num_sequences
    base = np.cumsum(base)
    sweep_samples = int(est.sum())
    sweep_sequences = int(len(est))
    samples_per_chunk = np.array([c.num_samples for c in chunks], dtype=np.int64)

    # the window: in chunks, samples and bytes (the largest over sweep 0's randomized chunks)
    window = {"randomize": r.randomize, "text": choice.window_text(), "requested": r.window,
              "sample_based": r.sample_based, "chosen": choice.window, "capped": choice.capped}
    if r.randomize and C:
        perm = randomizer.chunk_permutation(0)
        b, e = randomizer.windows(perm)
        spans = e - b
        cs = np.concatenate([[0], np.cumsum(samples_per_chunk[perm])])
        cb = np.concatenate([[0], np.cumsum(nbytes[perm])])
        window.update(chunks=int(spans.max()), samples=int((cs[e] - cs[b]).max()), bytes=int((cb[e] - cb[b]).max()))
    else:
        window.update(chunks=1, samples=int(samples_per_chunk.max()) if C else 0, bytes=int(nbytes.max()) if C else 0)

    # sweeps, epochs, minibatches of the partition being read
    sweeps_needed: int | None = r.max_sweeps
    if r.max_samples is not None:
        sweeps_needed = -(-int(r.max_samples) // max(sweep_samples, 1)) if sweep_samples else 1
    finite = sweeps_needed is not None
    # sweeps walked position by position: at most MAX_TIMELINE_SWEEPS and MAX_TIMELINE_POSITIONS in all
    room = max(1, MAX_TIMELINE_POSITIONS // max(sweep_sequences, 1))
    n_sweeps = min(sweeps_needed, MAX_TIMELINE_SWEEPS, room) if sweeps_needed is not None else 1
    total_samples = None
    if sweeps_needed is not None:
        total_samples = sweeps_needed * sweep_samples if r.max_samples is None else min(
            int(r.max_samples), sweeps_needed * sweep_samples)
    n, i = (r.partitions, r.partition_index) if r.partition_by == "samples" else (1, 0)
    share_lengths, share_global, sweep_starts, share_chunks = [], [], [], None
    per_partition: list[dict[str, Any]] = [{"index": k, "sequences": 0, "samples": 0, "chunks": 0} for k in range(n)]
    offset = 0
    for s in range(n_sweeps):
        order = randomizer.sweep(s)
        lens = est[base[order.chunk] + order.index] if len(order) else np.zeros(0, np.int64)
        cum = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=cum[1:])
        if s == 0:
            for k in range(n):
                lo, hi = share_bounds(cum, n, k)
                per_partition[k].update(sequences=hi - lo, samples=int(cum[hi] - cum[lo]),
                                        chunks=int(len(np.unique(order.chunk[lo:hi]))))
        lo, hi = share_bounds(cum, n, i)
        if s == 0:
            share_chunks = order.chunk[lo:hi]
        share_lengths.append(lens[lo:hi])
        share_global.append(s * sweep_samples + cum[lo:hi])
        sweep_starts.append(offset)
        offset += hi - lo
    L = np.concatenate(share_lengths) if share_lengths else np.zeros(0, np.int64)
    G = np.concatenate(share_global) if share_global else np.zeros(0, np.int64)
    end = len(L)
    if r.max_samples is not None:
        end = int(np.searchsorted(G, int(r.max_samples), side="left"))
    epoch_ends = []  # where each epoch ends in this worker's positions
    last_sample = total_samples if total_samples is not None else n_sweeps * sweep_samples
    if r.epoch_size:
        count = -(-int(last_sample) // int(r.epoch_size))
        bounds = np.arange(1, min(count, 1_000_000) + 1, dtype=np.int64) * int(r.epoch_size)
        epoch_ends = np.searchsorted(G, bounds, side="left").tolist()
    timeline: dict[str, Any] = {"samples_per_sweep": sweep_samples, "sequences_per_sweep": sweep_sequences,
                "sweeps": sweeps_needed, "sweeps_shown": n_sweeps, "total_samples": total_samples,
                "minibatch_size": r.minibatch_size,
                "epoch_size": r.epoch_size, "partition": [i, n] if r.partition_by == "samples" else
                [r.partition_index, r.partitions]}
    ends = None
    if r.truncation_length:
        timeline["minibatches"] = None
        timeline["note"] = "truncated BPTT: minibatches hold size // truncation_length slots; not counted here"
    else:
        ends = minibatch_ends(L[:end], max(1, int(r.minibatch_size)), cuts=[c for c in epoch_ends if c < end])
        timeline["minibatches"] = int(len(ends)) if finite and n_sweeps == sweeps_needed else None
        timeline["samples_read"] = int(L[:end].sum())
        timeline["sequences_read"] = int(end)
        sweep_of_end = np.searchsorted(np.array(sweep_starts[1:] + [end + 1]), ends, side="left") if len(ends) \
            else np.zeros(0, np.int64)
        timeline["minibatches_per_sweep"] = [int(np.sum((sweep_of_end == s))) for s in range(n_sweeps)]
        timeline["crossing_sweeps"] = int(sum(1 for s in sweep_starts[1:]
                                              if s < end and not np.any(ends == s)))
        if sweeps_needed is None:
            timeline["note"] = "no end (repeats forever): one sweep shown"
        elif n_sweeps < sweeps_needed:
            timeline["note"] = (f"the first {n_sweeps} sweeps are shown (counts of sequences, samples and "
                                f"minibatches are theirs)")
        epochs: list[dict[str, Any]] = []
        prev, prev_mb = 0, 0
        for e, cut in enumerate(epoch_ends[:MAX_LISTED_EPOCHS]):
            c = min(cut, end)
            nmb = int(np.searchsorted(ends, c, side="right"))
            at = min((e + 1) * int(r.epoch_size or 0), int(last_sample))
            epochs.append({"epoch": e, "ends_at_sample": at,
                           "ends_in_sweep": (at - 1) // max(sweep_samples, 1) if at else 0,
                           "sequences": c - prev, "samples": int(L[prev:c].sum()), "minibatches": nmb - prev_mb})
            prev, prev_mb = max(prev, c), max(prev_mb, nmb)
        timeline["epochs"] = epochs
        if r.epoch_size:
            timeline["epochs_total"] = -(-int(total_samples) // r.epoch_size) if total_samples is not None else None

    # what each partition reads
    if r.partition_by == "chunks" and partition_deserializers:
        per_partition = []
        for k, d in enumerate(partition_deserializers):
            cs = d.chunks
            per_partition.append({"index": k, "sequences": sum(c.num_sequences for c in cs),
                                  "samples": sum(c.num_samples for c in cs), "chunks": len(cs),
                                  "chunk_ids": list(getattr(d, "inner_chunk_ids", []))})

    # memory: held chunks minibatch by minibatch, loads in flight, minibatches, the engine's arrays
    if share_chunks is not None and len(share_chunks):
        steps = None
        if ends is not None:
            steps = ends[ends <= len(share_chunks)]
        held, held_chunks = held_peak(share_chunks, by_id(chunks, nbytes), prefetch=choice.prefetch, steps=steps)
        with_loads, _ = held_peak(share_chunks, by_id(chunks, nbytes), prefetch=choice.prefetch, steps=steps,
                                  loading=by_id(chunks, loading),
                                  threads=r.threads, splits=splits_chunks(deserializer))
    else:
        held = held_chunks = with_loads = 0
    flight = with_loads - held
    per_sample = float(nbytes.sum()) / max(sweep_samples, 1)
    mb_bytes = int(2 * per_sample * max(1, int(r.minibatch_size)))
    engine = ENGINE_BYTES_PER_SEQUENCE * sweep_sequences
    peak = int(baseline_bytes) + engine + min(held + flight, choice.whole_bytes) + mb_bytes
    memory = choice.as_dict()
    memory.update(held_bytes=held, held_chunks=held_chunks, in_flight_bytes=flight, minibatch_bytes=mb_bytes,
                  engine_bytes=engine, baseline_bytes=int(baseline_bytes), estimated_peak_bytes=peak,
                  description=choice.describe())
    table = [{"id": c.id, "sequences": c.num_sequences, "samples": c.num_samples, "bytes": c.size,
              "decoded_bytes": int(b)} for c, b in zip(chunks, nbytes)]
    return {"chunks": {"count": C, "sequences": sweep_sequences, "samples": sweep_samples,
                       "bytes": int(sum(c.size for c in chunks)), "decoded_bytes": int(nbytes.sum()),
                       "largest_decoded_bytes": int(nbytes.max()) if C else 0, "table": table},
            "window": window, "memory": memory, "timeline": timeline, "partitions": per_partition}
