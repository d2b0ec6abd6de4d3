"""Requests to the object store, counted: opening in a few round trips, metadata once per open,
a bounded range cache, offline warm reads, and partitions that share a file's bytes.

Every request goes through ``FaultyProxy`` (tests/s3_server.py) in front of a local moto server,
which counts them and can hold each for a first-byte latency.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

import recordkit

from helpers import dense, sparse
from s3_server import S3, FaultyProxy
from recordkit.engine.source import MinibatchSource
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.mds import MDSReader
from recordkit.storage import range_cache
from recordkit.storage.range_cache import CacheDir, OfflineMissError

STREAMS = [dense("x", 8), sparse("y", 50)]


def dense_sequences(lengths, dim=32, seed=0):
    """Dense sequences of the given lengths (0 included: CBF stores empty sequences)."""
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(int(n), dim)).astype(np.float32)} for n in lengths]


def sequences(n, seed=0):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(int(rng.integers(1, 4)), 8)).astype(np.float32),
             "y": sp.random(1, 50, density=0.1, random_state=k, dtype=np.float32, format="csr")}
            for k in range(n)]


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def files(s3, tmp_path_factory):
    d = tmp_path_factory.mktemp("requests")
    seqs = sequences(416)
    with CBFWriter(d / "c25.cbf", STREAMS, chunk_size=2048) as w:
        for s in seqs:
            w.write(s)
    with CBFWriter(d / "small.cbf", STREAMS) as w:
        for s in seqs[:140]:
            w.write(s)
    # 25 chunks of 8 KiB: more than the first and last block a remote open fetches first
    with CBFWriter(d / "t25.cbf", [dense("x", 32)], chunk_size=8192) as w:
        for s in dense_sequences(np.random.default_rng(1).integers(0, 4, size=1010)):
            w.write(s)
    # every chunk as many samples as sequences, none of length 1
    with CBFWriter(d / "zero_two.cbf", [dense("x", 32)], chunk_size=4096) as w:
        for s in dense_sequences([0, 2] * 200):
            w.write(s)
    for fmt in ("mds", "webdataset", "tfrecord", "parquet"):
        recordkit.convert(d / "small.cbf", d / fmt, to=fmt, parts=7)
    fs = s3.fs()
    for name in ("c25.cbf", "t25.cbf", "zero_two.cbf"):
        fs.put_file(str(d / name), f"{s3.bucket}/{name}")
    for fmt in ("mds", "webdataset", "tfrecord", "parquet"):
        for name in os.listdir(d / fmt):
            fs.put_file(str(d / fmt / name), f"{s3.bucket}/{fmt}/{name}")
    return d


@pytest.fixture
def proxy(s3):
    p = FaultyProxy(s3.port)
    yield p
    p.close()


def minibatches(src, size=64):
    out = []
    while (mb := src.next_minibatch(size)) is not None:
        out.append((mb.keys.tolist(), {name: [None if a is None else np.asarray(a).tolist()
                                              for a in (b.data, b.values, b.indices, b.indptr)]
                                       for name, b in mb.streams.items()}))
    return out


def sweep(reader, **kw):
    return minibatches(MinibatchSource(reader, randomize=True, window=4, seed=3, max_sweeps=1, max_memory=None, **kw))


def test_the_file_has_the_chunks_the_tests_assume(files):
    assert len(CBFReader(files / "c25.cbf").chunks) == 25
    assert len(MDSReader(files / "mds").chunks) == 7
    t25 = CBFReader(files / "t25.cbf")
    assert len(t25.chunks) == 25 and os.path.getsize(files / "t25.cbf") > 2 * (64 << 10)
    assert 0 in np.concatenate([t25.sequence_lengths(c.id) for c in t25.chunks])
    zero_two = CBFReader(files / "zero_two.cbf")
    assert len(zero_two.chunks) > 1 and all(c.num_samples == c.num_sequences for c in zero_two.chunks)


# -- open in a few round trips -----------------------------------------------------------------------
def test_opening_a_remote_cbf_takes_three_round_trips(s3, files, proxy):
    """Size and version with the sidecar probe; the first and last block (prefix, header, offset
    table, the first and last length tables); the other 23 tables in one request. The time is
    benchmarks/remote_open.py's."""
    proxy.latency = 0.1
    reader = CBFReader(s3.url("t25.cbf"), storage_options=s3.options(proxy.port))
    assert (proxy.requests["HEAD"], proxy.requests["GET"]) == (1, 1 + 2)
    src = MinibatchSource(reader, randomize=True, window=4, seed=3, max_sweeps=1, max_memory=None)
    assert (proxy.requests["HEAD"], proxy.requests["GET"]) == (1, 1 + 2 + 1)
    assert proxy.rounds() == 3
    proxy.latency = 0
    assert minibatches(src) == sweep(CBFReader(files / "t25.cbf"))


def test_length_tables_too_far_apart_to_share_a_request_are_asked_all_at_once(s3, files, proxy, monkeypatch):
    """More at once than s3fs's default pool of 10 connections: one round trip for 23 tables."""
    from recordkit.formats.cbf import layout
    from recordkit.storage import source
    monkeypatch.setattr(source, "MERGE_GAP", 0)
    monkeypatch.setattr(layout, "FIRST_BLOCK", 4096)  # only chunk 0's table in the blocks the open reads first
    monkeypatch.setattr(layout, "LAST_BLOCK", 4096)
    blocks = layout.open_ranges(os.path.getsize(files / "t25.cbf"))
    local = CBFReader(files / "t25.cbf")
    apart = [c for c in local.chunks
             if not any(o <= c.offset and c.offset + 4 * c.num_sequences <= o + n for o, n in blocks)]
    assert len(apart) > 20
    proxy.latency = 0.1
    reader = CBFReader(s3.url("t25.cbf"), storage_options=s3.options(proxy.port))
    before = proxy.count()
    assert [reader.sequence_lengths(c.id).tolist() for c in reader.chunks] == \
        [local.sequence_lengths(c.id).tolist() for c in reader.chunks]
    assert proxy.count() - before == len(apart) and proxy.most_at_once == len(apart)
    assert proxy.rounds(before) == 1


def test_nearby_ranges_share_a_request_within_the_gap_and_span():
    from recordkit.storage.source import merge_ranges
    ranges = [(100, 10), (0, 10), (40, 10), (1000, 5), (1010, 500)]
    assert merge_ranges(ranges, gap=30, span=1000) == [[1, 2], [0], [3, 4]]
    assert merge_ranges(ranges, gap=1000, span=1005) == [[1, 2, 0, 3], [4]]  # 1510 bytes would be too long
    assert merge_ranges(ranges, gap=0, span=10 ** 6) == [[1], [2], [0], [3], [4]]
    assert merge_ranges([(0, 100), (50, 10)], gap=0, span=100) == [[0, 1]]  # inside the run


def test_a_chunk_of_as_many_samples_as_sequences_keeps_its_empty_sequences_remotely(s3, files, proxy):
    """The offset table cannot tell lengths 0 and 2 from 1 and 1: the tables are read, never assumed."""
    remote = CBFReader(s3.url("zero_two.cbf"), storage_options=s3.options(proxy.port))
    local = CBFReader(files / "zero_two.cbf")
    for c in local.chunks:
        assert remote.sequence_lengths(c.id).tolist() == local.sequence_lengths(c.id).tolist() == \
            [0, 2] * (c.num_sequences // 2)
    assert sweep(remote) == sweep(local)
    assert sweep(CBFReader(s3.url("t25.cbf"), storage_options=s3.options(proxy.port))) == \
        sweep(CBFReader(files / "t25.cbf"))


def test_a_missing_checksum_sidecar_costs_one_request(s3, files, proxy):
    from recordkit.storage import open_source
    open_source(s3.url("c25.cbf"), storage_options=s3.options(proxy.port))
    assert proxy.requests == {"HEAD": 1, "GET": 1}  # the object's size and version, the sidecar's GET


@pytest.mark.parametrize("name", ["c25.cbf", "t25.cbf"])
def test_a_warm_cache_opens_a_remote_cbf_without_ranged_reads(s3, files, proxy, tmp_path, name):
    opts = s3.options(proxy.port)
    MinibatchSource(CBFReader(s3.url(name), storage_options=opts, cache_dir=tmp_path), max_memory=None)
    before = proxy.ranged_gets
    MinibatchSource(CBFReader(s3.url(name), storage_options=opts, cache_dir=tmp_path), max_memory=None)
    assert proxy.ranged_gets == before
    # the tables a request shared were cached one by one, not with the chunks between them
    tables = sum(4 * c.num_sequences for c in CBFReader(files / name).chunks)
    assert range_cache.cached_bytes(tmp_path) <= tables + 2 * (64 << 10)  # + the open's first and last block


# -- recordkit.open: telling the format and opening in one look -------------------------------------------
def opened(s3, proxy, name, cache):
    """``recordkit.open`` + a MinibatchSource's open of ``name``: (requests, round trips) they took."""
    before = proxy.count()
    reader = recordkit.open(s3.url(name), storage_options=s3.options(proxy.port), cache_dir=cache)
    src = MinibatchSource(reader, randomize=True, window=4, seed=3, max_sweeps=1, max_memory=None)
    return (proxy.count() - before, proxy.rounds(before)), src


def test_recordkit_open_of_a_remote_cbf_file_takes_two_round_trips_cold_and_one_warm(s3, files, proxy, tmp_path):
    """Cold: one round trip tells the format and opens (the name listed as a prefix and as a
    directory, the first and last block and the sidecar fetched beside them), one more for the
    length tables outside those blocks. Warm: the two listings alone (size, version, sidecar,
    directory or not); everything else is the cache's."""
    proxy.latency = 0.1
    cost, src = opened(s3, proxy, "t25.cbf", tmp_path)
    assert cost == (6, 2)
    proxy.latency = 0
    expected = sweep(CBFReader(files / "t25.cbf"))
    assert minibatches(src) == expected
    proxy.latency = 0.1
    cost, src = opened(s3, proxy, "t25.cbf", tmp_path)
    assert cost == (2, 1)
    proxy.latency = 0
    before = proxy.count()
    assert minibatches(src) == expected and proxy.count() == before  # the sweep: all from the cache


def test_recordkit_open_of_a_remote_mds_directory_takes_two_round_trips_cold_and_one_warm(s3, files, proxy, tmp_path):
    """Cold: the look (the directory's listing among its answers; the blocks it guessed at miss),
    then index.json. Warm: the two listings; the shards' sizes and versions came with them."""
    proxy.latency = 0.1
    cost, src = opened(s3, proxy, "mds", tmp_path)
    assert cost[0] <= 6 and cost[1] == 2
    proxy.latency = 0
    expected = sweep(MDSReader(files / "mds"))
    assert minibatches(src) == expected
    proxy.latency = 0.1
    cost, src = opened(s3, proxy, "mds", tmp_path)
    assert cost == (2, 1)
    proxy.latency = 0
    before = proxy.count()
    assert minibatches(src) == expected and proxy.count() == before


def test_recordkit_open_reads_a_changed_object_as_its_new_version_and_refuses_a_mix(s3, files, tmp_path):
    """The look's listing is the version pinned: a warm open of a replaced object reads the new
    one, and an object replaced after the open is an error, never mixed in."""
    from recordkit.storage.versions import SourceChangedError
    fs = s3.fs()
    fs.put_file(str(files / "c25.cbf"), f"{s3.bucket}/changing/data.cbf")
    url = s3.url("changing/data.cbf")
    assert sweep(recordkit.open(url, storage_options=s3.options(), cache_dir=tmp_path)) == \
        sweep(CBFReader(files / "c25.cbf"))
    fs.put_file(str(files / "t25.cbf"), f"{s3.bucket}/changing/data.cbf")
    reader = recordkit.open(url, storage_options=s3.options(), cache_dir=tmp_path)
    assert sweep(reader) == sweep(CBFReader(files / "t25.cbf"))
    reader = recordkit.open(url, storage_options=s3.options(), cache_dir=tmp_path / "other")
    fs.put_file(str(files / "c25.cbf"), f"{s3.bucket}/changing/data.cbf")
    with pytest.raises(SourceChangedError, match="data.cbf: changed while reading bytes"):
        reader.load_chunk(len(reader.chunks) // 2)


def test_recordkit_open_offline_from_a_complete_cache_asks_the_store_nothing(s3, files, proxy, tmp_path, monkeypatch):
    expected = sweep(recordkit.open(s3.url("t25.cbf"), storage_options=s3.options(proxy.port), cache_dir=tmp_path))
    refuse_the_store(monkeypatch)
    asked = proxy.count()
    assert sweep(recordkit.open(s3.url("t25.cbf"), cache_dir=tmp_path, offline=True)) == expected
    assert proxy.count() == asked


def test_recordkit_open_verifies_a_remote_cbf_file_by_the_sidecar_its_look_found(s3, files, proxy, tmp_path):
    """Cold, the sidecar comes with the look's first round trip (verified reads are of whole
    checksum blocks: one request more than without a sidecar); warm, the cache's record of it, while
    the listing gives the ETag recorded; a sidecar replaced since is asked again. A block that
    disagrees with it is an error naming the file."""
    from recordkit.errors import FormatError
    from recordkit.storage.sidecars import create
    local = tmp_path / "v.cbf"
    local.write_bytes((files / "t25.cbf").read_bytes())
    create(str(local))
    fs = s3.fs()
    for name in ("v.cbf", "v.cbf.rkcrc"):
        fs.put_file(str(tmp_path / name), f"{s3.bucket}/verified/{name}")
    proxy.latency = 0.1
    cost, src = opened(s3, proxy, "verified/v.cbf", tmp_path / "cache")
    assert cost[1] == 2 and cost[0] <= 7 and type(src.deserializer._source).__name__ == "VerifiedSource"
    cost, src = opened(s3, proxy, "verified/v.cbf", tmp_path / "cache")
    assert cost == (2, 1) and type(src.deserializer._source).__name__ == "VerifiedSource"
    create(str(local), block_size=4096)
    fs.put_file(str(tmp_path / "v.cbf.rkcrc"), f"{s3.bucket}/verified/v.cbf.rkcrc")
    cost, src = opened(s3, proxy, "verified/v.cbf", tmp_path / "cache")
    assert src.deserializer._source.table.block_size == 4096  # (reads of other blocks: not cached yet)
    cost, src = opened(s3, proxy, "verified/v.cbf", tmp_path / "cache")
    assert cost == (2, 1) and src.deserializer._source.table.block_size == 4096
    proxy.latency = 0
    size = local.stat().st_size
    damaged = bytearray(local.read_bytes())
    damaged[size // 2] ^= 0xFF
    fs.pipe(f"{s3.bucket}/verified/v.cbf", bytes(damaged))
    with pytest.raises(FormatError, match=r"v\.cbf: checksum mismatch"):
        reader = recordkit.open(s3.url("verified/v.cbf"), storage_options=s3.options())
        for c in reader.chunks:
            reader.load_chunk(c.id)


def test_a_block_the_look_fetched_of_another_version_than_listed_is_never_used(s3, files, monkeypatch):
    """The object replaced between the listing and the guessed GETs: their bytes carry another ETag
    and are dropped; the reader fetches its blocks again, of the version listed."""
    from recordkit.storage import probe
    other = (files / "c25.cbf").read_bytes()
    get = probe._get

    def replaced(fs, path, **kw):
        resp, data = get(fs, path, **kw)
        if "Range" in kw:
            resp, data = dict(resp, ETag='"another"'), other[:len(data)]
        return resp, data
    monkeypatch.setattr(probe, "_get", replaced)
    assert probe.look(s3.url("t25.cbf"), s3.options()).blocks == []
    assert sweep(recordkit.open(s3.url("t25.cbf"), storage_options=s3.options())) == \
        sweep(CBFReader(files / "t25.cbf"))


def test_a_name_that_begins_many_others_is_asked_as_before(s3, files, monkeypatch):
    from recordkit.storage import probe
    fs = s3.fs()
    for name in ("a.cbf", "a.cbf1", "a.cbf2"):
        fs.put_file(str(files / "t25.cbf"), f"{s3.bucket}/siblings/{name}")
    monkeypatch.setattr(probe, "SIBLINGS", 2)
    assert probe.look(s3.url("siblings/a.cbf"), s3.options()) is None
    assert sweep(recordkit.open(s3.url("siblings/a.cbf"), storage_options=s3.options())) == \
        sweep(CBFReader(files / "t25.cbf"))


def test_cli_cat_of_a_remote_cbf_file_from_a_warm_cache_asks_two_listings_at_once(s3, files, proxy, tmp_path,
                                                                                 capsys):
    """``cat`` tells the format and opens the reader on one look: warm, its two listings are all."""
    import json
    from recordkit.cli.main import main
    args = ["cat", s3.url("t25.cbf"), "--storage-options", json.dumps(s3.options(proxy.port)),
            "--cache-dir", str(tmp_path)]
    assert main(args) == 0
    cold = capsys.readouterr().out
    proxy.latency = 0.1
    before = proxy.count()
    assert main(args) == 0
    assert (proxy.count() - before, proxy.rounds(before)) == (2, 1)
    assert capsys.readouterr().out == cold


# -- metadata once per open ------------------------------------------------------------------------------
def test_a_warm_mds_sweep_asks_the_store_once(s3, files, proxy, tmp_path):
    opts = s3.options(proxy.port)
    expected = sweep(MDSReader(files / "mds"))
    assert sweep(MDSReader(s3.url("mds"), storage_options=opts, cache_dir=tmp_path)) == expected
    cold = proxy.count()
    assert cold <= 1 + 1 + 7  # a listing, the index, one GET per shard
    reader = MDSReader(s3.url("mds"), storage_options=opts, cache_dir=tmp_path)
    assert sweep(reader) == expected
    assert proxy.count() - cold == 1  # the listing: sizes, versions and sidecars of every shard
    assert sweep(reader) == expected
    assert proxy.count() - cold == 1  # a second sweep of the same reader: nothing


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord", "parquet"])
def test_sharded_data_sets_read_their_metadata_once_per_open(s3, files, proxy, tmp_path, fmt):
    opts = s3.options(proxy.port)
    expected = sweep(recordkit.open(files / fmt))
    assert sweep(recordkit.open(s3.url(fmt), storage_options=opts, cache_dir=tmp_path)) == expected
    cold = proxy.count()
    reader = recordkit.open(s3.url(fmt), storage_options=opts, cache_dir=tmp_path)
    opened = proxy.count()
    assert opened - cold <= 8  # telling the format and listing the directory (as many for 1 shard as for 7)
    assert sweep(reader) == expected and sweep(reader) == expected
    assert proxy.count() == opened  # the shards' metadata came with the listing, their bytes from the cache


def test_a_remote_mds_reader_pins_every_shard_for_its_life(s3, files, tmp_path):
    """Opened once, a shard keeps its version: a replaced shard is an error, never mixed in."""
    from recordkit.storage.versions import SourceChangedError
    fs = s3.fs()
    for name in os.listdir(files / "mds"):
        fs.put_file(str(files / "mds" / name), f"{s3.bucket}/pinned/{name}")
    reader = MDSReader(s3.url("pinned"), storage_options=s3.options())
    reader.load_chunk(0)
    fs.copy(reader.paths[1][len("s3://"):], reader.paths[0][len("s3://"):])
    with pytest.raises(SourceChangedError, match="bytes 0"):
        reader.load_chunk(0)


# -- a bounded cache -------------------------------------------------------------------------------------
def test_a_sweep_of_three_times_the_cache_limit_gives_the_same_minibatches(s3, files, tmp_path, monkeypatch):
    size = os.path.getsize(files / "c25.cbf")
    limit = size // 3
    seen = []
    put = range_cache.RangeCache.put

    def checked_put(self, offset, data):
        put(self, offset, data)
        seen.append(range_cache.cached_bytes(tmp_path))
    monkeypatch.setattr(range_cache.RangeCache, "put", checked_put)
    expected = sweep(CBFReader(files / "c25.cbf"))
    cache = CacheDir(tmp_path, limit=limit)
    for _ in range(2):  # the second sweep evicts and fetches again
        reader = CBFReader(s3.url("c25.cbf"), storage_options=s3.options(), cache_dir=cache)
        assert sweep(reader) == expected
    assert seen and max(seen) <= limit
    assert reader._source.stats["fetches"] > 0  # evicted ranges came from the store again


def test_the_cache_limit_never_deletes_what_cannot_be_fetched_again(s3, files, tmp_path):
    """Files of the directory that are not ranges, and ranges of a version the store no longer
    serves, are left alone: a full cache then just stops caching."""
    foreign = tmp_path / "notes.txt"
    foreign.write_bytes(b"x" * 1000)
    stale = tmp_path / ("0" * 24)
    stale.mkdir()
    (stale / f"{0:016x}-{4000:x}").write_bytes(b"s" * 4000)
    cache = CacheDir(tmp_path, limit=5000)
    reader = CBFReader(s3.url("c25.cbf"), storage_options=s3.options(), cache_dir=cache)
    expected = sweep(CBFReader(files / "c25.cbf"))
    assert sweep(reader) == expected
    assert foreign.read_bytes() == b"x" * 1000
    assert (stale / f"{0:016x}-{4000:x}").stat().st_size == 4000
    assert range_cache.cached_bytes(tmp_path) <= 5000


def test_a_cache_limit_needs_a_directory_and_a_size():
    from recordkit.errors import UsageError
    with pytest.raises(UsageError, match="needs a cache directory"):
        range_cache.cache_dir_of(None, cache_limit="1GB")
    with pytest.raises(UsageError, match="cache limit"):
        CacheDir("/tmp", limit="lots")


# -- offline ---------------------------------------------------------------------------------------------
def refuse_the_store(monkeypatch):
    """From now on a filesystem refuses every call: offline reads must never get that far."""
    import fsspec.core

    def refuse(*a, **k):
        raise AssertionError("the store was asked while offline")
    monkeypatch.setattr(fsspec.core, "url_to_fs", refuse)


def warm(s3, files, proxy, tmp_path):
    reader = CBFReader(s3.url("c25.cbf"), storage_options=s3.options(proxy.port), cache_dir=tmp_path)
    expected = sweep(CBFReader(files / "c25.cbf"))
    assert sweep(reader) == expected
    return expected


def test_an_offline_sweep_from_a_complete_cache_asks_the_store_nothing(s3, files, proxy, tmp_path, monkeypatch):
    expected = warm(s3, files, proxy, tmp_path)
    refuse_the_store(monkeypatch)
    asked = proxy.count()
    offline = CBFReader(s3.url("c25.cbf"), storage_options=s3.options(proxy.port),
                        cache_dir=CacheDir(tmp_path, offline=True))
    assert sweep(offline) == expected
    assert proxy.count() == asked


def test_offline_a_range_missing_from_the_cache_is_an_error_naming_it(s3, files, proxy, tmp_path, monkeypatch):
    warm(s3, files, proxy, tmp_path)
    refuse_the_store(monkeypatch)
    reader = CBFReader(s3.url("c25.cbf"), cache_dir=CacheDir(tmp_path, offline=True))
    info = reader.chunks[3]
    [entry] = [p for p in tmp_path.glob("*/*") if p.name == f"{info.offset:016x}-{info.size:x}"]
    entry.unlink()
    with pytest.raises(OfflineMissError, match=rf"c25.cbf: bytes {info.offset}\.\.{info.offset + info.size} "
                                               rf"are not in the cache"):
        reader.load_chunk(3)
    with pytest.raises(OfflineMissError, match="never.cbf: not in the cache"):
        CBFReader(s3.url("never.cbf"), cache_dir=CacheDir(tmp_path, offline=True))


def test_cli_reads_offline_from_the_cache_and_plan_shows_the_bound(s3, files, proxy, tmp_path, monkeypatch, capsys):
    import json
    from recordkit.cli.main import main
    opts = ["--storage-options", json.dumps(s3.options(proxy.port))]
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert main(["cat", s3.url("c25.cbf"), *opts, *cache, "--cache-limit", "1GB"]) == 0
    online = capsys.readouterr().out
    assert main(["plan", s3.url("c25.cbf"), *opts, "--cache-dir", str(tmp_path / "small"), "--cache-limit", "10KB",
                 "--mb-size", "64"]) == 0
    shown = capsys.readouterr().out
    assert "limit 9.8 KiB" in shown and "is fetched again every sweep" in shown
    refuse_the_store(monkeypatch)
    assert main(["cat", s3.url("c25.cbf"), *cache, "--offline"]) == 0
    assert capsys.readouterr().out == online
    assert main(["cat", s3.url("c25.cbf"), "--offline"]) == 2
    assert "offline reading needs a cache directory" in capsys.readouterr().err


# -- partitions that share a file's bytes -------------------------------------------------------------------
def partition_reads(s3, n, **kw):
    """Every partition's keys, and the chunk bytes they fetched in all (not counting each open's
    first and last block: 64 KiB each, the whole of this small file)."""
    keys, fetched = [], 0
    for i in range(n):
        reader = CBFReader(s3.url("c25.cbf"), storage_options=s3.options())
        src = MinibatchSource(reader, randomize=True, seed=5, max_sweeps=1, max_memory=None, num_data_partitions=n,
                              partition_index=i, **kw)
        opened = reader._source.stats["bytes"]
        while (mb := src.next_minibatch(64, num_data_partitions=n, partition_index=i)) is not None:
            keys += mb.keys.tolist()
        fetched += reader._source.stats["bytes"] - opened
    return sorted(keys), fetched


def test_randomized_partitions_of_a_remote_file_fetch_it_once_in_all(s3, files):
    size = os.path.getsize(files / "c25.cbf")
    every = sorted(int(k) for c in CBFReader(files / "c25.cbf").iter_chunks() for k in c.keys)
    keys, fetched = partition_reads(s3, 2)
    assert keys == every  # every sequence once, in one partition
    assert fetched <= 1.1 * size
    keys, fetched = partition_reads(s3, 2, partition_by="samples")  # the opt-out: equal samples per sweep
    assert keys == every and fetched > 1.5 * size


def test_a_chunk_partitioned_source_refuses_another_partition(files):
    from recordkit.errors import UsageError
    src = MinibatchSource(CBFReader(files / "c25.cbf"), randomize=True, max_memory=None, num_data_partitions=2,
                          partition_index=1, partition_by="chunks")
    assert src.next_minibatch(8, num_data_partitions=2, partition_index=1) is not None
    with pytest.raises(UsageError, match="reads whole-chunk partition 1 of 2: it cannot read partition 0 of 3"):
        src.next_minibatch(8, num_data_partitions=3, partition_index=0)
    with pytest.raises(UsageError, match="partition_by must be one of"):
        MinibatchSource(CBFReader(files / "c25.cbf"), num_data_partitions=2, partition_by="rows")


def test_chunk_partitions_chosen_by_the_source_resume_exactly_and_elastically(files):
    def make(n, i):
        return MinibatchSource(CBFReader(files / "c25.cbf"), randomize=True, seed=5, max_sweeps=1, max_memory=None,
                               num_data_partitions=n, partition_index=i, partition_by="chunks")

    def rest(src, n, i):
        out = []
        while (mb := src.next_minibatch(32, num_data_partitions=n, partition_index=i)) is not None:
            out += mb.keys.tolist()
        return out
    whole = [rest(make(2, i), 2, i) for i in range(2)]
    states, taken = [], []
    for i in range(2):
        src = make(2, i)
        got = [src.next_minibatch(32, num_data_partitions=2, partition_index=i).keys.tolist() for _ in range(2)]
        taken += sum(got, [])
        states.append(src.get_checkpoint_state())
        again = make(2, i)
        again.restore_from_checkpoint(states[-1], num_data_partitions=2, partition_index=i)
        assert sum(got, []) + rest(again, 2, i) == whole[i]  # the exact resume
    later = []
    for i in range(3):  # on 3 partitions: what the 2 did not deliver, exactly once
        src = make(3, i)
        src.restore_from_checkpoint(states, num_data_partitions=3, partition_index=i)
        later += rest(src, 3, i)
    assert sorted(taken + later) == sorted(whole[0] + whole[1])


def test_a_ctf_file_and_its_checksum_sidecar_are_read_offline(s3, files, tmp_path, monkeypatch):
    from recordkit.formats.ctf import CTFReader, CTFWriter
    from recordkit.storage.sidecars import create
    with CTFWriter(tmp_path / "a.ctf", STREAMS) as w:
        for s in sequences(60):
            w.write(s)
    create(str(tmp_path / "a.ctf"))
    fs = s3.fs()
    for name in ("a.ctf", "a.ctf.rkcrc"):
        fs.put_file(str(tmp_path / name), f"{s3.bucket}/side/{name}")
    url, cache = s3.url("side/a.ctf"), tmp_path / "cache"
    online = CTFReader(url, STREAMS, storage_options=s3.options(), cache_dir=cache, cache_index=True, chunk_size=512)
    assert type(online._source).__name__ == "VerifiedSource"
    expected = sweep(online)
    refuse_the_store(monkeypatch)
    offline = CTFReader(url, STREAMS, cache_dir=CacheDir(cache, offline=True), cache_index=True, chunk_size=512)
    assert type(offline._source).__name__ == "VerifiedSource"  # the sidecar the cache recorded
    assert offline.index_from_cache and sweep(offline) == expected


def test_offline_reads_the_version_recorded_where_the_store_gives_a_time_not_an_etag(files, tmp_path):
    """memory:// reports a creation time, not an ETag; the recorded version must still find its ranges."""
    import fsspec
    fsspec.filesystem("memory").pipe("/offline/c25.cbf", (files / "c25.cbf").read_bytes())
    expected = sweep(CBFReader("memory://offline/c25.cbf", cache_dir=tmp_path))
    offline = CBFReader("memory://offline/c25.cbf", cache_dir=CacheDir(tmp_path, offline=True))
    assert sweep(offline) == expected and offline._source.stats["cache_hits"] > 0


def test_a_remote_mds_data_set_is_read_offline_with_its_index_checked_against_the_cached_shards(
        s3, files, tmp_path, monkeypatch):
    """index.json's shard list is checked against the directory (descriptions.py); offline, the
    directory is what the cache recorded of it, so the check asks the store nothing."""
    expected = sweep(MDSReader(files / "mds"))
    assert sweep(MDSReader(s3.url("mds"), storage_options=s3.options(), cache_dir=tmp_path)) == expected
    refuse_the_store(monkeypatch)
    assert sweep(MDSReader(s3.url("mds"), cache_dir=CacheDir(tmp_path, offline=True))) == expected


def test_recordkit_open_tells_a_remote_directory_offline_by_the_files_the_cache_recorded(s3, files, tmp_path,
                                                                                        monkeypatch):
    from recordkit.errors import UsageError
    expected = sweep(recordkit.open(s3.url("mds"), storage_options=s3.options(), cache_dir=tmp_path))
    refuse_the_store(monkeypatch)
    assert sweep(recordkit.open(s3.url("mds"), cache_dir=tmp_path, offline=True)) == expected
    with pytest.raises(UsageError, match="offline, the format is told from the name alone"):
        recordkit.open(s3.url("webdataset"), cache_dir=tmp_path, offline=True)


def test_offline_a_shard_the_cache_never_saw_is_a_located_error(s3, files, tmp_path, monkeypatch):
    from recordkit.errors import FormatError
    MDSReader(s3.url("mds"), storage_options=s3.options(), cache_dir=tmp_path)  # index only: no shard read
    refuse_the_store(monkeypatch)
    with pytest.raises(FormatError, match=r"shard\.0000\d\.mds is listed, but .* holds no such file"):
        MDSReader(s3.url("mds"), cache_dir=CacheDir(tmp_path, offline=True))
