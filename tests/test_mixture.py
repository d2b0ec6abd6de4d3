"""Weighted mixing (engine/mixture.py): proportions, repeats, determinism, checkpoints, partitions."""
import collections
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from helpers import write_valued_cbf
from recordkit.engine.mixture import Mixture
from recordkit.engine.source import MinibatchSource
from recordkit.engine.streams import StreamSpec
from recordkit.errors import UsageError
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader

X = [StreamSpec("x", "dense", 2)]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """a.cbf: 100 sequences valued 0..99 (1-3 samples); b.ctf: 30 sequences valued 1000..1029."""
    d = tmp_path_factory.mktemp("mix")
    write_valued_cbf(d / "a.cbf", 100, longest=3, dim=2)
    (d / "b.ctf").write_text("".join(f"{k} |x {1000 + k} 0\n" * (k % 2 + 1) for k in range(30)))
    return str(d / "a.cbf"), str(d / "b.ctf")


def parts(files):
    return [CBFReader(files[0]), CTFReader(files[1], X, chunk_size=64)]


def source(files, *, weights=None, repeats=None, **kw):
    kw.setdefault("max_sweeps", 4)
    return MinibatchSource(Mixture(parts(files), weights=weights, repeats=repeats), **kw)


def drawn(src, size=16, **partition):
    """(sweep, value) of every sequence delivered, in order: the value says which sequence it is."""
    out = []
    for mb in src.minibatches(size, **partition):
        out.extend(zip(mb.sweeps.tolist(), mb["x"].data[:, 0, 0].astype(int).tolist()))
    return out


def per_sweep(seqs):
    out = collections.defaultdict(collections.Counter)
    for sweep, value in seqs:
        out[sweep][value] += 1
    return out


def test_weights_give_each_sweep_those_proportions_of_sequences(files):
    seqs = drawn(source(files, weights=[0.7, 0.3], randomize=True, seed=3))
    for sweep, counts in per_sweep(seqs).items():
        from_b = sum(n for v, n in counts.items() if v >= 1000)
        assert sum(counts.values()) == 130 and from_b == 39  # 30% of 130


def test_every_stretch_of_a_sweep_holds_about_the_proportions(files):
    seqs = drawn(source(files, weights=[0.5, 0.5], randomize=True, seed=1, max_sweeps=1))
    from_b = np.array([v >= 1000 for _, v in seqs], dtype=int)
    for start in range(0, len(from_b) - 20, 10):
        assert 8 <= from_b[start:start + 20].sum() <= 12  # one part after the other would be 0 or 20


def test_whole_repeats_deliver_each_sequence_that_many_times_per_sweep(files):
    seqs = drawn(source(files, repeats=[1, 2], randomize=True, seed=5))
    for counts in per_sweep(seqs).values():
        assert {v: n for v, n in counts.items() if v < 1000} == {v: 1 for v in range(100)}
        assert {v: n for v, n in counts.items() if v >= 1000} == {v: 2 for v in range(1000, 1030)}


def test_an_undersampled_part_shows_every_sequence_once_before_any_twice(files):
    """repeats 0.25: a different quarter each sweep; four sweeps hold every sequence exactly once."""
    seqs = drawn(source(files, repeats=[0.25, 1], randomize=True, seed=2, max_sweeps=8))
    sweeps = per_sweep(seqs)
    for first in (0, 4):
        a = collections.Counter()
        for s in range(first, first + 4):
            a.update({v: n for v, n in sweeps[s].items() if v < 1000})
            assert sum(n for v, n in sweeps[s].items() if v < 1000) == 25
        assert a == {v: 1 for v in range(100)}
    assert [v for s, v in seqs if s == 0 and v < 1000] != [v for s, v in seqs if s == 4 and v < 1000]


def test_the_mixture_is_deterministic_for_a_seed_and_changes_with_seed_and_sweep(files):
    one = drawn(source(files, weights=[0.6, 0.4], randomize=True, seed=7))
    assert one == drawn(source(files, weights=[0.6, 0.4], randomize=True, seed=7))
    assert one != drawn(source(files, weights=[0.6, 0.4], randomize=True, seed=8))
    by_sweep = per_sweep(one)
    order = [[v for s, v in one if s == k] for k in range(2)]
    assert order[0] != order[1] and by_sweep[0] != by_sweep[1]


def test_each_part_keeps_cntks_block_randomization_within_itself(files):
    """Part 0 drawn once per sweep is exactly its own CNTK order for the mixture's seed."""
    seqs = drawn(source(files, repeats=[1, 1], randomize=True, seed=11, window=2, max_sweeps=2))
    alone = drawn(MinibatchSource(CBFReader(files[0]), randomize=True, seed=11, window=2, max_sweeps=2))
    for sweep in range(2):
        assert [v for s, v in seqs if s == sweep and v < 1000] == [v for s, v in alone if s == sweep]


def test_a_checkpoint_mid_sweep_continues_exactly(files):
    a = source(files, weights=[0.7, 0.3], randomize=True, seed=4)
    for _ in range(5):
        a.next_minibatch(16)
    state = json.loads(json.dumps(a.get_checkpoint_state()))
    b = source(files, weights=[0.7, 0.3], randomize=True, seed=4)
    b.restore_from_checkpoint(state)
    assert drawn(a) == drawn(b)


def test_a_checkpoint_of_another_mixture_is_refused(files):
    a = source(files, weights=[0.7, 0.3], randomize=True, seed=4)
    a.next_minibatch(16)
    with pytest.raises(UsageError, match=r"'mixture': data set 0 .* is a\.cbf \(weight 0\.7.*this source's is "
                                         r"a\.cbf \(weight 0\.5"):
        source(files, weights=[0.5, 0.5], randomize=True, seed=4).restore_from_checkpoint(a.get_checkpoint_state())


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Two data sets of the same sizes, told apart by their values (0..19 and 100..119)."""
    d = tmp_path_factory.mktemp("twins")
    for name, base in (("p.ctf", 0), ("q.ctf", 100)):
        (d / name).write_text("".join(f"{k} |x {base + k} 0\n" for k in range(20)))
    return str(d / "p.ctf"), str(d / "q.ctf")


def twin_source(paths, weights):
    return MinibatchSource(Mixture([CTFReader(p, X) for p in paths], weights=weights), randomize=True, seed=2,
                           max_sweeps=2)


@pytest.mark.parametrize("order, weights, said", [
    ((1, 0), [0.7, 0.3], r"data set 0 of the checkpoint's mixture is p\.ctf .*this source's is q\.ctf"),
    ((0, 1), [0.6, 0.4], r"data set 0 .* p\.ctf \(weight 0\.7, 20 sequences, 28 per sweep\), this source's is "
                         r"p\.ctf \(weight 0\.6, 20 sequences, 24 per sweep\)"),
    ((0, 1), [0.70001, 0.29999], r"data set 0 .*\(weight 0\.7, .*\(weight 0\.70001, 20 sequences, 28 per sweep"),
])
def test_a_checkpoint_is_refused_by_a_mixture_of_other_members_order_or_weights(twins, order, weights, said):
    """The same data sets swapped, or weighted otherwise, would draw other proportions from the
    checkpoint's positions on; the error names the data set that differs."""
    a = twin_source(twins, [0.7, 0.3])
    a.next_minibatch(8)
    state = json.loads(json.dumps(a.get_checkpoint_state()))
    with pytest.raises(UsageError, match="checkpoint field 'mixture': " + said):
        twin_source([twins[k] for k in order], weights).restore_from_checkpoint(state)


def test_mixture_weights_are_compared_as_proportions_and_data_may_move(twins, tmp_path):
    a = twin_source(twins, [0.7, 0.3])
    a.next_minibatch(8)
    state = json.loads(json.dumps(a.get_checkpoint_state()))
    moved = []
    for p in twins:
        moved.append(str(tmp_path / os.path.basename(p)))
        shutil.copy(p, moved[-1])
    b = twin_source(moved, [7, 3])
    b.restore_from_checkpoint(state)
    assert drawn(a, 8) == drawn(b, 8)


def test_a_mixture_checkpoint_without_its_data_sets_resumes_as_before(twins):
    """A state written before checkpoints named a mixture's data sets: the fingerprint decides."""
    a = twin_source(twins, [0.7, 0.3])
    a.next_minibatch(8)
    state = json.loads(json.dumps(a.get_checkpoint_state()))
    del state["mixture"]
    b = twin_source(twins, [0.7, 0.3])
    b.restore_from_checkpoint(state)
    assert drawn(a, 8) == drawn(b, 8)


@pytest.mark.parametrize("value", [[], "p.ctf", [{"name": "p.ctf"}], [None, None],
                                   [{"name": 3, "sequences": 20, "per_sweep": 28, "weight": 0.7}],
                                   [{"name": "p.ctf", "sequences": -1, "per_sweep": 28, "weight": 0.7}],
                                   [{"name": "p.ctf", "sequences": 20, "per_sweep": True, "weight": 0.7}],
                                   [{"name": "p.ctf", "sequences": 20, "per_sweep": 28, "weight": float("inf")}],
                                   [{"name": "p.ctf", "sequences": 20, "per_sweep": 28, "weight": "0.7"}],
                                   [{"name": "p.ctf", "sequences": 20, "per_sweep": 28, "weight": 0.7,
                                     "repeats": 1}]])
def test_a_tampered_mixture_field_is_named(twins, value):
    a = twin_source(twins, [0.7, 0.3])
    a.next_minibatch(8)
    with pytest.raises(ValueError, match="checkpoint field 'mixture'"):
        twin_source(twins, [0.7, 0.3]).restore_from_checkpoint({**a.get_checkpoint_state(), "mixture": value})


def test_a_mixture_checkpoint_is_refused_by_a_plain_source_and_the_converse(twins):
    a = twin_source(twins, [0.7, 0.3])
    a.next_minibatch(8)
    plain = MinibatchSource(CTFReader(twins[0], X), randomize=True, seed=2, max_sweeps=2)
    with pytest.raises(UsageError, match="'mixture': the checkpoint was taken on a mixture of 2 data sets, this "
                                         "source reads no mixture"):
        plain.restore_from_checkpoint(a.get_checkpoint_state())
    plain.next_minibatch(8)
    with pytest.raises(UsageError, match="'mixture': the checkpoint was taken on no mixture"):
        twin_source(twins, [0.7, 0.3]).restore_from_checkpoint({**plain.get_checkpoint_state(), "mixture": None})


@pytest.mark.parametrize("workers", [2, 3])
def test_partitions_split_each_sweep_of_the_mixture(files, workers):
    whole = per_sweep(drawn(source(files, weights=[0.7, 0.3], randomize=True, seed=6)))
    split = collections.defaultdict(collections.Counter)
    for i in range(workers):
        for sweep, counts in per_sweep(drawn(source(files, weights=[0.7, 0.3], randomize=True, seed=6),
                                             num_data_partitions=workers, partition_index=i)).items():
            split[sweep].update(counts)
    assert split == whole


def test_a_mixture_resumes_elastically(files):
    kw = dict(weights=[0.7, 0.3], randomize=True, seed=9, max_sweeps=2)
    whole = collections.Counter(drawn(source(files, **kw)))
    got, states = collections.Counter(), []
    for i in range(3):
        src = source(files, **kw)
        for _ in range(i + 1):
            mb = src.next_minibatch(16, num_data_partitions=3, partition_index=i)
            got.update(zip(mb.sweeps.tolist(), mb["x"].data[:, 0, 0].astype(int).tolist()))
        states.append(src.get_checkpoint_state())
    for j in range(2):
        src = source(files, **kw)
        src.restore_from_checkpoint(states, num_data_partitions=2, partition_index=j)
        got.update(drawn(src, num_data_partitions=2, partition_index=j))
    assert got == whole


def test_whole_repeats_keep_sample_limits_and_epochs(files):
    src = source(files, repeats=[1, 2], randomize=False, max_sweeps=None, max_samples=500, epoch_size=120)
    assert src.sweep_samples == 199 + 2 * 45
    mbs = list(src.minibatches(50))
    assert sum(mb.num_samples for mb in mbs) == 500
    assert sum(mb.end_of_epoch for mb in mbs) >= 4


@pytest.mark.parametrize("kw,says", [
    (dict(weights=[1]), "1 weights for 2 data sets"),
    (dict(weights=[1, -1]), "finite, >= 0"),
    (dict(repeats=[0, 0]), "not all 0"),
    (dict(weights=[1, 1], repeats=[1, 1]), "either weights or repeats"),
    (dict(), "either weights or repeats"),
    (dict(repeats=[1, 1], sweep_sequences=10), "sweep_sequences goes with weights"),
])
def test_bad_mixture_arguments_are_usage_errors(files, kw, says):
    with pytest.raises(UsageError, match=says):
        Mixture(parts(files), **kw)


def test_sample_limits_are_refused_where_sweeps_differ_in_samples(files):
    with pytest.raises(UsageError, match="max_sweeps, not max_samples"):
        source(files, weights=[0.7, 0.3], max_sweeps=None, max_samples=100)


def test_data_sets_with_other_streams_cannot_be_mixed(files, tmp_path):
    other = tmp_path / "c.ctf"
    other.write_text("0 |x 1 2 3\n")
    with pytest.raises(UsageError, match="stream 'x' differs .* dense 2 in .*a.cbf, dense 3 in .*c.ctf"):
        Mixture([CBFReader(files[0]), CTFReader(str(other), [StreamSpec("x", "dense", 3)])], weights=[1, 1])
    with pytest.raises(UsageError, match="same streams"):
        Mixture([CBFReader(files[0]), CTFReader(str(other), [StreamSpec("y", "dense", 3)])], weights=[1, 1])


# -- the command line -----------------------------------------------------------------------------

def cli(*argv):
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", *argv], capture_output=True, text=True,
                          timeout=120)


def test_read_mixes_paths_by_weights_and_repeats(files):
    r = cli("read", *files, "--stream", "x=dense:2", "--mb-size", "16", "--randomize", "--weights", "0.7,0.3",
            "--sweeps", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sequences"] == 2 * 130
    r = cli("read", *files, "--stream", "x=dense:2", "--mb-size", "16", "--repeats", "1,2", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["sequences"] == 160 and json.loads(r.stdout)["samples"] == 199 + 90


@pytest.mark.parametrize("extra,says", [
    (["--weights", "0.7"], "1 values for 2 PATHs"),
    (["--weights", "1,x"], "expected numbers separated by commas"),
    (["--weights", "1,1", "--repeats", "1,1"], "not allowed with argument"),
    (["--repeats", "1,1", "--sweep-sequences", "9"], "only with --weights"),
    (["--weights", "1,1", "--max-samples", "50"], "max_sweeps, not max_samples"),
    (["--weights", "1,1", "--partitions", "2", "--partition-by", "chunks"], "a mixture is split by samples"),
])
def test_read_mixing_errors_are_one_line(files, extra, says):
    r = cli("read", *files, "--stream", "x=dense:2", "--mb-size", "16", *extra)
    assert r.returncode == 2 and says in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_plan_plans_the_mixture_read_would_read(files):
    """plan takes read's arguments: with --weights it plans the mixture (it used to join the paths
    as a composite and fail on their shared stream names)."""
    r = cli("plan", *files, "--stream", "x=dense:2", "--mb-size", "16", "--randomize", "--weights", "0.7,0.3",
            "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["chunks"]["sequences"] == 130


def test_a_mixture_is_not_split_into_whole_chunks(files):
    """ChunkPartition over a mixture would read its union in block-randomized order, the proportions
    silently gone: refused."""
    from recordkit.engine import ChunkPartition
    with pytest.raises(UsageError, match="split by samples"):
        ChunkPartition(Mixture(parts(files), weights=[0.9, 0.1]), 2, 0)


def mixture_source(files):
    """Module level: DataLoader workers build their own."""
    return source(files, weights=[0.7, 0.3], randomize=True, seed=12, max_sweeps=2)


def test_a_mixture_feeds_dataloader_workers(files):
    torch = pytest.importorskip("torch")
    import functools
    from recordkit.integrations.torch import MinibatchDataset
    whole = collections.Counter(drawn(mixture_source(files)))
    ds = MinibatchDataset(functools.partial(mixture_source, files), 16)
    got = collections.Counter()
    for item in torch.utils.data.DataLoader(ds, batch_size=None, num_workers=2, timeout=30):
        got.update(zip(item["sweeps"].tolist(), item["x"][:, 0, 0].to(torch.int64).tolist()))
    assert got == whole


def test_the_memory_plan_counts_every_parts_window_open_at_once(tmp_path):
    """Each part keeps its own window of chunks open while the parts are interleaved: the plan
    must follow the mixture's order, not a block randomizer over the union (which held about
    0.6x as much here with a window of 8 chunks)."""
    from recordkit.engine import memory
    from recordkit.compose.plan import PlanInput, make_plan
    wide = [StreamSpec("x", "dense", 64)]
    readers = []
    for name in "ab":
        with CBFWriter(tmp_path / f"{name}.cbf", wide, chunk_size=4096) as w:
            for i in range(2000):
                w.write({"x": np.full((1, 64), i, dtype=np.float32)})
        readers.append(CBFReader(tmp_path / f"{name}.cbf"))
    mixture = Mixture(readers, weights=[1, 1])
    chunks, nbytes = mixture.chunks, memory.chunk_bytes(mixture)
    loading = memory.load_bytes(mixture, nbytes)
    order = mixture.make_randomizer(randomize=True, window=8, sample_based=False, seed=0).sweep(0).chunk
    held, _ = memory.held_peak(order, memory.by_id(chunks, nbytes), prefetch=2,
                               loading=memory.by_id(chunks, loading), threads=2)
    union = memory.choose_window(chunks, nbytes, loading, max_memory=None, randomize=True, window=8)
    assert union.estimated_bytes < held  # what the plan said before it asked the mixture
    with MinibatchSource(mixture, randomize=True, window=8, max_memory=None, max_sweeps=1) as src:
        assert src.memory.estimated_bytes == held + int(nbytes.max())
    # a bound between the two: the window is reduced to one whose mixture order fits
    with pytest.warns(Warning, match="window reduced"):
        src = MinibatchSource(mixture, randomize=True, window=8, max_memory=union.estimated_bytes, max_sweeps=1)
    with src:
        assert src.memory.window < 8 and src.memory.estimated_bytes <= union.estimated_bytes
    report = make_plan(mixture, PlanInput(randomize=True, window=8, max_memory=None))
    assert report["memory"]["estimated_bytes"] == held + int(nbytes.max())
