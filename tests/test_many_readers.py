"""Many OS processes reading disjoint partitions of the same files.

Every process opens the *same* CTF file, CBF file and OFRecord directory and reads
partition ``i`` of ``N`` with ``MinibatchSource`` (``next_minibatch(size,
num_data_partitions=N, partition_index=i)``), in file order and randomized, for two
sweeps. The processes are real (multiprocessing's ``spawn`` context: nothing is
inherited from the test process, as under a launcher or torchrun), so what is checked
is what the engine promises across processes that never talk to each other: each
computes the same sweep order and the same cut from the file alone.

Checked per format, per randomization setting and per sweep:

* the shares are pairwise disjoint and their union is every sequence exactly once,
  with the right values (each process reports a digest of the values it delivered for
  each key, compared with the digest of what was written under that key);
* the shares hold about equal samples: within one chunk's worth for every format; for
  CTF and CBF within two sequences (the engine cuts the sweep order into runs of equal
  *estimated* samples and their indexes know every sequence's length). OFRecord's index
  only counts records, which the engine takes as one sample each, so there the cut
  balances records and the samples follow only on average;
* randomized sweeps differ from each other (sweep k uses seed + k) and from file order,
  and a second set of processes with the same seed delivers exactly the same thing;
* a checkpoint taken in one process, restored in a fresh process, continues that
  partition with exactly the sequences the first process went on to deliver.

The data is tiny (a few hundred sequences, chunks of a few hundred bytes) so there are
many chunks per partition and the test takes a few seconds, mostly process start-up.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import zlib
from collections import Counter

import pytest

from helpers import dense, sparse

NUM_SEQ = 240
MB_SIZE = 16          # samples per minibatch: many minibatches per share
WINDOW = 4            # randomization window in chunks, well below the number of chunks
SEED = 11
SWEEPS = 2
CHECKPOINT_AFTER = 3  # minibatches read before the checkpoint is taken
FORMATS = ("ctf", "cbf", "ofrecord")


def length_of(k: int) -> int:
    return 1 + (k * 7) % 5


def sample_values(k: int, t: int) -> tuple[list, int]:
    """The dense ``x`` (dim 2) and the one sparse ``y`` index (dim 7) of sample t of sequence k."""
    return [k + 0.5, float(t)], (k + t) % 7


def digest(x_rows: list, y_indices: list) -> int:
    return zlib.crc32(repr((x_rows, y_indices)).encode())


def expected_digest(k: int) -> int:
    rows = [sample_values(k, t) for t in range(length_of(k))]
    return digest([x for x, _ in rows], [y for _, y in rows])


STREAMS = [dense("x", 2), sparse("y", 7)]


# ------------------------------------------------------------------------------------------------
# what runs in each process (module level, so that spawned processes can import it)

def _open(fmt: str, paths: dict):
    from recordkit.formats.cbf import CBFReader
    from recordkit.formats.ctf import CTFReader
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    if fmt == "ctf":
        return CTFReader(paths["ctf"], STREAMS, chunk_size=400)
    if fmt == "cbf":
        return CBFReader(paths["cbf"])
    return OFRecordDeserializer(paths["ofrecord"], STREAMS, records_per_chunk=12)


def _source(fmt, paths, randomize):
    from recordkit.engine.source import MinibatchSource
    return MinibatchSource(_open(fmt, paths), randomize=randomize, window=WINDOW, seed=SEED, max_sweeps=SWEEPS,
                           threads=1)


def _delivered(mb) -> list:
    """[sweep, key, samples, digest of the values] for every sequence of a minibatch."""
    xs = mb["x"].as_sequences()
    ys = mb["y"].as_sequences()
    return [[int(s), int(k), int(n), digest(x.tolist(), y.indices.tolist())]
            for s, k, n, x, y in zip(mb.sweeps.tolist(), mb.keys.tolist(), mb.lengths.tolist(), xs, ys)]


def _read_partitions(paths, n, i):
    """Partition i of n of every format, in file order and randomized; plus a checkpoint of each."""
    out = {"pid": os.getpid(), "runs": {}, "checkpoints": {}}
    for fmt in FORMATS:
        for randomize in (False, True):
            src = _source(fmt, paths, randomize)
            seqs, state, taken = [], None, 0
            while (mb := src.next_minibatch(MB_SIZE, num_data_partitions=n, partition_index=i)) is not None:
                seqs += _delivered(mb)
                taken += 1
                if randomize and taken == CHECKPOINT_AFTER:
                    state = {"state": json.loads(json.dumps(src.get_checkpoint_state())), "at": len(seqs)}
            src.close()
            out["runs"][f"{fmt}/{randomize}"] = seqs
            if state is not None:
                out["checkpoints"][fmt] = state
    return out


def _restore(paths, n, states):
    """In a fresh process: restore each format's checkpoint of partition (n, i) and read on."""
    out = {"pid": os.getpid(), "rest": {}}
    for key, st in states.items():
        fmt, i = key.split("/")
        src = _source(fmt, paths, True)
        src.restore_from_checkpoint(st)
        seqs = []
        while (mb := src.next_minibatch(MB_SIZE, num_data_partitions=n, partition_index=int(i))) is not None:
            seqs += _delivered(mb)
        src.close()
        out["rest"][key] = seqs
    return out


def _child(queue, index, func, args):
    try:
        queue.put((index, func(*args), None))
    except BaseException as e:  # report instead of hanging the parent
        queue.put((index, None, repr(e)))


def run_processes(jobs: list, timeout: float = 60) -> list:
    """Run each (function, args) in its own spawned process, all at once; their results in order."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(queue, k, func, args)) for k, (func, args) in enumerate(jobs)]
    for p in procs:
        p.start()
    results = [None] * len(jobs)
    try:
        for _ in jobs:
            k, result, error = queue.get(timeout=timeout)
            assert error is None, f"process {k} failed: {error}"
            results[k] = result
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    assert len({r["pid"] for r in results}) == len(jobs)  # really one OS process each
    return results


# ------------------------------------------------------------------------------------------------
# the data: one CTF file, its CBF conversion and a two-part OFRecord directory

@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    from recordkit.cli.main import main
    d = tmp_path_factory.mktemp("many_readers")
    lines = []
    for k in range(NUM_SEQ):
        for t in range(length_of(k)):
            x, y = sample_values(k, t)
            lines.append(f"{k} |x {x[0]} {x[1]:g} |y {y}:1")
    ctf = d / "data.ctf"
    ctf.write_text("\n".join(lines) + "\n")
    decl = ["--stream", "x=dense:2", "--stream", "y=sparse:7"]
    assert main(["convert", str(ctf), str(d / "data.cbf"), *decl, "--output-chunk-size", "300"]) == 0
    assert main(["convert", str(ctf), str(d / "ofr"), "--to", "ofrecord", "--parts", "2", *decl]) == 0
    p = {"ctf": str(ctf), "cbf": str(d / "data.cbf"), "ofrecord": str(d / "ofr")}
    for fmt in FORMATS:  # many chunks, more than the window, so that partitions and windows matter
        assert len(_open(fmt, p).chunks) >= 3 * WINDOW, fmt
    return p


@pytest.fixture(scope="module")
def three_way(paths):
    return run_processes([(_read_partitions, (paths, 3, i)) for i in range(3)])


def file_order(fmt: str) -> list:
    """Keys in storage order: file order for every format (convert writes OFRecord parts as
    contiguous runs)."""
    return list(range(NUM_SEQ))


def check_shares(results, paths):
    """Disjoint, complete, right values, balanced: per format, randomization and sweep.

    Balanced: within one chunk's worth of samples for every format; for CTF and CBF, whose
    index knows each sequence's length, within two sequences (each cut is off by less than
    one). OFRecord's index knows only the number of records, which the engine takes as
    one sample each, so there the cut balances records, not samples.
    """
    expected = {k: (length_of(k), expected_digest(k)) for k in range(NUM_SEQ)}
    max_len = max(length_of(k) for k in range(NUM_SEQ))
    chunk_worth = {}  # the mean samples of a chunk, per format
    for fmt in FORMATS:
        reader = _open(fmt, paths)
        chunk_worth[fmt] = sum(length_of(k) for k in range(NUM_SEQ)) / len(reader.chunks)
    for run in results[0]["runs"]:
        fmt = run.split("/")[0]
        orders = []
        for sweep in range(SWEEPS):
            shares = [[(k, n, h) for s, k, n, h in r["runs"][run] if s == sweep] for r in results]
            keys = [k for share in shares for k, _, _ in share]
            counts = Counter(keys)
            assert sorted(counts) == list(range(NUM_SEQ)), f"{run} sweep {sweep}: sequences lost"
            dup = [k for k, c in counts.items() if c > 1]
            assert not dup, f"{run} sweep {sweep}: sequences read twice: {dup[:10]}"
            for share in shares:
                for k, n, h in share:
                    assert (n, h) == expected[k], f"{run} sweep {sweep}: wrong values for key {k}"
            samples = [sum(n for _, n, _ in share) for share in shares]
            spread = max(samples) - min(samples)
            assert spread <= chunk_worth[fmt], f"{run} sweep {sweep}: unbalanced {samples}"
            if fmt in ("ctf", "cbf"):  # the index knows every sequence's length: cut on samples
                assert spread <= 2 * max_len, f"{run} sweep {sweep}: unbalanced {samples}"
            else:  # OFRecord's index only counts records (1 sample each, as far as the engine knows)
                sizes = [len(share) for share in shares]
                assert max(sizes) - min(sizes) <= 2, f"{run} sweep {sweep}: unbalanced records {sizes}"
            orders.append(keys)
        if run.endswith("True"):
            assert orders[0] != orders[1], f"{run}: both sweeps in the same order"
            assert orders[0] != file_order(fmt), f"{run}: not randomized"
        else:
            assert orders[0] == orders[1] == file_order(fmt), f"{run}: not file order"


def test_two_processes_read_disjoint_complete_balanced_partitions(paths):
    check_shares(run_processes([(_read_partitions, (paths, 2, i)) for i in range(2)]), paths)


def test_three_processes_read_disjoint_complete_balanced_partitions(paths, three_way):
    check_shares(three_way, paths)


def test_same_seed_gives_the_same_partitions_on_a_rerun(paths, three_way):
    again = run_processes([(_read_partitions, (paths, 3, i)) for i in range(3)])
    for first, second in zip(three_way, again):
        assert first["runs"] == second["runs"]


def test_checkpoint_of_a_partition_continues_in_a_fresh_process(paths, three_way):
    states = {f"{fmt}/{i}": r["checkpoints"][fmt]["state"] for i, r in enumerate(three_way) for fmt in FORMATS}
    (restored,) = run_processes([(_restore, (paths, 3, states))])
    for i, r in enumerate(three_way):
        for fmt in FORMATS:
            at = r["checkpoints"][fmt]["at"]
            assert at > 0
            assert restored["rest"][f"{fmt}/{i}"] == r["runs"][f"{fmt}/True"][at:], (fmt, i)
