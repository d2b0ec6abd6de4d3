"""Elastic resume: a job's checkpoints continue on another number of partitions.

Simulated ranks: every partition is a MinibatchSource in this process. The old job's partitions
stop at random places (different numbers of minibatches, some in the next sweep, some having
taken nothing); the new job resumes from the list of their states. Over both jobs, every
(sweep, sequence) the data holds up to its end (max_sweeps / max_samples) is delivered exactly
once: what a single reader delivers.
"""
import collections
import json
import random

import numpy as np
import pytest

from helpers import write_valued_cbf
from recordkit.engine.elastic import ElasticPlan, cut_run, share_bounds
from recordkit.engine.source import MinibatchSource
from recordkit.engine.streams import StreamSpec
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """97 sequences of 1..5 samples, in chunks of a few sequences each."""
    return write_valued_cbf(tmp_path_factory.mktemp("elastic") / "d.cbf", 97, longest=5)


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    """One sample per sequence (frame mode)."""
    path = tmp_path_factory.mktemp("elastic") / "f.cbf"
    with CBFWriter(path, [StreamSpec("x", "dense", 2)], chunk_size=128) as w:
        for i in range(83):
            w.write({"x": np.full((1, 2), i, dtype=np.float32)})
    return str(path)


def take(src, count, size, part, out):
    """Up to ``count`` minibatches as partition ``part``; False once the data ended."""
    for _ in range(count):
        mb = src.next_minibatch(size, num_data_partitions=part[0], partition_index=part[1])
        if mb is None:
            return False
        out.update(zip(mb.sweeps.tolist(), mb.keys.tolist()))
    return True


def drain(src, size, part, out):
    while take(src, 64, size, part, out):
        pass


def run_job(path, kw, size, sizes, rng, *, none_for_idle=True):
    """Partitions ``sizes[0]``, then resized to ``sizes[1]``, ...; each but the last stage stops
    at random places. Returns what all stages delivered, counted."""
    got = collections.Counter()
    states = None
    for stage, n in enumerate(sizes):
        new = []
        for i in range(n):
            src = MinibatchSource(CBFReader(path), **kw)
            if states is not None:
                src.restore_from_checkpoint(json.loads(json.dumps(states)), num_data_partitions=n,
                                            partition_index=i)
            if stage == len(sizes) - 1:
                drain(src, size, (n, i), got)
                continue
            k = rng.randint(0, 9)
            resized = stage == 0 or sizes[stage - 1] != n
            if k == 0 and none_for_idle and resized and (stage == 0 or any(s is not None for s in new)):
                new.append(None)  # a partition that took nothing since the job (or its resize) began
                continue
            take(src, k, size, (n, i), got)
            new.append(src.get_checkpoint_state())
        states = new
    return got


def reference(path, kw, size):
    out = collections.Counter()
    drain(MinibatchSource(CBFReader(path), **kw), size, (1, 0), out)
    return out


def settings(rng):
    kw = dict(randomize=rng.random() < 0.7, seed=rng.randint(0, 9), window=rng.choice([None, 1, 2]))
    if rng.random() < 0.5:
        kw["max_sweeps"] = 3
    else:
        kw["max_samples"] = rng.randint(60, 800)
    return kw


@pytest.mark.parametrize("n_old", [1, 2, 3, 5])
@pytest.mark.parametrize("m_new", [1, 2, 4, 7])
@pytest.mark.parametrize("randomize", [True, False])
def test_every_sequence_is_delivered_exactly_once_across_a_resize(data, n_old, m_new, randomize):
    for trial in range(6):
        rng = random.Random(f"{n_old}-{m_new}-{randomize}-{trial}")
        kw = settings(rng)
        kw["randomize"] = randomize
        size = rng.randint(1, 40)
        assert run_job(data, kw, size, [n_old, m_new], rng) == reference(data, kw, size), (trial, kw, size)


def test_resizing_again_before_the_rest_was_delivered_keeps_the_guarantee(data):
    for trial in range(40):
        rng = random.Random(trial)
        kw = settings(rng)
        if rng.random() < 0.3:
            kw["epoch_size"] = rng.randint(20, 200)
        sizes = [rng.randint(1, 5) for _ in range(rng.randint(3, 4))]
        size = rng.randint(1, 40)
        assert run_job(data, kw, size, sizes, rng) == reference(data, kw, size), (trial, sizes, kw, size)


def test_sample_based_windows_and_frame_mode(frames):
    for trial in range(12):
        rng = random.Random(100 + trial)
        kw = dict(randomize=True, seed=trial, window=rng.choice([10, 25]), sample_based_window=True,
                  frame_mode=True, max_sweeps=2)
        size = rng.randint(1, 16)
        sizes = [rng.randint(1, 4), rng.randint(1, 4)]
        assert run_job(frames, kw, size, sizes, rng) == reference(frames, kw, size), (trial, sizes)


def test_the_sweeps_after_the_interrupted_one_are_ordinary_sweeps_of_the_new_split(data):
    kw = dict(randomize=True, seed=4, window=2, max_sweeps=4)
    old = [MinibatchSource(CBFReader(data), **kw) for _ in range(3)]
    for i, src in enumerate(old):
        take(src, 2 + 3 * i, 8, (3, i), collections.Counter())
    states = [s.get_checkpoint_state() for s in old]
    resume_sweep = None
    for j in range(2):
        resumed = MinibatchSource(CBFReader(data), **kw)
        resumed.restore_from_checkpoint(states, num_data_partitions=2, partition_index=j)
        resume_sweep = resumed.get_checkpoint_state()["elastic"]["resume_sweep"]
        fresh = MinibatchSource(CBFReader(data), **kw)
        a, b = [], []
        for src, out in ((resumed, a), (fresh, b)):
            for mb in src.minibatches(8, num_data_partitions=2, partition_index=j):
                out.extend((s, k) for s, k in zip(mb.sweeps.tolist(), mb.keys.tolist()) if s >= resume_sweep)
        assert a and a == b
    assert resume_sweep == 1


def test_a_checkpoint_taken_during_the_rest_resumes_exactly(data):
    """Same split: the exact resume holds inside the elastic run too (same minibatches next)."""
    kw = dict(randomize=True, seed=1, max_sweeps=2)
    old = [MinibatchSource(CBFReader(data), **kw) for _ in range(2)]
    for i, src in enumerate(old):
        take(src, 3 + i, 8, (2, i), collections.Counter())
    states = [s.get_checkpoint_state() for s in old]
    a = MinibatchSource(CBFReader(data), **kw)
    a.restore_from_checkpoint(states, num_data_partitions=3, partition_index=1)
    take(a, 2, 8, (3, 1), collections.Counter())
    mid = json.loads(json.dumps(a.get_checkpoint_state()))
    assert mid["elastic"]["run_position"] > 0
    b = MinibatchSource(CBFReader(data), **kw)
    b.restore_from_checkpoint(mid)
    for x, y in zip(a.minibatches(8, num_data_partitions=3, partition_index=1),
                    b.minibatches(8, num_data_partitions=3, partition_index=1)):
        assert x.keys.tolist() == y.keys.tolist() and x.sweeps.tolist() == y.sweeps.tolist()
        np.testing.assert_array_equal(x["x"].data, y["x"].data)


def test_the_same_number_of_partitions_is_the_exact_resume_of_each(data):
    kw = dict(randomize=True, seed=2, max_sweeps=2)
    old = [MinibatchSource(CBFReader(data), **kw) for _ in range(3)]
    for i, src in enumerate(old):
        take(src, i + 1, 8, (3, i), collections.Counter())
    states = [s.get_checkpoint_state() for s in old]
    for i in range(3):
        by_list = MinibatchSource(CBFReader(data), **kw)
        by_list.restore_from_checkpoint(states, num_data_partitions=3, partition_index=i)
        alone = MinibatchSource(CBFReader(data), **kw)
        alone.restore_from_checkpoint(states[i])
        assert by_list.get_checkpoint_state() == alone.get_checkpoint_state()
        assert "elastic" not in by_list.get_checkpoint_state()


def test_truncated_bptt_sequences_begun_by_old_partitions_are_continued_not_repeated(data):
    """BPTT: every step of every sequence once, begun sequences continued from their offset."""
    def steps(src, count, size, part, out):
        for _ in range(count):
            mb = src.next_minibatch(size, num_data_partitions=part[0], partition_index=part[1])
            if mb is None:
                return False
            out.update(mb.extra["keys"][mb.streams["x"].mask].tolist())
        return True

    for trial in range(30):
        rng = random.Random(200 + trial)
        T = rng.randint(1, 3)
        kw = dict(randomize=rng.random() < 0.7, seed=trial, window=rng.choice([None, 2]), max_sweeps=1,
                  truncation_length=T)
        size = T * rng.randint(1, 4)
        ref = collections.Counter()
        while steps(MinibatchSource(CBFReader(data), **kw), 10_000, size, (1, 0), ref):
            pass
        got, states = collections.Counter(), None
        sizes = [rng.randint(1, 5) for _ in range(rng.randint(2, 3))]
        for stage, n in enumerate(sizes):
            new = []
            for i in range(n):
                src = MinibatchSource(CBFReader(data), **kw)
                if states is not None:
                    src.restore_from_checkpoint(states, num_data_partitions=n, partition_index=i)
                if stage == len(sizes) - 1:
                    while steps(src, 64, size, (n, i), got):
                        pass
                else:
                    steps(src, rng.randint(0, 8), size, (n, i), got)
                    new.append(json.loads(json.dumps(src.get_checkpoint_state())))
            states = new
        assert got == ref, (trial, sizes, kw, size)


def test_ctf_input_and_the_partition_from_the_constructor(tmp_path):
    path = tmp_path / "s.ctf"
    path.write_text("".join(f"{k} |a {k} {k}\n" * (k % 3 + 1) for k in range(40)))
    make = lambda **kw: MinibatchSource(CTFReader(str(path), [StreamSpec("a", "dense", 2)]), randomize=True,
                                        seed=5, max_sweeps=1, **kw)
    got = collections.Counter()
    old = [make(num_data_partitions=4, partition_index=i) for i in range(4)]
    for i, src in enumerate(old):
        take(src, i, 3, (4, i), got)
    states = [s.get_checkpoint_state() for s in old]
    for j in range(3):
        src = make(num_data_partitions=3, partition_index=j)
        src.restore_from_checkpoint(states)  # the partition the source was built with
        for mb in src.minibatches(3):
            got.update(zip(mb.sweeps.tolist(), mb.keys.tolist()))
    ref = collections.Counter()
    drain(make(), 3, (1, 0), ref)
    assert got == ref


# -- errors ------------------------------------------------------------------------------------------

def states_of(data, n, kw=None, count=2):
    kw = kw or dict(randomize=True, seed=3, max_sweeps=2)
    out = []
    for i in range(n):
        src = MinibatchSource(CBFReader(data), **kw)
        take(src, count, 8, (n, i), collections.Counter())
        out.append(src.get_checkpoint_state())
    return out


def fresh(data, **kw):
    kw = kw or dict(randomize=True, seed=3, max_sweeps=2)
    return MinibatchSource(CBFReader(data), **kw)


def test_states_out_of_partition_order_are_refused(data):
    states = states_of(data, 3)
    with pytest.raises(ValueError, match="state 0 of 3: .*partition 1 of 3.*partition order"):
        fresh(data).restore_from_checkpoint([states[1], states[0], states[2]], num_data_partitions=2,
                                            partition_index=0)


def test_a_missing_partition_is_refused(data):
    states = states_of(data, 3)
    with pytest.raises(ValueError, match="state 0 of 2: .*partition 0 of 3"):
        fresh(data).restore_from_checkpoint(states[:2], num_data_partitions=2, partition_index=0)


def test_states_of_another_data_set_or_setting_are_refused(data):
    states = states_of(data, 2)
    with pytest.raises(ValueError, match="state 0 of 2: .*other data or another randomization"):
        fresh(data, randomize=True, seed=4, max_sweeps=2).restore_from_checkpoint(states, num_data_partitions=3,
                                                                                 partition_index=0)


def test_states_of_two_jobs_are_refused(data):
    plain = states_of(data, 2)
    src = fresh(data)
    src.restore_from_checkpoint(plain, num_data_partitions=3, partition_index=0)
    take(src, 1, 8, (3, 0), collections.Counter())
    resized = src.get_checkpoint_state()
    other = states_of(data, 3)  # a job of 3 that was never resized
    with pytest.raises(ValueError, match="different jobs"):
        fresh(data).restore_from_checkpoint([resized, other[1], other[2]], num_data_partitions=2,
                                            partition_index=0)


def test_a_refused_list_leaves_the_source_as_it_was(data):
    src = fresh(data)
    take(src, 3, 8, (1, 0), collections.Counter())
    before = src.get_checkpoint_state()
    with pytest.raises(ValueError):
        src.restore_from_checkpoint([None, {"recordkit_state": 1}], num_data_partitions=2, partition_index=0)
    assert src.get_checkpoint_state() == before


def test_a_tampered_elastic_field_is_named(data):
    src = fresh(data)
    src.restore_from_checkpoint(states_of(data, 2), num_data_partitions=3, partition_index=0)
    take(src, 1, 8, (3, 0), collections.Counter())
    state = src.get_checkpoint_state()
    for field, value in (("pending", [[0, 5, 2]]), ("partitions", 0), ("run_position", -1),
                         ("pending", [[0, 0, 10 ** 9]]), ("carry", [[0, 1]])):
        bad = json.loads(json.dumps(state))
        bad["elastic"][field] = value
        with pytest.raises(ValueError, match="checkpoint field 'elastic'"):
            fresh(data).restore_from_checkpoint(bad)


def test_bptt_states_need_truncated_bptt_to_resume(data):
    kw = dict(randomize=False, max_sweeps=1, truncation_length=3)
    src = MinibatchSource(CBFReader(data), **kw)
    src.next_minibatch(6, num_data_partitions=1, partition_index=0)
    state = src.get_checkpoint_state()
    assert any(o for q in state["bptt"]["slots"] for _, _, o in q)
    with pytest.raises(ValueError, match="truncation_length"):
        MinibatchSource(CBFReader(data), randomize=False, max_sweeps=1).restore_from_checkpoint(
            [state], num_data_partitions=2, partition_index=0)


def test_a_state_from_within_an_elastic_run_resumes_only_its_own_partition(data):
    src = fresh(data)
    src.restore_from_checkpoint(states_of(data, 2), num_data_partitions=3, partition_index=1)
    take(src, 1, 8, (3, 1), collections.Counter())
    mid = json.loads(json.dumps(src.get_checkpoint_state()))
    assert mid["elastic"]["run_position"] > 0
    b = fresh(data)
    b.restore_from_checkpoint(mid)
    with pytest.raises(ValueError, match="checkpoint field 'partition': the checkpoint was taken on partition 1 "
                                         "of 3, this source reads partition 0 of 3"):
        b.next_minibatch(8, num_data_partitions=3, partition_index=0)
    with pytest.raises(ValueError, match="checkpoint field 'partition'"):
        fresh(data).restore_from_checkpoint(mid, num_data_partitions=3, partition_index=2)


def test_the_split_cannot_change_once_the_resumed_source_has_delivered(data):
    states = states_of(data, 2)
    src = fresh(data)
    src.restore_from_checkpoint(states, num_data_partitions=3, partition_index=0)
    # before anything is taken, another split is planned anew
    assert src.next_minibatch(8, num_data_partitions=4, partition_index=1) is not None
    with pytest.raises(ValueError, match="resumed elastically as partition 1 of 4"):
        src.next_minibatch(8, num_data_partitions=4, partition_index=2)


# -- the pure functions ------------------------------------------------------------------------------

def test_share_bounds_cut_by_samples_and_cover_every_position():
    cum = np.concatenate([[0], np.cumsum([3, 1, 4, 1, 5, 9, 2, 6])])
    for n in range(1, 10):
        bounds = [share_bounds(cum, n, i) for i in range(n)]
        assert bounds[0][0] == 0 and bounds[-1][1] == 8
        assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))
    assert share_bounds(np.zeros(5, dtype=np.int64), 2, 1) == (2, 4)  # nothing has samples: by count


def test_runs_cut_the_pending_positions_into_equal_contiguous_parts():
    cum = np.arange(0, 21, dtype=np.int64)  # 20 positions of one sample
    plan = ElasticPlan([(0, 3, 7), (0, 12, 20), (1, 0, 4)], resume_sweep=2, partitions=3,
                       carry=[(0, 2, 1), (0, 9, 1), (0, 11, 2), (1, 5, 1)])
    runs = [cut_run(plan, lambda s: cum, j) for j in range(3)]
    flat = [(s, int(p)) for r in runs for s, pos in r.groups for p in pos]
    assert flat == [(0, p) for p in [*range(3, 7), *range(12, 20)]] + [(1, p) for p in range(4)]
    assert [r.length for r in runs] == [6, 5, 5]
    assert runs[0].carry == [(0, 2, 1), (1, 5, 1)] and runs[1].carry == [(0, 9, 1)]


# -- ChunkPartition readers ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def many_chunks(tmp_path_factory):
    return write_valued_cbf(tmp_path_factory.mktemp("elastic") / "c.cbf", 150, longest=5, chunk_size=128)


def chunk_reader(path, n, k, **kw):
    from recordkit.engine.chunk_partition import ChunkPartition
    return MinibatchSource(ChunkPartition(CBFReader(path), n, k), **kw)


def take_own(src, count, size, out):
    for _ in range(count):
        mb = src.next_minibatch(size)
        if mb is None:
            return False
        out.update(zip(mb.sweeps.tolist(), mb.keys.tolist()))
    return True


@pytest.mark.parametrize("randomize", [True, False])
def test_chunk_partition_readers_resized_deliver_every_sequence_once_per_sweep(many_chunks, randomize):
    """N whole-chunk readers stop anywhere (some a sweep ahead), M resume from all their states, maybe
    resized again mid-run: each sweep up to max_sweeps holds every sequence exactly once."""
    keys = range(150)
    for trial in range(25):
        rng = random.Random(f"chunks-{randomize}-{trial}")
        kw = dict(randomize=randomize, seed=rng.randint(0, 9), window=rng.choice([None, 1, 2]),
                  max_sweeps=rng.randint(1, 3))
        size = rng.randint(1, 30)
        sizes = [rng.randint(1, 5) for _ in range(rng.randint(2, 3))]
        got, states = collections.Counter(), None
        for stage, n in enumerate(sizes):
            new = []
            for k in range(n):
                src = chunk_reader(many_chunks, n, k, **kw)
                if states is not None:
                    src.restore_from_checkpoint(json.loads(json.dumps(states)))
                if stage == len(sizes) - 1:
                    while take_own(src, 100, size, got):
                        pass
                else:
                    take_own(src, rng.randint(0, 10), size, got)
                    new.append(src.get_checkpoint_state())
            states = new
        expect = collections.Counter((s, k) for s in range(kw["max_sweeps"]) for k in keys)
        assert got == expect, (trial, sizes, kw, size)


def test_a_new_chunk_reader_reads_only_chunks_it_owns(many_chunks):
    from recordkit.engine.chunk_partition import assign_chunks
    old = [chunk_reader(many_chunks, 2, k, randomize=True, seed=1, max_sweeps=1) for k in range(2)]
    for src in old:
        take_own(src, 3, 10, collections.Counter())
    states = [s.get_checkpoint_state() for s in old]
    owner = assign_chunks(CBFReader(many_chunks).chunks, 3)
    for j in range(3):
        src = chunk_reader(many_chunks, 3, j, randomize=True, seed=1, max_sweeps=1)
        src.restore_from_checkpoint(states)
        loaded = []
        inner = src.deserializer.inner
        inner.load_chunk = lambda cid, _load=inner.load_chunk, _seen=loaded, **kw: _seen.append(cid) or _load(cid, **kw)
        take_own(src, 1000, 10, collections.Counter())
        src.close()  # its prefetch threads are done before the next reader counts
        assert loaded and set(owner[loaded].tolist()) == {j}


def test_chunk_reader_states_need_max_sweeps_not_sample_limits(many_chunks):
    old = [chunk_reader(many_chunks, 2, k, randomize=False, max_samples=300) for k in range(2)]
    for src in old:
        take_own(src, 2, 10, collections.Counter())
    states = [s.get_checkpoint_state() for s in old]
    with pytest.raises(ValueError, match="max_sweeps, not with max_samples"):
        chunk_reader(many_chunks, 3, 0, randomize=False, max_samples=300).restore_from_checkpoint(states)


def test_a_chunk_readers_state_restored_into_another_reader_is_refused(many_chunks):
    src = chunk_reader(many_chunks, 3, 1, randomize=False, max_sweeps=1)
    take_own(src, 2, 10, collections.Counter())
    with pytest.raises(ValueError, match="ChunkPartition 1 of 3, this source reads 0 of 3"):
        chunk_reader(many_chunks, 3, 0, randomize=False, max_sweeps=1).restore_from_checkpoint(
            src.get_checkpoint_state())


def test_chunk_reader_states_out_of_order_are_refused(many_chunks):
    old = [chunk_reader(many_chunks, 2, k, randomize=False, max_sweeps=1) for k in range(2)]
    states = [s.get_checkpoint_state() for s in old]
    with pytest.raises(ValueError, match=r"state 0 of 2: .*chunk_partition.*expected \[2, 0\]"):
        chunk_reader(many_chunks, 3, 0, randomize=False, max_sweeps=1).restore_from_checkpoint(states[::-1])


# -- the command line: recordkit read --stop-after / --save-state / --resume ---------------------------

def cli_read(*argv):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", "read", *argv], capture_output=True,
                          text=True, timeout=120)


@pytest.fixture
def ctf(tmp_path):
    path = tmp_path / "d.ctf"
    path.write_text("".join(f"{k} |x {k} {t}\n" for k in range(50) for t in range(k % 4 + 1)))
    return path


@pytest.mark.parametrize("partition_by", ["samples", "chunks"])
def test_read_saves_states_and_resumes_them_on_another_number_of_partitions(ctf, tmp_path, partition_by):
    common = [str(ctf), "--stream", "x=dense:2", "--mb-size", "8", "--randomize", "--sweeps", "2", "--json",
              "--partition-by", partition_by, "--chunk-size", "64"]
    totals = {"samples": 0, "sequences": 0}
    for i in range(3):
        r = cli_read(*common, "--partitions", "3", "--partition-index", str(i), "--stop-after", str(i + 1),
                     "--save-state", str(tmp_path / f"state-{i}.json"))
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["minibatches"] == i + 1
        for k in totals:
            totals[k] += out[k]
    states = [str(tmp_path / f"state-{i}.json") for i in (2, 0, 1)]  # any order
    for j in range(2):
        r = cli_read(*common, "--partitions", "2", "--partition-index", str(j), "--resume", *states)
        assert r.returncode == 0, r.stderr
        for k in totals:
            totals[k] += json.loads(r.stdout)[k]
    assert totals == {"samples": 2 * sum(k % 4 + 1 for k in range(50)), "sequences": 100}


def test_read_resume_errors_are_one_line(ctf, tmp_path):
    common = [str(ctf), "--stream", "x=dense:2", "--mb-size", "8", "--randomize"]
    for i in range(2):
        assert cli_read(*common, "--partitions", "2", "--partition-index", str(i), "--stop-after", "1",
                        "--save-state", str(tmp_path / f"s{i}.json")).returncode == 0
    (tmp_path / "bad.json").write_text("{not json")
    cases = [
        (["--partitions", "3", "--resume", str(tmp_path / "s0.json")], "1 of 2 missing"),
        (["--partitions", "2", "--partition-index", "1", "--resume", str(tmp_path / "s0.json")],
         "no state of partition 1 of 2"),
        (["--resume", str(tmp_path / "nope.json")], "nope.json"),
        (["--resume", str(tmp_path / "bad.json")], "not JSON"),
        (["--seed", "9", "--resume", str(tmp_path / "s0.json"), str(tmp_path / "s1.json")],
         "other data or another randomization"),
    ]
    for extra, says in cases:
        r = cli_read(*common, *extra)
        assert r.returncode == 2 and says in r.stderr, (extra, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
