"""MinibatchDataset under torchdata's StatefulDataLoader: the loader's state_dict resumes exactly,
without replaying the minibatches the workers had prefetched."""
from __future__ import annotations

import functools
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
stateful = pytest.importorskip("torchdata.stateful_dataloader")
StatefulDataLoader = stateful.StatefulDataLoader

from recordkit import StreamSpec  # noqa: E402
from recordkit.engine.source import MinibatchSource  # noqa: E402
from recordkit.formats.ctf import CTFReader  # noqa: E402
from recordkit.integrations.torch import MinibatchDataset  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore:Sparse invariant checks are implicitly disabled"),
              pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta"),
              pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")]  # torchdata 0.11 under torch 2.13

STREAMS = [StreamSpec("x", "dense", 2, "x"), StreamSpec("y", "sparse", 5, "y")]


def write_ctf(path, n=70):
    lines = []
    for k in range(n):
        for t in range(k % 3 + 1):
            lines.append(f"{k} |x {k} {t} |y {(k + t) % 5}:{t + 1}\n")
    path.write_text("".join(lines))
    return path


def make_source(path, *, randomize):
    """Module level, so functools.partial of it pickles for the workers."""
    reader = CTFReader(str(path), STREAMS, chunk_size=200)
    return MinibatchSource(reader, randomize=randomize, seed=3, window=2, max_sweeps=2)


def record(item):
    keys = tuple(int(k) for k in item["keys"].numpy().view(np.uint64))
    return keys, tuple(item["sweeps"].tolist()), float(item["x"].sum()), float(item["y"].values().sum())


def make_loader(path, randomize, num_workers):
    ds = MinibatchDataset(functools.partial(make_source, path, randomize=randomize), 7)
    kw = {"timeout": 60, "prefetch_factor": 3} if num_workers else {}
    return StatefulDataLoader(ds, batch_size=None, num_workers=num_workers, **kw)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_ctf(tmp_path_factory.mktemp("sdl") / "data.ctf")


@pytest.mark.parametrize("randomize", [False, True])
@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_state_dict_resumes_with_exactly_the_remaining_minibatches(data, num_workers, randomize):
    full = [record(it) for it in make_loader(data, randomize, num_workers)]
    assert len(full) > 12 and len(set(full)) == len(full)
    for k in (1, 5, len(full) // 2 + 1, len(full) - 1):
        first = make_loader(data, randomize, num_workers)
        it = iter(first)
        taken = [record(next(it)) for _ in range(k)]
        state = json.loads(json.dumps(first.state_dict()))  # a checkpoint goes through a file
        del it, first
        resumed = make_loader(data, randomize, num_workers)
        resumed.load_state_dict(state)
        rest = [record(item) for item in resumed]
        assert taken == full[:k]
        assert rest == full[k:], f"k={k}"  # none replayed, none skipped, same order


def test_state_dict_of_a_finished_loader_starts_the_next_pass(data):
    """torchdata's convention: a state taken after the loader finished is the start of the next
    iteration, which for a dataset built without resume_state is its first minibatch."""
    first = make_loader(data, True, 2)
    full = [record(it) for it in first]
    resumed = make_loader(data, True, 2)
    resumed.load_state_dict(first.state_dict())
    assert [record(it) for it in resumed] == full


def test_a_loader_resumed_mid_pass_finishes_then_starts_over(data):
    full = [record(it) for it in make_loader(data, False, 2)]
    first = make_loader(data, False, 2)
    it = iter(first)
    for _ in range(4):
        next(it)
    resumed = make_loader(data, False, 2)
    resumed.load_state_dict(first.state_dict())
    assert [record(x) for x in resumed] == full[4:]


def test_dataset_state_dict_in_the_main_process_is_the_state_after_the_last_item(data):
    ds = MinibatchDataset(functools.partial(make_source, data, randomize=True), 7)
    assert ds.state_dict() == {}  # nothing taken: start from the beginning
    it = iter(ds)
    items = [next(it) for _ in range(3)]
    st = ds.state_dict()
    assert st == {0: items[-1]["__state__"]}
    again = MinibatchDataset(functools.partial(make_source, data, randomize=True), 7)
    again.load_state_dict(json.loads(json.dumps(st)))
    assert [record(x) for x in again] == [record(x) for x in it]


def test_resume_works_without_states_in_the_items(data):
    """include_state=False drops ``__state__`` from the items; the loader's checkpoint does not need it."""
    def build():
        ds = MinibatchDataset(functools.partial(make_source, data, randomize=True), 7, include_state=False)
        return StatefulDataLoader(ds, batch_size=None, num_workers=2, timeout=60)
    full = [record(it) for it in build()]
    first = build()
    it = iter(first)
    taken = [next(it) for _ in range(6)]
    assert all("__state__" not in item for item in taken)
    resumed = build()
    resumed.load_state_dict(first.state_dict())
    assert [record(x) for x in resumed] == full[6:]
