"""A re-creation of the CNTK 2.7 reader unit-test harness, driving any sequence source.

CNTK's reader tests (``Tests/UnitTests/ReaderTests``, helper ``HelperRunReaderTest``)
read a data set through the old per-reader path and write every minibatch as text,
then compare that text with a stored control file token by token. This module
re-implements that path for ``randomize=false`` so the stored controls can check
recordkit's CTF reader:

* ``NoRandomizer``: the sequences in file order (all chunks in order), endless
  repetition of sweeps, epochs of ``epochSize`` samples starting at the first
  sequence boundary at or after ``epochIndex * epochSize``, minibatch requests of
  ``mbSize`` samples capped to the epoch and to the current sweep
  (``Source/Readers/ReaderLib/NoRandomizer.cpp``);
* ``epoch_minibatches``: the old ReaderShim's "is there another minibatch" rule;
* ``pack_layout``: the SequencePacker's MBLayout ("packed sequences", first-fit rows);
* ``minibatch_lines`` / ``run_reader_test``: the helper's writer (time-major non-gap
  columns, one text line of ``dim`` values per column, values as ``ofstream << v``);
* ``token_mismatch``: the helper's whitespace-token comparison.

Nothing here imports recordkit, so the logic can be unit-tested on in-memory sequences
(``test_cntk_harness_logic.py``) before, and independently of, the reader.

The corpus is ``<shared>/conformance/cntk`` (``CASES.md`` there documents every case);
``<shared>`` is ``$RECORDKIT_SHARED`` or the ``shared`` directory next to the repository.
"""
from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol, Sequence

import numpy as np

# ---------------------------------------------------------------------------------------------
# Locating the corpus

SHARED_ENV_VAR = "RECORDKIT_SHARED"
CTF_DATA_DIR = "Data/CNTKTextFormatReader"
CTF_CONTROL_DIR = "Control/CNTKTextFormatReader"
MAX_MINIBATCHES_PER_EPOCH = 10  # HelperRunReaderTest writes at most 10 minibatches per epoch


def shared_dir() -> Path:
    """``$RECORDKIT_SHARED`` if set, else ``<repo>/../shared`` (``/work/shared`` for ``/work/main``)."""
    env = os.environ.get(SHARED_ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parents[3] / "shared"


def cntk_corpus_dir(shared: Path | None = None) -> Path:
    """The CNTK reader conformance corpus: ``<shared>/conformance/cntk``."""
    return (shared if shared is not None else shared_dir()) / "conformance" / "cntk"


# ---------------------------------------------------------------------------------------------
# Sequence sources: what the randomizer and packer read from


class SequenceSource(Protocol):
    """Sequences in file order.

    ``lengths[i]`` is sequence i's length used for minibatch and epoch sizing (CNTK: the
    index's sample count; recordkit: ``ChunkData.lengths``); ``samples(i, stream)`` is
    its data for one stream as a dense (samples, dim) array, whose row count is the
    stream's own sample count (what the packer lays out).
    """

    lengths: Sequence[int]

    def samples(self, seq: int, stream: str) -> np.ndarray: ...


@dataclass
class InMemorySource:
    """A source over Python data: ``data[i][stream]`` is a (samples, dim) array."""

    lengths: list
    data: list

    @classmethod
    def from_sequences(cls, data, defines_mb_size: str | None = None) -> "InMemorySource":
        """Lengths as recordkit computes them: the defining stream's samples, else the max.

        A 1-D value list is taken as that many samples of dimension 1.
        """
        def as_samples(v):
            a = np.asarray(v, dtype=np.float64)
            return a.reshape(-1, 1) if a.ndim <= 1 else a
        data = [{k: as_samples(v) for k, v in seq.items()} for seq in data]
        if defines_mb_size is not None:
            lengths = [seq[defines_mb_size].shape[0] for seq in data]
        else:
            lengths = [max(a.shape[0] for a in seq.values()) for seq in data]
        return cls(lengths, data)

    def samples(self, seq: int, stream: str) -> np.ndarray:
        return self.data[seq][stream]


def densify_sparse(values: np.ndarray, indices: np.ndarray, indptr: np.ndarray, dim: int) -> np.ndarray:
    """CSR samples -> dense (samples, dim), zeros elsewhere.

    Like the SequencePacker's sparse-to-dense scatter, a duplicate index within one
    sample keeps the *last* value in file order (SciPy's ``toarray`` would sum them).
    """
    n = len(indptr) - 1
    out = np.zeros((n, dim), dtype=values.dtype if len(values) else np.float64)
    if len(values) == 0:
        return out
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(np.asarray(indptr, dtype=np.int64)))
    flat = rows * dim + np.asarray(indices, dtype=np.int64)
    # last occurrence of each flat position: unique over the reversed array gives first-in-reverse
    rev_unique, rev_first = np.unique(flat[::-1], return_index=True)
    last = len(flat) - 1 - rev_first
    out.reshape(-1)[rev_unique] = values[last]
    return out


class ReaderSource:
    """All sequences of a recordkit deserializer (``.chunks`` + ``.load_chunk``), in file order.

    Every chunk is loaded once, in chunk order; sparse columns are densified once per chunk.
    """

    def __init__(self, reader):
        self.chunks = [reader.load_chunk(info.id) for info in reader.chunks]
        self._where: list[tuple[int, int]] = []
        for ci, chunk in enumerate(self.chunks):
            self._where.extend((ci, i) for i in range(len(chunk.keys)))
        self.lengths = [int(x) for c in self.chunks for x in np.asarray(c.lengths)]
        self.keys = [int(x) for c in self.chunks for x in np.asarray(c.keys)]
        self._dense: dict[tuple[int, str], np.ndarray] = {}

    def _column_dense(self, ci: int, stream: str) -> np.ndarray:
        got = self._dense.get((ci, stream))
        if got is None:
            col = self.chunks[ci].columns[stream]
            if getattr(col, "is_sparse", False):
                got = densify_sparse(np.asarray(col.values), np.asarray(col.indices), np.asarray(col.indptr), col.dim)
            else:
                got = np.asarray(col.values)
            self._dense[(ci, stream)] = got
        return got

    def samples(self, seq: int, stream: str) -> np.ndarray:
        ci, i = self._where[seq]
        offs = self.chunks[ci].columns[stream].seq_offsets
        return self._column_dense(ci, stream)[int(offs[i]):int(offs[i + 1])]


# ---------------------------------------------------------------------------------------------
# NoRandomizer: file order, epochs and minibatch requests (single worker by default)


class NoRandomizer:
    """CNTK's NoRandomizer over sequences with the given sizing lengths (file order).

    Positions are global sample positions on an endless repetition of sweeps.
    ``workers``/``rank`` reproduce its sequence-based distribution (sequence number g
    since the last ``start_epoch`` belongs to worker ``g % workers``); the conformance
    cases here use one worker.
    """

    def __init__(self, lengths: Sequence[int], workers: int = 1, rank: int = 0):
        self.lengths = [int(x) for x in lengths]
        if any(x < 0 for x in self.lengths):
            raise ValueError("negative sequence length")
        self.sweep_size = sum(self.lengths)
        if not self.lengths or self.sweep_size == 0:
            raise ValueError("NoRandomizer: Expected input to contain samples, "
                             "but the number of successfully read samples was 0.")
        if not 0 <= rank < workers:
            raise ValueError(f"rank {rank} outside 0..{workers - 1}")
        self.workers, self.rank = workers, rank
        # starts[i]: sample offset of sequence i inside a sweep
        self.starts = [0]
        for n in self.lengths[:-1]:
            self.starts.append(self.starts[-1] + n)
        self.position = 0        # global sample position
        self.seq = 0             # next sequence (index in file order)
        self.global_seq = 0      # sequences passed since the sweep start at the last start_epoch
        self.epoch_end = 0

    def start_epoch(self, epoch_size: int, epoch_index: int) -> None:
        """StartEpoch: epoch e covers [e*size, (e+1)*size); the cursor moves forward to a boundary."""
        if epoch_size <= 0:
            raise ValueError("Epoch size cannot be 0.")
        self.epoch_end = epoch_size * (epoch_index + 1)
        self.set_position(epoch_size * epoch_index)

    def set_position(self, position: int) -> None:
        """SetCurrentSamplePosition: first sequence boundary at or after ``position``."""
        sweep_start = position - position % self.sweep_size
        i = bisect.bisect_left(self.starts, position % self.sweep_size)
        if i == len(self.starts):  # inside the last sequence: the boundary is the next sweep
            self.position, self.seq, self.global_seq = sweep_start + self.sweep_size, 0, 0
        else:
            self.position, self.seq, self.global_seq = sweep_start + self.starts[i], i, i

    def next_minibatch(self, mb_size: int) -> tuple[list[int], bool]:
        """GetNextSequences(mb, mb): (sequence indices for this worker, end-of-epoch flag).

        The request is capped to the samples left in the epoch and in the current sweep
        (the old reader path never crosses a sweep boundary). The first sequence is
        always taken; later ones only while they fit.
        """
        if mb_size <= 0:
            raise ValueError("minibatch size must be positive")
        if self.position >= self.epoch_end:
            return [], True
        global_count = min(mb_size, self.epoch_end - self.position)
        global_count = min(global_count, self.sweep_size - self.position % self.sweep_size)
        local_count = mb_size
        result: list[int] = []
        loaded_global = loaded_local = 0
        while global_count > loaded_global and local_count > loaded_local:
            n = self.lengths[self.seq]
            is_local = self.global_seq % self.workers == self.rank
            enough = bool(result)
            if enough and global_count - loaded_global < n:
                break
            if enough and is_local and local_count - loaded_local < n:
                break
            if is_local:
                result.append(self.seq)
                loaded_local += n
            loaded_global += n
            self.position += n
            self.global_seq += 1
            self.seq = (self.seq + 1) % len(self.lengths)
        return result, self.position >= self.epoch_end


class SweepOrderRandomizer:
    """CNTK's BlockRandomizer on the old reader path, one worker, given each sweep's order.

    ``sweep_order(k)`` returns the sequences of sweep k (indices into ``lengths``, file
    order numbering) in the order the randomizer delivers them: a permutation of
    ``range(len(lengths))``. For CNTK's BlockRandomizer that is the chunk shuffle plus the
    rolling sequence shuffle with ``std::mt19937_64`` seeded with ``seed + k``
    (recordkit's ``engine.randomizer.BlockRandomizer.sweep(k)`` provides it; this module
    stays free of recordkit imports). The bookkeeping is the one both randomizers share
    (spec 5.1, ``BlockRandomizer.cpp`` StartEpoch / SetCurrentSamplePosition /
    GetNextSequences, ``SequenceRandomizer.cpp``):

    * sweep k covers global sample positions [k*S, (k+1)*S), S = the sweep's samples;
      a new sweep gets its own order (re-randomized with the next seed);
    * epoch e covers [e*epochSize, (e+1)*epochSize); its start moves forward to the first
      sequence boundary *in sweep k's order* at or after e*epochSize;
    * a request is capped to the samples left in the epoch and in the current sweep (the
      old path does not let minibatches cross sweeps); the first sequence is always taken,
      later ones only while they fit.

    Distributed reading (chunk-based: a sequence is local to worker ``randomized chunk id
    mod workers``) is not modelled here; case 36 is checked through recordkit's own
    MinibatchSource partitions instead.
    """

    def __init__(self, lengths: Sequence[int], sweep_order):
        self.lengths = [int(x) for x in lengths]
        if any(x < 0 for x in self.lengths):
            raise ValueError("negative sequence length")
        self.sweep_size = sum(self.lengths)
        if not self.lengths or self.sweep_size == 0:
            raise ValueError("BlockRandomizer: the data holds no samples")
        self._sweep_order = sweep_order
        self.sweep_index = -1
        self.order: list[int] = []
        self.starts: list[int] = []   # sample offset of each order position inside the sweep
        self.cursor = 0               # next position in ``order``
        self.position = 0             # global sample position
        self.epoch_end = 0

    def _prepare_sweep(self, sweep: int) -> None:
        """PrepareNewSweepIfNeeded: the order of sweep ``sweep`` (computed once per sweep)."""
        if sweep == self.sweep_index:
            return
        order = [int(i) for i in self._sweep_order(sweep)]
        if sorted(order) != list(range(len(self.lengths))):
            raise ValueError(f"sweep {sweep}: the order is not a permutation of the {len(self.lengths)} sequences")
        self.sweep_index, self.order = sweep, order
        self.starts = [0]
        for i in order[:-1]:
            self.starts.append(self.starts[-1] + self.lengths[i])

    def start_epoch(self, epoch_size: int, epoch_index: int) -> None:
        if epoch_size <= 0:
            raise ValueError("Epoch size cannot be 0.")
        self.epoch_end = epoch_size * (epoch_index + 1)
        self.set_position(epoch_size * epoch_index)

    def set_position(self, position: int) -> None:
        """SetCurrentSamplePosition: first boundary at or after ``position`` in that sweep's order."""
        sweep = position // self.sweep_size
        self._prepare_sweep(sweep)
        i = bisect.bisect_left(self.starts, position % self.sweep_size)
        if i == len(self.starts):  # inside the last sequence: the boundary is the next sweep's start
            self.position, self.cursor = (sweep + 1) * self.sweep_size, len(self.order)
        else:
            self.position, self.cursor = sweep * self.sweep_size + self.starts[i], i

    def next_minibatch(self, mb_size: int) -> tuple[list[int], bool]:
        """GetNextSequences(mb, mb): (sequence indices, end-of-epoch flag)."""
        if mb_size <= 0:
            raise ValueError("minibatch size must be positive")
        if self.position >= self.epoch_end:
            return [], True
        sweep = self.position // self.sweep_size
        if sweep != self.sweep_index:  # the previous minibatch ended the sweep
            self._prepare_sweep(sweep)
            self.cursor = 0
        global_count = min(mb_size, self.epoch_end - self.position,
                           self.sweep_size - self.position % self.sweep_size)
        result: list[int] = []
        loaded = 0
        while loaded < global_count and self.cursor < len(self.order):
            seq = self.order[self.cursor]
            n = self.lengths[seq]
            if result and global_count - loaded < n:
                break
            result.append(seq)
            loaded += n
            self.position += n
            self.cursor += 1
        return result, self.position >= self.epoch_end


def epoch_minibatches(randomizer, mb_size: int) -> Iterator[list[int]]:
    """The old ReaderShim's GetMinibatch loop for one epoch.

    A minibatch that carries end-of-epoch *and* data is still returned; then (or on an
    empty minibatch, which the old shim reports as "no data") the epoch is over.
    """
    while True:
        seqs, end_of_epoch = randomizer.next_minibatch(mb_size)
        if not seqs:
            return
        yield seqs
        if end_of_epoch:
            return


# ---------------------------------------------------------------------------------------------
# SequencePacker layout


@dataclass(frozen=True)
class Layout:
    """An MBLayout of packed sequences: P rows (parallel sequences) x T time steps.

    ``placements[k] = (row, begin)`` of the k-th delivered sequence; ``lengths[k]`` its
    sample count in this stream. Everything else in a row is a gap.
    """

    num_rows: int
    num_steps: int
    placements: tuple
    lengths: tuple

    def columns(self) -> list[tuple[int, int]]:
        """Non-gap columns in output order (time-major: all rows at t=0, then t=1, ...).

        Column index i = t*P + s; each entry is (k, j): sample j of delivered sequence k.
        """
        grid: dict[tuple[int, int], tuple[int, int]] = {}
        for k, ((row, begin), n) in enumerate(zip(self.placements, self.lengths)):
            for j in range(n):
                grid[(begin + j, row)] = (k, j)
        return [grid[(t, s)] for t in range(self.num_steps) for s in range(self.num_rows) if (t, s) in grid]


def pack_layout(lengths: Sequence[int]) -> Layout:
    """MBLayout::InitAsPackedSequences: T = longest sequence; first-fit rows in delivery order.

    Each sequence goes right after what is already in the first row whose used length
    plus its own is <= T; if none fits a new row is opened.
    """
    lengths = tuple(int(n) for n in lengths)
    width = max(lengths, default=0)
    used: list[int] = []
    placements = []
    for n in lengths:
        for row, filled in enumerate(used):
            if filled + n <= width:
                break
        else:
            row = len(used)
            used.append(0)
        placements.append((row, used[row]))
        used[row] += n
    return Layout(len(used), width, tuple(placements), lengths)


class LayoutMismatchError(RuntimeError):
    """Shared-layout mode: two streams of one minibatch produced different MBLayouts (CNTK throws)."""


# ---------------------------------------------------------------------------------------------
# The helper's writer


def format_value(v) -> str:
    """C++ ``ofstream << v`` with default flags (precision 6, %g style): ``'%g' % v``."""
    return "%g" % float(v)


def format_column(values) -> str:
    """One output line: ``dim`` values separated by single spaces."""
    return " ".join(["%g" % v for v in np.asarray(values).tolist()])


def minibatch_lines(source: SequenceSource, seqs: Sequence[int], streams: Sequence[str],
                    shared_layout: bool = True) -> list[str]:
    """The lines the helper writes for one minibatch: each stream in order, time-major columns."""
    per_stream = {name: [source.samples(i, name) for i in seqs] for name in streams}
    layouts = {name: pack_layout([a.shape[0] for a in data]) for name, data in per_stream.items()}
    if shared_layout:
        first = streams[0]
        for name in streams[1:]:
            if layouts[name] != layouts[first]:
                raise LayoutMismatchError(
                    f"shared layout: stream {name!r} has sequence lengths {layouts[name].lengths}, "
                    f"stream {first!r} has {layouts[first].lengths}")
    lines = []
    for name in streams:
        data = per_stream[name]
        for k, j in layouts[name].columns():
            lines.append(format_column(data[k][j]))
    return lines


def run_reader_test(source: SequenceSource, streams: Sequence[str], epoch_size: int, mb_size: int,
                    num_epochs: int, shared_layout: bool = True,
                    max_minibatches: int = MAX_MINIBATCHES_PER_EPOCH, sweep_order=None) -> str:
    """HelperRunReaderTest for one worker: the whole output text.

    ``sweep_order`` None: randomize=false (NoRandomizer, file order). Otherwise the
    BlockRandomizer's order of each sweep (see ``SweepOrderRandomizer``).
    """
    randomizer = make_randomizer(source.lengths, sweep_order)
    lines: list[str] = []
    for epoch in range(num_epochs):
        randomizer.start_epoch(epoch_size, epoch)
        for count, seqs in enumerate(epoch_minibatches(randomizer, mb_size)):
            if count >= max_minibatches:  # the 11th fetch is made but not written
                break
            lines.extend(minibatch_lines(source, seqs, streams, shared_layout))
    return "".join(line + "\n" for line in lines)


def make_randomizer(lengths: Sequence[int], sweep_order=None):
    """NoRandomizer (``sweep_order`` None) or the old-path BlockRandomizer over the given orders."""
    return NoRandomizer(lengths) if sweep_order is None else SweepOrderRandomizer(lengths, sweep_order)


def epoch_schedule(lengths: Sequence[int], epoch_size: int, mb_size: int, num_epochs: int,
                   max_minibatches: int = MAX_MINIBATCHES_PER_EPOCH, sweep_order=None) -> list[list[list[int]]]:
    """The sequence indices of every written minibatch, per epoch (for tests and debugging)."""
    randomizer = make_randomizer(lengths, sweep_order)
    out = []
    for epoch in range(num_epochs):
        randomizer.start_epoch(epoch_size, epoch)
        batches = []
        for count, seqs in enumerate(epoch_minibatches(randomizer, mb_size)):
            if count >= max_minibatches:
                break
            batches.append(seqs)
        out.append(batches)
    return out


# ---------------------------------------------------------------------------------------------
# Comparison


def tokens(text: str) -> list[str]:
    """Whitespace-separated tokens: what the helper compares (line breaks do not matter)."""
    return text.split()


def token_mismatch(actual: Sequence[str], expected: Sequence[str], context: int = 4) -> str | None:
    """None if the token sequences are equal, else a short description of the first difference."""
    actual, expected = list(actual), list(expected)
    if actual == expected:
        return None
    n = min(len(actual), len(expected))
    i = next((k for k in range(n) if actual[k] != expected[k]), n)
    lo = max(0, i - context)
    return (f"{len(actual)} tokens written, control has {len(expected)}; first difference at token {i}: "
            f"wrote {actual[lo:i + context]!r}, control {expected[lo:i + context]!r}")
