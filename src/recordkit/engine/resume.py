"""MinibatchSource's checkpoints: saving the position, and restoring it exactly or elastically.

A mixin of ``MinibatchSource`` (engine/source.py), kept apart because restoring is its own
concern: a checkpoint is untrusted input (``engine/checkpoint.py`` checks every field first), a
checkpoint made under another memory bound keeps its randomization window, and the list of every
partition's state of a job resumes on another number of partitions (``engine/elastic.py`` plans
what is left; here the source enters its run). ChunkPartition readers are resumed through
"shadows": the chunk lists and orders each old reader had, rebuilt from the data.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from recordkit.engine.checkpoint import (STATE_VERSION, ReadPosition, SourceFacts, check_position, check_state,
                                         partition_mismatch, save_position)
from recordkit.engine.randomizer import BlockRandomizer, NoRandomizer
from recordkit.engine.sweep import LengthTable, estimate_lengths, order_positions, share_sweep


class Checkpointing:
    """``get_checkpoint_state`` / ``restore_from_checkpoint`` of ``MinibatchSource``.

    What it reads and drives of the source (``source.py``) is declared here, so that the seam
    between the two files is written down and type-checked."""

    if TYPE_CHECKING:
        deserializer: Any
        randomizer: Any
        memory: Any
        streams: list
        truncation_length: int
        max_sweeps: int | None
        max_samples: int | None
        epoch_size: int | None
        sweep_samples: int
        samples_delivered: int
        minibatches_delivered: int
        resolve_partition: Callable[[int | None, int | None], tuple[int, int]]
        image_streams: Any
        read_position: Callable[[], ReadPosition]
        bptt_state: Callable[[], dict | None]
        elastic_run: Callable[[], tuple | None]
        data_sizes: Callable[[], tuple[int, int, int]]
        resume_at: Callable[..., None]
        begin_as: Callable[..., None]

        @property
        def chunks(self) -> list: ...

        @property
        def length_table(self) -> LengthTable: ...

        @property
        def partition(self) -> tuple[int, int] | None: ...

        @property
        def default_partition(self) -> tuple[int, int] | None: ...

    # what a restore keeps until the first minibatch chooses the partition (see repartition_restored)
    _elastic_from: tuple | None = None  # (states, partition) of an elastic restore
    _restored_partition: tuple[int, int] | None = None  # the partition a restored single state was taken on

    def get_checkpoint_state(self) -> dict:
        """A small JSON-able dict: restoring it continues with exactly the next minibatches."""
        elastic = self.elastic_run()
        return {
            "recordkit_state": STATE_VERSION,
            **save_position(self.read_position()),
            "bptt": self.bptt_state(),
            "truncation_length": self.truncation_length,
            "fingerprint": self._fingerprint(),
            **({} if self._chunk_partition() is None else
               {"chunk_partition": [self.deserializer.num_partitions, self.deserializer.index]}),
            **({} if self._members() is None else {"mixture": [dict(m) for m in self._members()]}),
            **({} if elastic is None else {"elastic": {**elastic[0].to_json(), "run_position": elastic[1]}}),
            **({} if self.image_streams is None else {"images": self.image_streams.state()}),
        }

    def restore_from_checkpoint(self, state: dict | list[dict | None] | tuple[dict | None, ...], *,
                                num_data_partitions: int | None = None, partition_index: int | None = None) -> None:
        """Continue from ``state`` (``get_checkpoint_state()``). The state is untrusted input:
        every field is checked first (``engine/checkpoint.py``); a bad one is a ValueError
        naming the field and leaves this source as it was.

        Elastic resume: ``state`` may be the list of *every* partition's state of a job, in
        partition order (None for a partition that had taken nothing), taken with the workers
        anywhere. This source then reads as partition ``partition_index`` of
        ``num_data_partitions`` (default: as ``next_minibatch`` would: the constructor's, else
        torch.distributed's, else 1/0), any number of partitions: what no old partition
        delivered of the sweeps they were in is cut into equal runs of the new partitions,
        delivered exactly once, and then ordinary sweeps of the new partitioning follow
        (``engine/elastic.py``). With as many partitions as the job had, it is the exact resume
        of this partition's own state.

        A single state resumes the partition it was taken on: given ``num_data_partitions`` /
        ``partition_index`` (or the constructor's) that are another, the restore is refused; else
        the first ``next_minibatch`` after it must ask for that partition (refused otherwise: its
        position lies in another partition's share of the sweep).

        A checkpoint whose randomization window differs from this source's only because a
        memory bound chose one of them (a machine with other memory, another ``max_memory``)
        is continued with the checkpoint's window, so the resumed order is the one it was
        made with; a warning says so when that window exceeds this source's bound."""
        if self.image_streams is not None:  # the image stages' random states: first, undone if the rest fails
            undo = self.image_streams.load(_images_state(state, partition_index))
            try:
                self._restore_from(state, num_data_partitions, partition_index)
            except BaseException:
                self.image_streams.revert(undo)
                raise
            return
        self._restore_from(state, num_data_partitions, partition_index)

    def _restore_from(self, state, num_data_partitions, partition_index) -> None:
        if isinstance(state, (list, tuple)):
            part = self.resolve_partition(num_data_partitions, partition_index)
            self._restore_with_window(next((s for s in state if s is not None), None),
                                      lambda: self._restore_many(list(state), part))
            self._elastic_from = (list(state), part)  # kept until the first minibatch (see repartition_restored)
            self._restored_partition = None
            return
        given = None if num_data_partitions is None and partition_index is None else \
            self.resolve_partition(num_data_partitions, partition_index)
        self._restore_with_window(state, lambda: self._restore(state, given))
        self._elastic_from = None
        self._restored_partition = self.partition  # checked by the first minibatch (see repartition_restored)

    def _restore_with_window(self, state, restore) -> None:
        adopted = self._checkpoint_window(state) if state is not None else None
        saved = self.randomizer
        if adopted is not None:
            make = getattr(self.deserializer, "make_randomizer", None)  # a mixture keeps its own order
            self.randomizer = make(randomize=True, window=adopted[0], sample_based=self.memory.sample_based,
                                   seed=self.randomizer.seed) if make is not None else \
                BlockRandomizer(self.chunks, window=adopted[0], sample_based=self.memory.sample_based,
                                seed=self.randomizer.seed)
        try:
            restore()
        except BaseException:
            self.randomizer = saved
            raise
        if adopted is not None:
            self._adopt_window(adopted[0])

    def _checkpoint_window(self, state):
        """(the checkpoint's window,) when it is the only difference and a memory bound explains it
        (no larger than the window asked for here), else None (then the usual check refuses it)."""
        mine = self._fingerprint()
        fp = state.get("fingerprint") if isinstance(state, dict) else None
        if not mine[0] or not isinstance(fp, list) or len(fp) != len(mine) or fp[1] == mine[1]:
            return None
        if any(a != b for k, (a, b) in enumerate(zip(fp, mine)) if k != 1):
            return None
        w, asked = fp[1], self.memory.window_requested
        if w is None:  # the whole data set: a bound elsewhere let it be
            return (None,) if asked is None else None
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            return None
        return (w,) if asked is None or w <= asked else None

    def _adopt_window(self, window) -> None:
        from recordkit.engine import memory
        from recordkit.errors import RecordkitWarning
        m = self.memory
        nbytes = memory.chunk_bytes(self.deserializer)
        est = memory.choose_window(self.chunks, nbytes, memory.load_bytes(self.deserializer, nbytes),
                                   max_memory=None, randomize=True, window=window, sample_based=m.sample_based,
                                   seed=self.randomizer.seed, prefetch=m.prefetch,
                                   make=getattr(self.deserializer, "make_randomizer", None)).estimated_bytes
        fits = m.max_memory is None or est <= m.max_memory
        self.memory = dataclasses.replace(m, window=window, capped=window != m.window_requested, fits=fits,
                                          estimated_bytes=est)
        if not fits:
            warnings.warn(f"the checkpoint's randomization window ({self.memory.window_text()}) "
                          f"is kept so the order continues as it "
                          f"was: about {memory.format_size(est)} of chunks at once, beyond the memory bound "
                          f"{memory.format_size(m.max_memory)}", RecordkitWarning, stacklevel=3)

    def _chunk_partition(self):
        """The ChunkPartition this source reads, or None. Asked in every checkpoint (each minibatch's
        state under PyTorch), so answered once: an import statement costs ~1 us a call, and a
        top-level import would add 1 ms to every command's start-up."""
        try:
            return self.__dict__["_chunk_partition_of"][0]
        except KeyError:
            from recordkit.engine.chunk_partition import ChunkPartition
            found = self.deserializer if isinstance(self.deserializer, ChunkPartition) else None
            self.__dict__["_chunk_partition_of"] = (found,)  # the deserializer is set once, in __init__
            return found

    def _members(self):
        """A mixture's data sets as its checkpoints record them (``Mixture.members``), or None. Asked
        in every checkpoint, so made once (the deserializer and its parts are set in __init__)."""
        try:
            return self.__dict__["_members_of"][0]
        except KeyError:
            members = getattr(self.randomizer, "members", None)
            self.__dict__["_members_of"] = (None if members is None else members(),)
            return self.__dict__["_members_of"][0]

    def _facts(self) -> SourceFacts:
        flat = self.length_table.flat
        cp = self._chunk_partition()
        return SourceFacts(self._fingerprint(), len(flat), self.sweep_samples, int(flat.max()) if len(flat) else 0,
                           self.max_sweeps, self.max_samples, truncation_length=self.truncation_length,
                           chunk_partition=None if cp is None else (cp.num_partitions, cp.index),
                           members=self._members())

    def _checked_plan(self, state: dict, facts: SourceFacts):
        """(the elastic plan a checkpoint runs on, its run position) or (None, None)."""
        data = state.get("elastic")
        if data is None:
            return None, None
        from recordkit.engine.checkpoint import last_sweep
        from recordkit.engine.elastic import ChunkPlan, ElasticPlan
        plan: ChunkPlan | ElasticPlan
        if isinstance(data, dict) and data.get("kind") == "chunks":
            plan = ChunkPlan.from_json(data, last_sweep(facts))
        else:
            plan = ElasticPlan.from_json(data, facts.num_sequences, last_sweep(facts))
        run_position = data.get("run_position")
        if run_position is not None and (isinstance(run_position, bool) or not isinstance(run_position, int)
                                         or run_position < 0):
            raise ValueError(f"checkpoint field 'elastic': run_position {run_position!r} is not a count")
        return plan, run_position

    def _sweep_cum(self, index: int) -> np.ndarray:
        return order_positions(self.randomizer, self.length_table, index)[1]

    def _cut(self, plan, part):
        from recordkit.engine.elastic import ChunkPlan, cut_chunk_run, cut_run
        if isinstance(plan, ChunkPlan):
            cp = self._chunk_partition()
            if cp is None or plan.partitions != cp.num_partitions:
                raise ValueError(f"checkpoint field 'elastic': the plan is for {plan.partitions} ChunkPartition "
                                 f"readers, this source reads "
                                 f"{'no ChunkPartition' if cp is None else f'partition {cp.index} of {cp.num_partitions}'}")
            return cut_chunk_run(plan, self._shadow_order, self._owners, cp.index, self._local_ids())
        if plan.partitions != part[0]:
            raise ValueError(f"checkpoint field 'elastic': the plan is cut for {plan.partitions} partitions, this "
                             f"source reads partition {part[1]} of {part[0]}")
        return cut_run(plan, self._sweep_cum, part[1])

    def _restore(self, state: dict, part: tuple | None = None) -> None:
        """The exact resume of one state; ``part``: the partition this source is to read (else the
        constructor's, if it gave one)."""
        facts = self._facts()
        st = check_state(state, facts)
        if part is None:
            part = self.default_partition
        if st.partition is not None and part is not None and st.partition != tuple(part):
            raise partition_mismatch(st.partition, part)
        plan, run_position = self._checked_plan(state, facts)
        sweep = run = None
        if st.partition is not None:
            if plan is not None and run_position is not None:  # within its elastic run
                run = self._cut(plan, st.partition)
                if run_position > run.length:
                    raise ValueError(f"checkpoint field 'elastic': run_position {run_position} is beyond this "
                                     f"partition's run of {run.length} positions")
            else:  # the partition's share of its sweep, nothing loaded
                sweep = share_sweep(self.randomizer, self.length_table, st.sweep, *st.partition)
                check_position(st.position, sweep.lo, sweep.hi)
        self.resume_at(st, sweep=sweep, plan=plan, run=run, run_position=run_position, bptt=st.bptt)

    def _restore_many(self, states: list, part: tuple) -> None:
        """Elastic resume from every old partition's state (see ``restore_from_checkpoint``)."""
        if self._chunk_partition() is not None and any(isinstance(s, dict) and "chunk_partition" in s
                                                       for s in states):
            self._restore_many_chunks(states)
            return
        from recordkit.engine.checkpoint import invalid_field
        from recordkit.engine.elastic import OldPartition, plan_resume
        if not states:
            raise ValueError("an elastic resume needs the states of all the job's partitions, got an empty list")
        facts = self._facts()
        n_old = len(states)
        def check_one(k, state):
            st = check_state(state, facts)
            if st.partition is not None and st.partition != (n_old, k):
                raise invalid_field("partition",
                                    f"it is partition {st.partition[1]} of {st.partition[0]}, but sits at "
                                    f"place {k} of a list of {n_old}: give the states of all partitions "
                                    f"in partition order (None for one that took nothing)")
            return st, facts

        checked, plans = self._checked_states(states, check_one)
        old_plan = _one_job(plans, n_old, "partitions")
        if n_old == part[0] and checked[part[1]] is not None:  # same partitioning: this partition's exact resume
            self._restore(states[part[1]], part)
            return
        if n_old == part[0] or all(c is None for c in checked):
            plan = old_plan  # this partition had taken nothing: it starts its run (or the job) from the start
        else:
            old = []
            for c in checked:
                if c is None or c[0].partition is None:
                    old.append(OldPartition(0, 0, None, False, [], None))
                    continue
                st, run_position = c
                slots = (st.bptt or {}).get("slots") or []
                waiting = [tuple(e) for q in slots for e in q]
                old.append(OldPartition(st.sweep, st.position, run_position, True, waiting, len(slots) or None))
            plan = plan_resume(old, old_plan, n_old, part[0], self._sweep_cum, num_sequences=facts.num_sequences,
                               sweep_samples=self.sweep_samples, max_sweeps=self.max_sweeps,
                               max_samples=self.max_samples)
        self._start_run(plan, part)

    def _shadow(self, n: int, k: int):
        """Partition k of n of this source's data, as a ChunkPartition reader with this source's
        randomization would have read it: (its chunks' ids in the data, its randomizer, facts)."""
        cache = self.__dict__.setdefault("_shadows", {})
        if (n, k) not in cache:
            from recordkit.engine.chunk_partition import ChunkPartition
            part = ChunkPartition(self.deserializer.inner, n, k)
            chunks = part.chunks
            r = self.randomizer
            rnd = BlockRandomizer(chunks, window=r.window, sample_based=r.sample_based, seed=r.seed) \
                if isinstance(r, BlockRandomizer) else NoRandomizer(chunks)
            est = estimate_lengths(part, chunks)
            flat = np.concatenate([est[c.id] for c in chunks]) if chunks else np.zeros(0, np.int64)
            d = rnd.describe()
            fp = [d.get("randomize"), d.get("window"), d.get("sample_based"), d.get("seed"), len(chunks),
                  int(sum(c.num_sequences for c in chunks)), int(flat.sum())]
            facts = SourceFacts(fp, len(flat), int(flat.sum()), int(flat.max()) if len(flat) else 0,
                                self.max_sweeps, self.max_samples, truncation_length=self.truncation_length,
                                chunk_partition=(n, k))
            cache[(n, k)] = (np.asarray(part.inner_chunk_ids, dtype=np.int64), rnd, facts)
        return cache[(n, k)]

    def _shadow_order(self, n: int, k: int, sweep: int):
        ids, rnd, _ = self._shadow(n, k)
        order = rnd.sweep(sweep)
        return ids[order.chunk], np.asarray(order.index, dtype=np.int64)

    def _owners(self, n: int) -> np.ndarray:
        from recordkit.engine.chunk_partition import assign_chunks
        cache = self.__dict__.setdefault("_owner_cache", {})
        if n not in cache:
            cache[n] = assign_chunks(self.deserializer.inner.chunks, n)
        return cache[n]

    def _local_ids(self) -> np.ndarray:
        """Inner chunk id -> this partition's chunk id (-1: not this partition's)."""
        cp = self._chunk_partition()
        local = np.full(len(cp.inner.chunks), -1, dtype=np.int64)
        local[np.asarray(cp.inner_chunk_ids, dtype=np.int64)] = np.arange(len(cp.inner_chunk_ids))
        return local

    def _restore_many_chunks(self, states: list) -> None:
        """Elastic resume of ChunkPartition readers: ``states`` are every old reader's, in order."""
        from recordkit.engine.checkpoint import invalid_field
        from recordkit.engine.elastic import OldPartition, plan_chunk_resume
        cp = self._chunk_partition()
        n_old, m_new, j = len(states), cp.num_partitions, cp.index
        if self.max_samples is not None or self.epoch_size is not None or self.truncation_length:
            raise ValueError("an elastic resume of ChunkPartition readers counts no job-wide samples: it "
                             "works with max_sweeps, not with max_samples, epoch_size or truncated BPTT "
                             "(resume with the same number of readers, or partition by samples instead)")
        def check_one(k, state):
            if not isinstance(state, dict) or state.get("chunk_partition") != [n_old, k]:
                raise invalid_field("chunk_partition",
                                    f"expected [{n_old}, {k}] (the states of all ChunkPartition "
                                    f"readers in order, None for one that took nothing), found "
                                    f"{state.get('chunk_partition') if isinstance(state, dict) else state!r}")
            facts = self._shadow(n_old, k)[2]
            st = check_state(state, facts)
            if st.partition not in (None, (1, 0)):
                raise invalid_field("partition", "a ChunkPartition reader's source must not be partitioned again")
            return st, facts

        checked, plans = self._checked_states(states, check_one)
        old_plan = _one_job(plans, n_old, "readers")
        if n_old == m_new and checked[j] is not None:
            self._restore(states[j])
            return
        if n_old == m_new or all(c is None for c in checked):
            plan = old_plan
        else:
            old = [OldPartition(0, 0, None, False, [], None) if c is None or c[0].partition is None else
                   OldPartition(c[0].sweep, c[0].position, c[1], True, [], None) for c in checked]
            plan = plan_chunk_resume(old, old_plan, n_old, m_new, self._shadow_order, self._owners,
                                     max_sweeps=self.max_sweeps)
        self._start_run(plan, (1, 0))

    def _checked_states(self, states: list, check_one) -> tuple[list, list]:
        """Every old partition's state checked (``check_one(k, state)`` -> (checked state, the facts it
        was checked against)), an error naming its place in the list: ((state, run position) or None
        for a partition that took nothing, the elastic plans the states run on)."""
        checked: list = []
        plans: list = []
        for k, state in enumerate(states):
            if state is None:
                checked.append(None)
                continue
            try:
                st, facts = check_one(k, state)
                plan, run_position = self._checked_plan(state, facts)
            except ValueError as exc:
                raise ValueError(f"state {k} of {len(states)}: {exc}") from None
            checked.append((st, run_position))
            plans.append(plan)
        return checked, plans

    def _start_run(self, plan, part) -> None:
        """Begin as partition ``part`` with nothing delivered: the plan's run (then its ordinary
        sweeps), or with no plan the job's first sweep."""
        run = self._cut(plan, part) if plan is not None else None
        if run is not None and run.carry and not self.truncation_length:
            raise ValueError("the states hold sequences that truncated BPTT had split across minibatches: "
                             "resume with the same truncation_length")
        bptt = None
        if run is not None and run.carry:  # begun sequences, dealt round-robin over the slots
            width = max(1, plan.bptt_slots or 1)
            slots: list[list] = [[] for _ in range(width)]
            for q, entry in enumerate(run.carry):
                slots[q % width].append(list(entry))
            bptt = {"slots": slots}
        self.begin_as(part, plan=plan, run=run, bptt=bptt)

    def repartition_restored(self, part: tuple[int, int], in_run: bool) -> bool:
        """What ``next_minibatch`` asks when it is to read partition ``part``, not the one it reads: True
        when this restore's business, done. Right after a restore of a single state it is refused (the
        state's position lies in its own partition's share); right after one of a list of states, or
        while delivering the elastic run such a restore began (``in_run``), see ``_reconfigure_run``."""
        if self._restored_partition is not None:
            raise partition_mismatch(self._restored_partition, part)
        if self._elastic_from is None and not in_run:
            return False
        self._reconfigure_run(part)
        return True

    def restore_settled(self) -> None:
        """The first minibatch after a restore has chosen its partition: what the restore kept to judge
        that choice is dropped."""
        self._elastic_from = self._restored_partition = None

    def _reconfigure_run(self, part) -> None:
        """Another partitioning asked of a source resumed elastically: fine before it has delivered
        anything (the plan is made again for it), refused after."""
        held = self._elastic_from
        if held is None:
            assert self.partition is not None  # it has delivered: the partition was chosen
            n, i = self.partition
            raise ValueError(f"this source resumed elastically as partition {i} of {n} and has delivered since; "
                             f"it cannot move to partition {part[1]} of {part[0]}")
        self._restore_many(held[0], part)
        self._elastic_from = (held[0], part)

    def _fingerprint(self) -> list:
        r = self.randomizer.describe()
        fp = [r.get("randomize"), r.get("window"), r.get("sample_based"), r.get("seed"),
              *self.data_sizes()]
        return fp + [r["mixture"]] if "mixture" in r else fp  # another mixture is other data


def _images_state(state, partition_index):
    """The image stages' states in a checkpoint: a single state's own; of an elastic list, the state
    of the partition this source reads when the list has it, else the first taken (crops after an
    elastic resume follow one old partition's random stream)."""
    if not isinstance(state, (list, tuple)):
        return state.get("images") if isinstance(state, dict) else None
    taken = [s for s in state if isinstance(s, dict)]
    i = partition_index if partition_index is not None else 0
    own = state[i] if 0 <= i < len(state) and isinstance(state[i], dict) else (taken[0] if taken else None)
    return own.get("images") if own is not None else None


def _one_job(plans: list, n_old: int, what: str):
    """The elastic plan the states' job ran on (None: it was never resized), after checking that they
    are the states of one job: all with the same plan or all without, cut for as many as there are."""
    if any(p is None for p in plans) and any(p is not None for p in plans) or any(
            p is not None and not p.same_job(plans[0]) for p in plans):
        raise ValueError(f"the states are of different jobs (their elastic plans differ): give the states of all "
                         f"the {what} of one job saved at one checkpoint")
    old_plan = plans[0] if plans else None
    if old_plan is not None and old_plan.partitions != n_old:
        raise ValueError(f"the states' job had {old_plan.partitions} {what}, the list has {n_old} states")
    return old_plan
