"""recordkit.integrations.torch: tensors, DataLoader workers, resume, and DDP ranks (gloo, real processes)."""
from __future__ import annotations

import collections
import functools
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from recordkit import StreamSpec  # noqa: E402
from recordkit.engine.source import MinibatchSource  # noqa: E402
from recordkit.formats.ctf import CTFReader  # noqa: E402
from recordkit.integrations.torch import (STATE_KEY, MinibatchDataset, StateTracker, minibatch_collate,  # noqa: E402
                                          to_torch)

# torch warns (once) when it rebuilds a sparse CSR tensor sent by a DataLoader worker
pytestmark = [pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled"),
              pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")]

N_SEQ = 60
HERE = Path(__file__).resolve().parent


def write_ctf(path, n=N_SEQ):
    """Sequence k: k % 3 + 1 samples; x dense dim 2 = (k, t); y sparse dim 5, one or two entries per sample."""
    lines = []
    for k in range(n):
        for t in range(k % 3 + 1):
            y = f"{k % 5}:1" if t == 0 else f"{(k + t) % 5}:{t + 1} {(k + t + 2) % 5}:0.5"
            lines.append(f"{k} |x {k} {t} |y {y}\n")
    path.write_text("".join(lines))
    return path


STREAMS = [StreamSpec("x", "dense", 2, "x"), StreamSpec("y", "sparse", 5, "y")]


def make_source(path, *, max_sweeps=1, randomize=True, seed=0, precision="float"):
    """Module level, so functools.partial of it pickles for any DataLoader start method."""
    reader = CTFReader(str(path), STREAMS, precision=precision, chunk_size=256)
    return MinibatchSource(reader, randomize=randomize, seed=seed, max_sweeps=max_sweeps)


@pytest.fixture
def data(tmp_path):
    return write_ctf(tmp_path / "data.ctf")


def keys_of(item):
    return [int(k) for k in item["keys"].numpy().view(np.uint64)]


def record(item):
    """What identifies a minibatch: its keys, sweeps and a digest of its content."""
    return (tuple(keys_of(item)), tuple(item["sweeps"].tolist()), float(item["x"].sum()),
            float(item["y"].values().sum()))


def loader(ds, num_workers):
    kw = {"timeout": 30} if num_workers else {}
    return DataLoader(ds, batch_size=None, num_workers=num_workers, **kw)


# ------------------------------------------------------------------------------------------------
# to_torch: the engine's arrays as tensors

@pytest.mark.parametrize("precision,dtype", [("float", torch.float32), ("double", torch.float64)])
def test_to_torch_matches_engine_output(data, precision, dtype):
    src = make_source(data, randomize=True, precision=precision)
    seen = []
    for mb in src.minibatches(7):
        t = to_torch(mb)
        assert t["keys"].dtype == torch.int64 and t["lengths"].dtype == torch.int64
        assert keys_of(t) == [int(k) for k in mb.keys]
        np.testing.assert_array_equal(t["lengths"].numpy(), mb.lengths)
        assert t["end_of_sweep"] is bool(mb.end_of_sweep)
        np.testing.assert_array_equal(t["sweeps"].numpy(), mb.sweeps)
        # dense: (S, T, dim) padded, mask, lengths; shares memory with the engine's arrays
        x = mb["x"]
        assert t["x"].dtype == dtype and tuple(t["x"].shape) == x.data.shape
        assert t["x"].shape[0] == len(mb.keys) and t["x"].shape[2] == 2
        np.testing.assert_array_equal(t["x"].numpy(), x.data)
        assert np.shares_memory(t["x"].numpy(), x.data)
        assert t["x_mask"].dtype == torch.bool and tuple(t["x_mask"].shape) == x.mask.shape
        np.testing.assert_array_equal(t["x_mask"].numpy(), x.mask)
        np.testing.assert_array_equal(t["x_lengths"].numpy(), x.lengths)
        for i, k in enumerate(keys_of(t)):  # the content itself: x = (key, step), zero padded
            n = k % 3 + 1
            assert int(t["x_lengths"][i]) == n
            np.testing.assert_array_equal(t["x"][i, :n].numpy(), np.c_[np.full(n, k), np.arange(n)])
            assert not t["x"][i, n:].any() and not t["x_mask"][i, n:].any()
        # sparse: CSR over samples, rows of sequence i in offsets[i]:offsets[i+1]
        y = mb["y"]
        ty = t["y"]
        assert ty.layout == torch.sparse_csr and ty.dtype == dtype
        assert tuple(ty.shape) == y.csr.shape == (int(mb["y"].lengths.sum()), 5)
        np.testing.assert_array_equal(ty.crow_indices().numpy(), y.csr.indptr)
        np.testing.assert_array_equal(ty.col_indices().numpy(), y.csr.indices)
        np.testing.assert_array_equal(ty.values().numpy(), y.csr.data)
        assert np.shares_memory(ty.values().numpy(), y.csr.data)
        np.testing.assert_array_equal(ty.to_dense().numpy(), y.csr.toarray())
        np.testing.assert_array_equal(t["y_offsets"].numpy(), y.seq_offsets)
        assert t["y_offsets"].dtype == torch.int64
        for i, k in enumerate(keys_of(t)):
            first = ty.to_dense()[int(t["y_offsets"][i])]
            assert float(first[k % 5]) == 1.0 and float(first.sum()) == 1.0
        seen += keys_of(t)
    assert sorted(seen) == list(range(N_SEQ))


def test_to_torch_keeps_uint64_keys_recoverable(tmp_path):
    """Keys are uint64 in the engine; the int64 view gives every bit back."""
    src = make_source(write_ctf(tmp_path / "d.ctf", 4), randomize=False)
    mb = src.next_minibatch(100)
    big = np.array([2**64 - 1, 2**63, 5, 0], dtype=np.uint64)
    mb.keys = big
    t = to_torch(mb)
    np.testing.assert_array_equal(t["keys"].numpy().view(np.uint64), big)


def test_to_torch_carries_truncated_bptt_flags(data):
    reader = CTFReader(str(data), STREAMS, chunk_size=256)
    src = MinibatchSource(reader, randomize=False, max_sweeps=1, truncation_length=2)
    mb = src.next_minibatch(4)  # two slots of two steps
    t = to_torch(mb)
    assert set(t["extra"]) == set(mb.extra)
    for k, v in mb.extra.items():
        np.testing.assert_array_equal(t["extra"][k].numpy().view(v.dtype), v)
    assert tuple(t["x"].shape) == (2, 2, 2) and t["y"].layout == torch.strided  # BPTT delivers sparse dense


# ------------------------------------------------------------------------------------------------
# MinibatchDataset in a DataLoader

def test_dataset_items_equal_to_torch_of_the_same_source(data):
    ds = MinibatchDataset(functools.partial(make_source, data), 9)
    items = list(loader(ds, 0))
    ref = [to_torch(mb) for mb in make_source(data).minibatches(9)]
    assert [record(i) for i in items] == [record(r) for r in ref]
    for item in items:
        st = item[STATE_KEY]
        assert json.loads(json.dumps(st)) == st
        assert (st["worker_id"], st["num_workers"], st["rank"], st["world_size"]) == (0, 1, 0, 1)
        assert (st["partition_index"], st["num_partitions"]) == (0, 1)
        assert json.loads(st["source"])["partition"] == [1, 0]
        # one value per field: torch's default_convert walks every value of every item
        assert all(isinstance(v, (str, int, float, bool, type(None))) for v in st.values())
    assert items[-1]["end_of_sweep"]


def same_item(a, b):
    """Equal keys, values and tensors (sparse ones by their CSR parts), state included."""
    assert list(a) == list(b)
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor) and x.layout == torch.sparse_csr:
            assert y.layout == torch.sparse_csr and x.shape == y.shape
            for part in ("crow_indices", "col_indices", "values"):
                xp, yp = getattr(x, part)(), getattr(y, part)()
                assert xp.dtype == yp.dtype and torch.equal(xp, yp), (k, part)
        elif isinstance(x, torch.Tensor):
            assert x.dtype == y.dtype and torch.equal(x, y), k
        else:
            assert x == y, k


@pytest.mark.parametrize("num_workers", [0, 1])
def test_minibatch_collate_gives_the_same_items_as_the_default_convert(data, num_workers):
    ds = MinibatchDataset(functools.partial(make_source, data, max_sweeps=2), 9)
    kw = {"timeout": 30} if num_workers else {}
    plain = list(DataLoader(ds, batch_size=None, num_workers=num_workers, **kw))
    kept = list(DataLoader(ds, batch_size=None, num_workers=num_workers, collate_fn=minibatch_collate, **kw))
    assert len(plain) == len(kept) > 2
    for a, b in zip(plain, kept):
        same_item(a, b)
        assert type(b) is dict and isinstance(b["x"], torch.Tensor)


def test_minibatch_collate_hands_the_item_over_untouched():
    item = {"x": torch.zeros(2), STATE_KEY: {"partition_index": 0}}
    assert minibatch_collate(item) is item  # default_convert would copy both dicts


def test_a_version_1_state_with_the_source_as_a_dict_still_resumes(data):
    ds = MinibatchDataset(functools.partial(make_source, data, max_sweeps=2), 9)
    items = list(loader(ds, 0))
    st = dict(items[3][STATE_KEY])
    old = dict(st, recordkit_torch_state=1, source=json.loads(st["source"]))
    want = [record(i) for i in items[4:]]
    for state in (st, old):
        again = MinibatchDataset(functools.partial(make_source, data, max_sweeps=2), 9, resume_state={0: state})
        assert [record(i) for i in loader(again, 0)] == want


@pytest.mark.parametrize("num_workers", [0, 2])
def test_dataloader_reads_every_sequence_of_a_sweep_once(data, num_workers):
    ds = MinibatchDataset(functools.partial(make_source, data, max_sweeps=1), 8)
    items = list(loader(ds, num_workers))
    keys = [k for item in items for k in keys_of(item)]
    assert collections.Counter(keys) == collections.Counter(range(N_SEQ))
    parts = {item[STATE_KEY]["partition_index"] for item in items}
    assert parts == set(range(max(num_workers, 1)))
    for item in items:
        st = item[STATE_KEY]
        assert st["num_partitions"] == max(num_workers, 1)
        assert st["partition_index"] == st["worker_id"]
        assert json.loads(st["source"])["partition"] == [st["num_partitions"], st["partition_index"]]


def test_dataloader_workers_split_every_sweep(data):
    ds = MinibatchDataset(functools.partial(make_source, data, max_sweeps=3), 8)
    per_sweep = collections.defaultdict(collections.Counter)
    by_worker = collections.defaultdict(set)
    for item in loader(ds, 2):
        for k, s in zip(keys_of(item), item["sweeps"].tolist()):
            per_sweep[s][k] += 1
            by_worker[(s, item[STATE_KEY]["worker_id"])].add(k)
    assert sorted(per_sweep) == [0, 1, 2]
    for s, counts in per_sweep.items():
        assert counts == collections.Counter(range(N_SEQ)), s
        assert not by_worker[(s, 0)] & by_worker[(s, 1)]
    # each sweep has its own randomization: the workers' shares differ between sweeps
    assert by_worker[(0, 0)] != by_worker[(1, 0)]


def test_explicit_partitions_replace_rank_and_world_size(data):
    got = {}
    for rank in range(2):
        ds = MinibatchDataset(functools.partial(make_source, data), 8, num_data_partitions=2, partition_index=rank)
        items = list(loader(ds, 2))
        for item in items:
            st = item[STATE_KEY]
            assert (st["rank"], st["world_size"], st["num_partitions"]) == (rank, 2, 4)
            assert st["partition_index"] == rank * 2 + st["worker_id"]
        got[rank] = [k for item in items for k in keys_of(item)]
    assert not set(got[0]) & set(got[1])
    assert collections.Counter(got[0] + got[1]) == collections.Counter(range(N_SEQ))


def test_constructor_checks(data):
    f = functools.partial(make_source, data)
    with pytest.raises(TypeError):
        MinibatchDataset(object(), 8)
    with pytest.raises(ValueError):
        MinibatchDataset(f, 0)
    with pytest.raises(ValueError):
        MinibatchDataset(f, 8, num_data_partitions=2)
    with pytest.raises(ValueError):
        MinibatchDataset(f, 8, num_data_partitions=2, partition_index=2)
    with pytest.raises(ValueError, match="__state__"):
        MinibatchDataset(f, 8, resume_state={0: {"sweep": 0}})


# ------------------------------------------------------------------------------------------------
# checkpoint / resume

def per_partition(items):
    out = collections.defaultdict(list)
    for item in items:
        out[item[STATE_KEY]["partition_index"]].append(record(item))
    return dict(out)


@pytest.mark.parametrize("num_workers,cut", [(0, 3), (2, 1), (2, 5), (2, 9)])
def test_resume_continues_with_exactly_the_remaining_minibatches(data, num_workers, cut):
    factory = functools.partial(make_source, data, max_sweeps=2)
    full = per_partition(loader(MinibatchDataset(factory, 8), num_workers))
    assert sum(map(len, full.values())) > cut + 2

    tracker = StateTracker()
    taken = []
    for n, item in enumerate(loader(MinibatchDataset(factory, 8), num_workers)):
        if n == cut:
            break  # the DataLoader has prefetched more; those must come again
        tracker.update(item)
        taken.append(item)
    saved = json.loads(json.dumps(tracker.state_dict()))  # what a checkpoint file holds
    assert all(isinstance(k, str) for k in saved)

    rest = list(loader(MinibatchDataset(factory, 8, resume_state=saved), num_workers))
    before, after = per_partition(taken), per_partition(rest)
    # each worker's stream: what was taken, then exactly what it would have produced next
    for p, stream in full.items():
        assert before.get(p, []) + after.get(p, []) == stream, p
    # as multisets over all workers: the resumed run yields exactly the rest
    all_full = collections.Counter(r for s in full.values() for r in s)
    assert collections.Counter(record(i) for i in rest) == all_full - collections.Counter(map(record, taken))


def test_state_dict_from_accepts_states_or_items_last_one_wins(data):
    factory = functools.partial(make_source, data)
    items = list(loader(MinibatchDataset(factory, 8), 2))[:5]
    by_items = MinibatchDataset.state_dict_from(items)
    by_states = MinibatchDataset.state_dict_from({i: it[STATE_KEY] for i, it in enumerate(items)})
    assert by_items == by_states
    last = {}
    for it in items:
        last[it[STATE_KEY]["partition_index"]] = it[STATE_KEY]
    assert by_items == last
    t = StateTracker()
    t.load_state_dict(json.loads(json.dumps(by_items)))
    assert t.state_dict() == by_items


def test_resume_at_the_end_yields_nothing(data):
    factory = functools.partial(make_source, data)
    tracker = StateTracker()
    for item in loader(MinibatchDataset(factory, 8), 2):
        tracker.update(item)
    assert list(loader(MinibatchDataset(factory, 8, resume_state=tracker.state_dict()), 2)) == []


def delivered(items):
    """(sweep, key) of every sequence the items hold, counted."""
    return collections.Counter((int(sw), k) for it in items for sw, k in zip(it["sweeps"].tolist(), keys_of(it)))


@pytest.mark.parametrize("before,after,cut", [(2, 3, 3), (3, 2, 4), (2, 0, 2), (0, 2, 3), (3, 1, 5)])
def test_resume_with_another_number_of_workers_delivers_the_rest_once(data, before, after, cut):
    """Elastic resume: the loop took ``cut`` items from ``before`` workers (more were prefetched);
    ``after`` workers resume from the tracker's states. Every sequence of the two sweeps comes
    exactly once over both runs, and the states saved after the resize are of the new split."""
    factory = functools.partial(make_source, data, max_sweeps=2)
    full = delivered(loader(MinibatchDataset(factory, 8), 0))
    tracker = StateTracker()
    taken = []
    for n, item in enumerate(loader(MinibatchDataset(factory, 8), before)):
        if n == cut:
            break
        taken.append(tracker.update(item))
    saved = json.loads(json.dumps(tracker.state_dict()))
    rest = []
    for item in loader(MinibatchDataset(factory, 8, resume_state=saved), after):
        rest.append(tracker.update(item))
    assert delivered(taken) + delivered(rest) == full
    assert {st["num_partitions"] for st in tracker.state_dict().values()} == {max(after, 1)}


def test_a_resized_job_can_be_resized_again_mid_run(data):
    """2 workers -> 3 workers (stopped inside the run of what the 2 had left) -> 1 process."""
    factory = functools.partial(make_source, data, max_sweeps=2)
    full = delivered(loader(MinibatchDataset(factory, 4), 0))
    tracker, got = StateTracker(), collections.Counter()
    for workers, cut in ((2, 5), (3, 4), (0, None)):
        ds = MinibatchDataset(factory, 4, resume_state=json.loads(json.dumps(tracker.state_dict())) or None)
        items = []
        for n, item in enumerate(loader(ds, workers)):
            if n == cut:
                break
            items.append(tracker.update(item))
        got += delivered(items)
    assert got == full


def test_stateful_dataloader_state_resumes_on_another_number_of_workers(data):
    """A ``StatefulDataLoader.state_dict()`` taken with 2 workers is ``resume_state`` for 3 (torchdata
    itself refuses another worker count in ``load_state_dict``)."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    factory = functools.partial(make_source, data, max_sweeps=2)
    full = delivered(loader(MinibatchDataset(factory, 8), 0))
    dl = stateful.StatefulDataLoader(MinibatchDataset(factory, 8), batch_size=None, num_workers=2, timeout=30)
    taken = []
    for n, item in enumerate(dl):
        taken.append(item)
        if n == 4:
            break
    saved = dl.state_dict()
    rest = list(loader(MinibatchDataset(factory, 8, resume_state=saved), 3))
    assert delivered(taken) + delivered(rest) == full


def test_resume_state_mixing_two_splits_is_refused(data):
    factory = functools.partial(make_source, data)
    a = next(iter(loader(MinibatchDataset(factory, 8), 0)))[STATE_KEY]
    b = dict(a, num_partitions=2, partition_index=1)
    with pytest.raises(ValueError, match="mixes states of jobs"):
        MinibatchDataset(factory, 8, resume_state={0: a, 1: b})


def test_resume_with_other_data_is_refused(data, tmp_path):
    tracker = StateTracker()
    for item in loader(MinibatchDataset(functools.partial(make_source, data), 8), 0):
        tracker.update(item)
        break
    other = write_ctf(tmp_path / "other.ctf", N_SEQ + 7)
    ds = MinibatchDataset(functools.partial(make_source, other), 8, resume_state=tracker.state_dict())
    with pytest.raises(ValueError, match="other data"):
        next(iter(ds))


# ------------------------------------------------------------------------------------------------
# DDP: two real ranks over gloo on 127.0.0.1, each with a DataLoader of two workers

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ddp(tmp_path, data, *, world_size=2, extra=(), timeout=90):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RANK", "WORLD_SIZE", "LOCAL_RANK"))}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [str(HERE), env.get("PYTHONPATH", "")] if p)
    outs = [tmp_path / f"rank{r}.json" for r in range(world_size)]
    procs = [subprocess.Popen([sys.executable, str(HERE / "torch_ddp_worker.py"), "--rank", str(r),
                               "--world-size", str(world_size), "--data", str(data), "--out", str(outs[r]),
                               "--timeout", "40", *extra],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world_size)]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=timeout)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r} failed:\n" + "\n".join(logs)
    return [json.loads(o.read_text()) for o in outs]


def check_ranks(results, max_sweeps, world_size=2, num_workers=2):
    per_sweep = collections.defaultdict(collections.Counter)
    owner = collections.defaultdict(dict)
    for res in results:
        rank = res["rank"]
        for it in res["items"]:
            assert it["rank"] == rank and it["world_size"] == world_size
            assert it["num_partitions"] == world_size * num_workers
            assert it["partition_index"] == rank * num_workers + it["worker_id"]
            for k, s in zip(it["keys"], it["sweeps"]):
                per_sweep[s][k] += 1
                assert owner[s].setdefault(k, it["partition_index"]) == it["partition_index"]
    assert sorted(per_sweep) == list(range(max_sweeps))
    for s, counts in per_sweep.items():
        # every sequence of every sweep exactly once over all ranks and workers
        assert counts == collections.Counter(range(N_SEQ)), s
        assert set(owner[s].values()) == set(range(world_size * num_workers))
    for res in results:  # every worker of every rank had a share
        assert {it["worker_id"] for it in res["items"]} == set(range(num_workers))


def dist_in_workers(tmp_path, world_size=2, num_workers=2):
    return {json.loads((tmp_path / f"rank{r}.json.worker{w}").read_text())["dist_initialized"]
            for r in range(world_size) for w in range(num_workers)}


def test_ddp_two_ranks_two_workers_each_cover_every_sweep_once(tmp_path, data):
    results = run_ddp(tmp_path, data, extra=["--num-workers", "2", "--max-sweeps", "2", "--context", "fork"])
    check_ranks(results, 2)
    assert dist_in_workers(tmp_path) == {True}  # forked workers inherit the process group
    k0 = {k for it in results[0]["items"] for k in it["keys"]}
    assert k0 and k0 != set(range(N_SEQ))


def test_ddp_resume_with_forkserver_workers(tmp_path, data):
    """Workers started by forkserver (or spawn) have no process group: the rank seen in the
    main process when the DataLoader pickles the dataset is used; and each rank resumes."""
    results = run_ddp(tmp_path, data, extra=["--num-workers", "2", "--max-sweeps", "1", "--context", "forkserver",
                                             "--resume-after", "3"])
    assert dist_in_workers(tmp_path) == {False}
    check_ranks(results, 1)
    for res in results:
        assert {it["phase"] for it in res["items"]} == {0, 1}


def test_an_item_from_a_worker_is_one_shared_buffer_and_arrives_as_the_same_tensors(tmp_path):
    """Items leave a DataLoader worker packed into one shared-memory buffer (one file descriptor
    per minibatch instead of one per tensor); unpickled they are the same dict of tensors."""
    import io
    import pickle
    from multiprocessing.reduction import ForkingPickler

    from recordkit.integrations.torch import _PackedItem, to_torch
    src = tmp_path / "m.ctf"
    src.write_text("".join(f"{i} |x {i} {i + 1} |s {i % 3}:{i}.5 {3 + i % 2}:1\n{i} |x 0 1\n" for i in range(6)))
    from recordkit import StreamSpec
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.ctf import CTFReader
    source = MinibatchSource(CTFReader(src, [StreamSpec("x", "dense", 2), StreamSpec("s", "sparse", 5)]),
                             randomize=False, max_sweeps=1)
    item = to_torch(source.next_minibatch(7))
    item["__state__"] = {"position": 3}
    packed = _PackedItem(item)
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(packed)
    back = pickle.loads(buf.getvalue())
    assert type(back) is dict and list(back) == list(item)
    storages = {t.untyped_storage().data_ptr() for t in back.values() if isinstance(t, torch.Tensor)
                and t.layout == torch.strided}
    assert len(storages) == 1
    same_item(item, back)


def test_worker_items_go_through_the_shared_memory_ring_and_fall_back_to_the_pipe_when_a_slot_is_held(
        tmp_path, monkeypatch):
    """In a worker, an item is packed into a ring slot and only its number crosses the pipe; its
    tensors in the main process are views of the slot, which is written again only once every tensor
    that shares it is gone. While all slots are held, items take the pipe."""
    import gc
    import io
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import recordkit.integrations.torch_transfer as tt
    monkeypatch.setattr(tt, "RING_ENABLED", True)
    monkeypatch.setattr(tt, "get_worker_info", lambda: object())  # as if in a DataLoader worker
    monkeypatch.setattr(tt, "_RING", None)
    data = write_ctf(tmp_path / "r.ctf")
    source = make_source(data, randomize=False)
    items = [to_torch(source.next_minibatch(4)) for _ in range(2 * tt.RING_SLOTS + 2)]

    def send(item):
        buf = io.BytesIO()
        ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(tt._PackedItem(item))
        return buf.getvalue()

    wire = [send(it) for it in items[:tt.RING_SLOTS]]  # every slot filled
    assert all(b"_unpack_from_ring" in w and b"_unpack_item" not in w for w in wire)
    held = [pickle.loads(w) for w in wire]  # the loop keeps them: every slot stays held
    for item, back in zip(items, held):
        assert record(back) == record(item)
    fallback = send(items[tt.RING_SLOTS])
    assert b"_unpack_item" in fallback and b"_unpack_from_ring" not in fallback
    assert record(pickle.loads(fallback)) == record(items[tt.RING_SLOTS])
    kept = held[3]["x"][1:]  # one tensor of item 3 is still used: its slot stays held
    del held, back
    gc.collect()
    control = tt._RECEIVED[tt._RING.token]["control"]
    assert control.tolist() == [0, 0, 0, 1, 0, 0, 0, 0]
    for item in items[tt.RING_SLOTS + 1:]:
        again = send(item)
        assert b"_unpack_from_ring" in again and record(pickle.loads(again)) == record(item)
    assert torch.equal(kept, items[3]["x"][1:])  # never overwritten while in use
    del kept
    gc.collect()
    assert int(control.sum()) == 0


def test_the_main_process_forgets_rings_of_workers_that_ended():
    import recordkit.integrations.torch_transfer as tt
    tt._RECEIVED["999999999-dead"] = {"control": None, "slots": {}}
    tt._forget_exited_workers()
    assert "999999999-dead" not in tt._RECEIVED


def test_lent_ofrecord_minibatches_become_tensors_without_a_copy_a_warning_or_aliasing(tmp_path, monkeypatch):
    """In-order OFRecord minibatches are views of their chunk's columns: ``to_torch`` takes them as
    they are (no copy, no warning about a read-only array), and writing into the tensors changes
    no later minibatch or sweep."""
    import warnings

    import recordkit.engine.source as source_module
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(tmp_path / "d", 2) as w:
        for i in range(17):
            w.write(codec.encode({"x": np.array([i, i + 0.5], np.float32), "key": np.array([i], np.int64)}))
    streams = [StreamSpec("x", "dense", 2)]

    def read(scribble):
        des = OFRecordDeserializer(tmp_path / "d", streams, records_per_chunk=4)
        out, shared = [], 0
        with MinibatchSource(des, randomize=False, max_sweeps=2) as src, warnings.catch_warnings():
            warnings.simplefilter("error")
            for mb in src.minibatches(3):
                t = to_torch(mb)
                shared += t["x"].data_ptr() == mb["x"].data.__array_interface__["data"][0]
                out.append((t["keys"].tolist(), t["x"].tolist()))
                if scribble:
                    for v in t.values():
                        if isinstance(v, torch.Tensor):
                            v.fill_(1)
        return out, shared

    got, shared = read(scribble=True)
    assert shared == len(got)
    monkeypatch.setattr(source_module, "lend_from_table", lambda *a, **k: None)  # the copying gather
    assert got == read(scribble=False)[0]
