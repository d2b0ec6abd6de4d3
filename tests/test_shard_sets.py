"""The shard-directory writers' shared base (``formats/sharding.ShardSetWriter``) and the joins of
written sets (``ShardSetJoin``): a failed write or join leaves no output and no temporary, closing
twice is one close, sets that do not belong together are refused before any shard moves."""
import os

import numpy as np
import pytest

from recordkit import StreamSpec
from recordkit.engine.chunk import ChunkData, DenseColumn
from recordkit.errors import FormatError, UsageError
from recordkit.formats import registry

SHARD_FORMATS = ["webdataset", "tfrecord", "mds"]
JOINED_FORMATS = SHARD_FORMATS + ["hf"]


def chunk(n=3, dim=2, start=0):
    values = np.arange(n * dim, dtype=np.float32).reshape(n, dim) + start
    return ChunkData(0, np.arange(start, start + n, dtype=np.uint64), np.ones(n, np.int64),
                     {"x": DenseColumn(values, np.arange(n + 1))})


def writer(fmt, path, dim=2, **options):
    return registry.get(fmt).open_writer(str(path), [StreamSpec("x", "dense", dim)], precision="float",
                                         **options)


def entries(directory):
    """What a directory holds, hidden staging directories and temporaries included."""
    return sorted(os.listdir(directory))


def values(fmt, path):
    reader = registry.get(fmt).open_reader(str(path), None, precision="float")
    try:
        return [np.asarray(reader.load_chunk(c.id).columns["x"].values).tolist() for c in reader.chunks]
    finally:
        getattr(reader, "close", lambda: None)()


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_a_write_that_fails_leaves_no_data_set_and_no_temporary(tmp_path, fmt):
    with pytest.raises(ValueError, match="dim"):
        with writer(fmt, tmp_path / "out", shard_size=1) as w:
            w.write_chunk(chunk())
            w.write_chunk(chunk(dim=3))  # not the declared stream: the writer refuses it
    assert entries(tmp_path) == []


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_a_close_that_fails_discards_every_shard_already_written(tmp_path, fmt, monkeypatch):
    w = writer(fmt, tmp_path / "out", shard_size=1)
    w.write_chunk(chunk())

    def fail():
        raise OSError("disk full")
    monkeypatch.setattr(w, "_describe", fail)
    with pytest.raises(OSError, match="disk full"):
        w.close()
    assert entries(tmp_path) == []
    w.abort()  # after the failed close: nothing left to discard, no error
    assert entries(tmp_path) == []


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_closing_twice_is_one_close_and_an_abort_after_it_keeps_the_data_set(tmp_path, fmt):
    w = writer(fmt, tmp_path / "out")
    w.write_chunk(chunk())
    w.close()
    published = entries(tmp_path / "out")
    w.close()
    w.abort()
    assert entries(tmp_path) == ["out"] and entries(tmp_path / "out") == published
    assert values(fmt, tmp_path / "out") == [chunk().columns["x"].values.tolist()]


@pytest.mark.parametrize("fmt", SHARD_FORMATS)
def test_closing_an_aborted_writer_is_a_usage_error_and_publishes_nothing(tmp_path, fmt):
    w = writer(fmt, tmp_path / "out")
    w.write_chunk(chunk())
    w.abort()
    w.abort()
    with pytest.raises(UsageError, match="aborted"):
        w.close()
    assert entries(tmp_path) == []


def written_sets(tmp_path, fmt, dims=(2, 2)):
    paths = []
    for i, dim in enumerate(dims):
        path = tmp_path / f"set{i}"
        with writer(fmt, path, dim=dim) as w:
            w.write_chunk(chunk(dim=dim, start=10 * i))
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("fmt", JOINED_FORMATS)
def test_joined_sets_read_as_one_in_the_order_given(tmp_path, fmt):
    sources = written_sets(tmp_path, fmt)
    registry.get(fmt).join(sources, str(tmp_path / "joined"))
    got = np.concatenate([np.asarray(v) for v in values(fmt, tmp_path / "joined")])
    want = np.concatenate([chunk(start=0).columns["x"].values, chunk(start=10).columns["x"].values])
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("fmt", JOINED_FORMATS)
def test_sets_of_other_streams_do_not_join_and_every_source_stays_whole(tmp_path, fmt):
    sources = written_sets(tmp_path, fmt, dims=(2, 3))
    before = {s: entries(s) for s in sources}
    with pytest.raises(FormatError) as e:
        registry.get(fmt).join(sources, str(tmp_path / "joined"))
    assert str(e.value).startswith(sources[1]) and sources[0] in str(e.value)
    assert "only the sets of one conversion join" in str(e.value)
    assert not (tmp_path / "joined").exists() and not [n for n in entries(tmp_path) if n.startswith(".")]
    assert {s: entries(s) for s in sources} == before
    assert values(fmt, sources[0]) == [chunk().columns["x"].values.tolist()]


@pytest.mark.parametrize("fmt", JOINED_FORMATS)
def test_a_directory_that_is_no_written_set_does_not_join(tmp_path, fmt):
    sources = written_sets(tmp_path, fmt, dims=(2,)) + [str(tmp_path / "empty")]
    os.mkdir(sources[1])
    with pytest.raises(FormatError, match=f"^{sources[1]}: no "):
        registry.get(fmt).join(sources, str(tmp_path / "joined"))
    assert not (tmp_path / "joined").exists()
    with pytest.raises(UsageError, match="no data sets to join"):
        registry.get(fmt).join([], str(tmp_path / "joined"))


@pytest.mark.parametrize("fmt", JOINED_FORMATS)
def test_a_set_missing_a_shard_it_lists_does_not_join_and_the_others_stay_whole(tmp_path, fmt):
    sources = written_sets(tmp_path, fmt)
    shard = sorted(n for n in entries(sources[1]) if not n.endswith(".json"))[0]
    os.remove(os.path.join(sources[1], shard))
    before = entries(sources[0])
    with pytest.raises(FormatError, match=f"^{sources[1]}/.*{shard}"):  # named by the set's description
        registry.get(fmt).join(sources, str(tmp_path / "joined"))
    assert entries(sources[0]) == before and not (tmp_path / "joined").exists()
    assert values(fmt, sources[0]) == [chunk().columns["x"].values.tolist()]
