"""RandomAccessDataSource: len/[i] over every indexed format, equal to `recordkit cat`; under Grain and
a torch DataLoader with workers."""
from __future__ import annotations

import functools
import importlib.util
import pickle
import threading

import numpy as np
import pytest

from bridge_corpus import STREAMS, cat_records, cli, make_ctf
from recordkit.integrations.random_access import RandomAccessDataSource

SPECS = ["feat=dense:4:F", "lab=sparse:50:L"]


def as_cat(rec: dict, names) -> dict:
    """A source record in `recordkit cat`'s JSON shape (dense: samples as lists; sparse: per sample
    {"indices", "values"})."""
    out = {"key": int(rec["key"])}
    for name, sparse in names:
        if sparse:
            ptr, idx, val = rec[f"{name}_indptr"], rec[f"{name}_indices"], rec[f"{name}_values"]
            out[name] = [{"indices": idx[ptr[j]:ptr[j + 1]].tolist(), "values": val[ptr[j]:ptr[j + 1]].tolist()}
                         for j in range(len(ptr) - 1)]
        else:
            out[name] = rec[name].tolist()
    return out


def normalize(cat_rec: dict, names) -> dict:
    """A `cat` line with its floats read back as float32 (what the readers hold)."""
    out = {"key": cat_rec["key"]}
    for name, sparse in names:
        if sparse:
            out[name] = [{"indices": s["indices"], "values": np.asarray(s["values"], np.float32).tolist()}
                         for s in cat_rec[name]]
        else:
            out[name] = np.asarray(cat_rec[name], np.float32).reshape(-1, 4 if name == "feat" else 1).tolist()
    return out


NAMES = [("feat", False), ("lab", True)]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("ra")
    return make_ctf(d / "corpus.ctf", n=90)


def convert(capsys, corpus, out, *args):
    code, _, err = cli(capsys, "convert", corpus, out, *STREAMS, *args)
    assert code == 0, err
    return str(out)


@pytest.mark.parametrize("fmt", ["ctf", "cbf", "parquet", "mds", "ofrecord"])
def test_every_format_items_equal_cat_sequences(fmt, corpus, tmp_path, capsys):
    expected = [normalize(r, NAMES) for r in cat_records(capsys, corpus, *STREAMS)]
    if fmt == "ctf":
        path, streams = corpus, SPECS
    elif fmt == "cbf":
        path, streams = convert(capsys, corpus, tmp_path / "d.cbf", "--chunk-size", "2000"), None
        # CBF keeps no keys: its own `cat` numbers sequences; compare with that
        expected = [normalize(r, NAMES) for r in cat_records(capsys, path)]
    elif fmt == "parquet":
        pytest.importorskip("pyarrow")
        path, streams = convert(capsys, corpus, tmp_path / "d.parquet", "--to", "parquet"), None
    elif fmt == "mds":
        path, streams = convert(capsys, corpus, tmp_path / "mds", "--to", "mds", "--shard-size", "3000"), None
    else:
        path, streams = convert(capsys, corpus, tmp_path / "ofr", "--to", "ofrecord", "--parts", "3"), None
    if fmt in ("cbf", "parquet", "mds"):  # the data set's own `cat` agrees with the CTF's
        own = [normalize(r, NAMES) for r in cat_records(capsys, path)]
        assert own == expected
    src = RandomAccessDataSource(path, streams)
    assert len(src) == len(expected) == 90
    got = [as_cat(src[i], NAMES) for i in range(len(src))]
    assert got == expected
    # shuffled access gives the same records as sequential access
    order = np.random.default_rng(0).permutation(len(src))
    assert [as_cat(src[int(i)], NAMES) for i in order] == [expected[i] for i in order]


def test_several_chunks_are_addressed_across_chunk_boundaries(corpus, tmp_path, capsys):
    path = convert(capsys, corpus, tmp_path / "d.cbf", "--chunk-size", "600")
    src = RandomAccessDataSource(path, cache_chunks=1)
    assert len(src._chunk_ids) > 3  # the test needs several chunks
    expected = [normalize(r, NAMES) for r in cat_records(capsys, path)]
    for i in [0, len(src) - 1] + [s for s in src._starts[1:-1]] + [s - 1 for s in src._starts[1:-1]]:
        assert as_cat(src[i], NAMES) == expected[i]


def test_singa_store_items_equal_the_sequences_it_was_converted_from(tmp_path, capsys):
    ctf = tmp_path / "d.ctf"
    rng = np.random.default_rng(3)
    rows = [(rng.normal(size=3).astype(np.float32), float(rng.integers(0, 10))) for _ in range(25)]
    ctf.write_text("".join(f"{i} |features {' '.join(repr(float(v)) for v in f)} |label {lab}\n"
                           for i, (f, lab) in enumerate(rows)))
    spec = ["--stream", "features=dense:3", "--stream", "label=dense:1"]
    store = tmp_path / "d.kv"
    code, _, err = cli(capsys, "convert", ctf, store, *spec, "--to", "kvfile")
    assert code == 0, err
    src = RandomAccessDataSource(str(store))
    assert len(src) == 25
    for i, (f, lab) in enumerate(rows):
        rec = src[i]
        np.testing.assert_array_equal(rec["features"], f.reshape(1, 3))
        assert rec["label"].tolist() == [[lab]]


def test_index_out_of_range_raises_index_error(corpus):
    src = RandomAccessDataSource(corpus, SPECS)
    n = len(src)
    for bad in (n, n + 5, -n - 1, 10**12):
        with pytest.raises(IndexError):
            src[bad]
    assert list(iter_by_getitem(src)) == list(range(n))  # the old iteration protocol stops at IndexError


def iter_by_getitem(src):
    for i, rec in enumerate(src):
        yield i


def test_negative_indexes_count_from_the_end(corpus):
    src = RandomAccessDataSource(corpus, SPECS)
    n = len(src)
    for i in (1, 2, n // 2, n):
        assert as_cat(src[-i], NAMES) == as_cat(src[n - i], NAMES)
    assert int(src[np.int64(-1)]["key"]) == 2**63 + 11  # NumPy integers index too; the last key is beyond int64
    assert [int(r["key"]) for r in src[-3:]] == [int(src[i]["key"]) for i in range(n - 3, n)]


def test_concurrent_threads_get_the_right_records(corpus, tmp_path, capsys):
    path = convert(capsys, corpus, tmp_path / "d.cbf", "--chunk-size", "600")
    src = RandomAccessDataSource(path, cache_chunks=2)
    expected = [as_cat(src[i], NAMES) for i in range(len(src))]
    src = RandomAccessDataSource(path, cache_chunks=2)
    errors = []

    def work(seed):
        order = np.random.default_rng(seed).permutation(len(src))
        for i in order:
            if as_cat(src[int(i)], NAMES) != expected[i]:
                errors.append(int(i))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_pickles_as_its_recipe_and_reopens(corpus):
    src = RandomAccessDataSource(corpus, SPECS)
    first = as_cat(src[5], NAMES)
    again = pickle.loads(pickle.dumps(src))
    assert again._reader is None and len(again) == len(src)
    assert as_cat(again[5], NAMES) == first
    assert "RandomAccessDataSource(" in repr(src) and "sequences=90" in repr(src)


def test_an_open_reader_is_usable_but_not_picklable(corpus):
    from recordkit.formats.ctf import CTFReader
    from recordkit.engine.streams import StreamSpec
    reader = CTFReader(corpus, [StreamSpec.parse(s) for s in SPECS])
    src = RandomAccessDataSource(reader)
    assert len(src) == 90 and int(src[0]["key"]) == int(RandomAccessDataSource(corpus, SPECS)[0]["key"])
    with pytest.raises(TypeError, match="factory"):
        pickle.dumps(src)


def _open_ctf(path):
    from recordkit.formats.ctf import CTFReader
    from recordkit.engine.streams import StreamSpec
    return CTFReader(path, [StreamSpec.parse(s) for s in SPECS])


@pytest.mark.skipif(importlib.util.find_spec("grain") is None, reason="grain is not installed")
def test_runs_under_grain_map_dataset_shuffle_and_batch(corpus):
    import grain
    src = RandomAccessDataSource(functools.partial(_open_ctf, corpus))
    expected = {int(src[i]["key"]): as_cat(src[i], NAMES) for i in range(len(src))}

    ds = grain.MapDataset.source(src).shuffle(seed=0).map(lambda r: {"key": r["key"], "n": len(r["feat"])})
    batches = list(ds.batch(8))
    keys = np.concatenate([b["key"] for b in batches]).tolist()
    assert sorted(keys) == sorted(expected) and keys != list(expected)  # every sequence once, shuffled
    again = [int(k) for b in grain.MapDataset.source(src).shuffle(seed=0).batch(8, batch_fn=list)
             for k in (r["key"] for r in b)]
    assert again == keys  # the same seed, the same order
    # a whole record through Grain equals direct access
    rec = grain.MapDataset.source(src)[7]
    assert as_cat(rec, NAMES) == expected[int(src[7]["key"])]


@pytest.mark.skipif(importlib.util.find_spec("grain") is None, reason="grain is not installed")
def test_runs_under_grain_data_loader_with_a_sampler_and_workers(corpus):
    import grain
    src = RandomAccessDataSource(functools.partial(_open_ctf, corpus))
    sampler = grain.samplers.IndexSampler(num_records=len(src), shard_options=grain.sharding.NoSharding(),
                                          shuffle=True, num_epochs=1, seed=1)
    loader = grain.DataLoader(data_source=src, sampler=sampler, worker_count=2)
    keys = [int(r["key"]) for r in loader]
    assert sorted(keys) == sorted(int(src[i]["key"]) for i in range(len(src)))


def test_torch_map_style_dataset_under_a_data_loader_with_two_workers(corpus):
    torch = pytest.importorskip("torch")
    from recordkit.integrations.torch import SequenceDataset
    ds = SequenceDataset(corpus, SPECS)
    expected = {int(ds.source[i]["key"]): as_cat(ds.source[i], NAMES) for i in range(len(ds))}
    loader = torch.utils.data.DataLoader(ds, batch_size=4, shuffle=True, num_workers=2,
                                         collate_fn=list, generator=torch.Generator().manual_seed(0))
    seen = {}
    for batch in loader:
        for item in batch:
            rec = {k: v.numpy() for k, v in item.items()}
            key = int(rec["key"].view(np.uint64))
            seen[key] = as_cat({**rec, "key": key}, NAMES)
    assert seen == expected
    assert isinstance(ds[0]["feat"], torch.Tensor) and ds[0]["feat"].shape[1] == 4


def test_a_non_integer_index_is_a_type_error(corpus):
    src = RandomAccessDataSource(corpus, SPECS)
    with pytest.raises(TypeError):
        src[1.0]
    with pytest.raises(TypeError):
        src["0"]
