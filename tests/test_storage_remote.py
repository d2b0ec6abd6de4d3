"""fsspec URLs everywhere: reads by byte range, a local cache, retried drops, writers and the CLI on S3.

The S3 tests run against a real S3-compatible server on localhost (moto's server mode);
the dropped-connection tests put ``FaultyProxy`` between the client and that server.
"""
from __future__ import annotations

import os

import fsspec
import numpy as np
import pytest
import scipy.sparse as sp

from helpers import dense, sparse
from s3_server import S3, FaultyProxy
from recordkit import FormatError
from recordkit.cli.main import main
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader, CTFWriter
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
from recordkit.formats.ofrecord.reader import OFRecordReader
from recordkit.formats.ofrecord.writer import OFRecordWriter
from recordkit.storage import open_source
from recordkit.storage.retry import RemoteReadError, RetryPolicy
from recordkit.storage.source import RemoteSource
from recordkit.storage.versions import SourceChangedError

STREAMS = [dense("x", 8), sparse("y", 100)]


def sequences(n=400, seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.normal(size=(int(rng.integers(1, 4)), 8)).astype(np.float32),
             "y": sp.random(1, 100, density=0.05, random_state=k, dtype=np.float32, format="csr")}
            for k in range(n)]


def comparable(reader):
    return [(int(s.key), {k: (v.toarray() if hasattr(v, "toarray") else v).tolist() for k, v in s.data.items()})
            for s in reader]


def rows(chunk):
    return comparable(chunk.sequence(i) for i in range(len(chunk)))


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def local_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("local")
    seqs = sequences()
    with CBFWriter(d / "a.cbf", STREAMS, chunk_size=2048) as w:
        for s in seqs:
            w.write(s)
    with CTFWriter(d / "a.ctf", STREAMS) as w:
        for s in seqs:
            w.write(s)
    with OFRecordWriter(d / "of", 3) as w:
        for i in range(300):
            w.write({"v": np.arange(i % 7 + 1, dtype=np.float32), "key": np.array([i], np.int64)})
    return d


@pytest.fixture(scope="module")
def uploaded(s3, local_files):
    fs = s3.fs()
    for name in ("a.cbf", "a.ctf"):
        fs.put_file(str(local_files / name), f"{s3.bucket}/{name}")
    for name in os.listdir(local_files / "of"):
        if name.startswith("part-"):
            fs.put_file(str(local_files / "of" / name), f"{s3.bucket}/of/{name}")
    return local_files


# -- reading -------------------------------------------------------------------------------------------------
def test_cbf_ctf_and_ofrecord_read_from_s3_equal_the_local_files(s3, uploaded):
    opts = s3.options()
    assert comparable(CBFReader(s3.url("a.cbf"), storage_options=opts)) == comparable(CBFReader(uploaded / "a.cbf"))
    assert comparable(CTFReader(s3.url("a.ctf"), STREAMS, storage_options=opts, chunk_size=4096)) == \
        comparable(CTFReader(uploaded / "a.ctf", STREAMS, chunk_size=4096))
    remote = OFRecordReader(s3.url("of"), batch_size=1, epochs=1, storage_options=opts)
    local = OFRecordReader(uploaded / "of", batch_size=1, epochs=1)
    assert [r[0]["v"].value.tolist() for r in remote] == [r[0]["v"].value.tolist() for r in local]
    deser = OFRecordDeserializer(s3.url("of"), [dense("v", 1)], storage_options=opts, records_per_chunk=50)
    assert len(deser.chunks) == 6
    assert deser.load_chunk(5).keys.tolist() == list(range(152, 300, 3))  # part 2, records 50..99 (round robin)


def test_a_remote_chunk_is_one_ranged_read_of_exactly_its_bytes(s3, uploaded):
    r = CBFReader(s3.url("a.cbf"), storage_options=s3.options())
    src = r._source
    opened = dict(src.stats)
    info = r.chunks[2]
    r.load_chunk(2)
    assert src.stats["fetches"] - opened["fetches"] == 1
    assert src.stats["bytes"] - opened["bytes"] == info.size
    assert src.size > 10 * info.size  # and not the whole file
    assert r.load_chunk(2).keys.tolist() == CBFReader(uploaded / "a.cbf").load_chunk(2).keys.tolist()


def test_cache_dir_serves_chunks_and_the_ctf_index_on_the_next_open(s3, uploaded, tmp_path):
    opts = s3.options()
    first = CTFReader(s3.url("a.ctf"), STREAMS, storage_options=opts, cache_dir=tmp_path, cache_index=True,
                      chunk_size=4096)
    expected = comparable(first)
    assert not first.index_from_cache
    again = CTFReader(s3.url("a.ctf"), STREAMS, storage_options=opts, cache_dir=tmp_path, cache_index=True,
                      chunk_size=4096)
    assert again.index_from_cache
    assert comparable(again) == expected
    assert again._source.stats["fetches"] == 0 and again._source.stats["cache_hits"] >= len(again.chunks)
    cbf = CBFReader(s3.url("a.cbf"), storage_options=opts, cache_dir=tmp_path)
    comparable(cbf)
    cbf2 = CBFReader(s3.url("a.cbf"), storage_options=opts, cache_dir=tmp_path)
    before = cbf2._source.stats["fetches"]
    assert comparable(cbf2) == comparable(CBFReader(uploaded / "a.cbf"))
    assert cbf2._source.stats["fetches"] == before  # every chunk came from the cache


def test_a_changed_object_never_mixes_with_its_cached_ranges(s3, local_files, tmp_path):
    opts = s3.options()
    fs = s3.fs()
    url = s3.url("changing.cbf")
    fs.put_file(str(local_files / "a.cbf"), url)
    comparable(CBFReader(url, storage_options=opts, cache_dir=tmp_path))
    with CBFWriter(tmp_path / "b.cbf", STREAMS) as w:
        for s in sequences(30, seed=9):
            w.write(s)
    fs.put_file(str(tmp_path / "b.cbf"), url)
    assert comparable(CBFReader(url, storage_options=opts, cache_dir=tmp_path)) == \
        comparable(CBFReader(tmp_path / "b.cbf"))


# -- one version per sweep ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_versions(tmp_path_factory):
    """Two CBF files of the same size and layout, differing only in their values (x negated):
    a reader mixing them sees plausible data and no length problem."""
    d = tmp_path_factory.mktemp("versions")
    seqs = sequences(200, seed=4)
    for name, sign in (("A.cbf", 1), ("B.cbf", -1)):
        with CBFWriter(d / name, STREAMS, chunk_size=2048) as w:
            for s in seqs:
                w.write({"x": sign * s["x"], "y": s["y"]})
    a, b = (d / "A.cbf").read_bytes(), (d / "B.cbf").read_bytes()
    assert len(a) == len(b) and a != b
    return d


def test_an_object_replaced_mid_sweep_is_an_error_naming_both_etags(s3, two_versions, tmp_path):
    fs = s3.fs()
    url = s3.url("replaced/data.cbf")
    fs.put_file(str(two_versions / "A.cbf"), url)
    etag_a = fs.info(url)["ETag"]
    r = CBFReader(url, storage_options=s3.options(), cache_dir=tmp_path)
    assert len(r.chunks) > 3
    r.load_chunk(0)
    fs.put_file(str(two_versions / "B.cbf"), url)
    etag_b = fs.info(url)["ETag"]
    assert etag_a != etag_b
    with pytest.raises(SourceChangedError) as e:
        r.load_chunk(1)
    assert isinstance(e.value, RemoteReadError)
    assert url in str(e.value) and etag_a in str(e.value) and etag_b in str(e.value)
    # the cache holds no byte of B under A's key ...
    a_bytes = (two_versions / "A.cbf").read_bytes()
    cache = r._source._cache.directory
    for entry in os.listdir(cache):
        offset, n = (int(x, 16) for x in entry.split("-"))
        with open(os.path.join(cache, entry), "rb") as f:
            assert f.read() == a_bytes[offset:offset + n]
    # ... so with A back, a sweep through the same cache is A's, all of it
    fs.put_file(str(two_versions / "A.cbf"), url)
    again = CBFReader(url, storage_options=s3.options(), cache_dir=tmp_path)
    assert comparable(again) == comparable(CBFReader(two_versions / "A.cbf"))


def test_a_version_aware_filesystem_finishes_the_sweep_on_the_version_it_opened(s3, two_versions):
    import boto3
    import s3fs
    client = boto3.client("s3", endpoint_url=s3.endpoint(), region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    client.create_bucket(Bucket="versioned")
    client.put_bucket_versioning(Bucket="versioned", VersioningConfiguration={"Status": "Enabled"})
    opts = dict(s3.options(), version_aware=True)
    fs = s3fs.S3FileSystem(**opts)
    url = "s3://versioned/data.cbf"
    fs.put_file(str(two_versions / "A.cbf"), url)
    r = CBFReader(url, storage_options=opts)
    got = [r.load_chunk(0)]
    fs.put_file(str(two_versions / "B.cbf"), url)
    got += [r.load_chunk(k) for k in range(1, len(r.chunks))]
    assert [rows(c) for c in got] == [rows(c) for c in CBFReader(two_versions / "A.cbf").iter_chunks()]


# -- dropped connections ---------------------------------------------------------------------------------------
def only_recordkit_retries(monkeypatch, opts):
    """s3fs and botocore retry some failures themselves; switch that off so the test sees recordkit's."""
    import s3fs
    monkeypatch.setattr(s3fs.S3FileSystem, "retries", 1)
    return dict(opts, config_kwargs={"retries": {"max_attempts": 1}})


def test_dropped_connections_mid_chunk_are_retried_without_loss_or_duplication(s3, uploaded, monkeypatch):
    proxy = FaultyProxy(s3.port, drops=4, drop_after=1200)
    try:
        opts = only_recordkit_retries(monkeypatch, s3.options(proxy.port))
        r = CBFReader(s3.url("a.cbf"), storage_options=opts)
        got = comparable(r)
        assert r._source.stats["retries"] == 4
        assert got == comparable(CBFReader(uploaded / "a.cbf"))
        keys = [k for k, _ in got]
        assert keys == sorted(set(keys))  # nothing twice
        assert proxy.dropped == 4  # the faults did happen
        ctf = comparable(CTFReader(s3.url("a.ctf"), STREAMS, storage_options=opts, chunk_size=4096))
        assert ctf == comparable(CTFReader(uploaded / "a.ctf", STREAMS, chunk_size=4096))
    finally:
        proxy.close()


def test_a_connection_that_keeps_dropping_is_an_error_naming_the_url_and_range(s3, uploaded, monkeypatch):
    monkeypatch.setenv("RECORDKIT_RETRIES", "2")
    proxy = FaultyProxy(s3.port, drops=10 ** 6, drop_after=100)
    try:
        opts = only_recordkit_retries(monkeypatch, s3.options(proxy.port))
        r = CBFReader(s3.url("a.cbf"), storage_options=s3.options())  # opened directly, then read through the proxy
        import s3fs
        r._source.fs = s3fs.S3FileSystem(**opts)
        with pytest.raises(RemoteReadError) as e:
            r.load_chunk(1)
        info = r.chunks[1]
        assert f"{s3.url('a.cbf')}: bytes {info.offset}..{info.offset + info.size}" in str(e.value)
    finally:
        proxy.close()


class Flaky:
    """fsspec's memory filesystem, failing the first ``fail`` range reads in turn: an exception,
    then a short body (what a cut connection looks like when no exception is raised)."""

    def __init__(self, fs, fail):
        self.fs, self.fail, self.calls = fs, fail, 0

    def __getattr__(self, name):
        return getattr(self.fs, name)

    def cat_file(self, path, start=None, end=None):
        self.calls += 1
        data = self.fs.cat_file(path, start=start, end=end)
        if self.calls <= self.fail:
            if self.calls % 2:
                raise ConnectionResetError("connection reset by peer")
            return data[: len(data) // 2]
        return data


def test_retry_policy_covers_exceptions_and_short_bodies():
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/flaky/blob", bytes(range(256)) * 100)
    src = RemoteSource("memory://flaky/blob", retry=RetryPolicy(attempts=5, backoff=0.001))
    src.fs = Flaky(src.fs, fail=4)
    assert src.pread(1000, 5000) == (bytes(range(256)) * 100)[1000:6000]
    assert src.stats["retries"] == 4 and src.stats["fetches"] == 1
    src.fs.fail, src.fs.calls = 10, 0
    with pytest.raises(RemoteReadError, match=r"memory://flaky/blob: bytes 0..10: failed after 5 attempt"):
        src.pread(0, 10)


def test_missing_remote_object_is_not_retried():
    with pytest.raises(FileNotFoundError):
        open_source("memory://nowhere/at-all.cbf", retry=RetryPolicy(attempts=50, backoff=10))


def test_retries_env_var_must_be_a_number(monkeypatch):
    monkeypatch.setenv("RECORDKIT_RETRIES", "many")
    with pytest.raises(Exception, match="RECORDKIT_RETRIES"):
        RetryPolicy.default()


# -- writing ------------------------------------------------------------------------------------------------------
def test_writers_publish_to_s3_atomically_and_read_back(s3, tmp_path):
    opts = s3.options()
    fs = s3.fs()
    seqs = sequences(120, seed=3)
    with CBFWriter(s3.url("out/w.cbf"), STREAMS, chunk_size=2048, storage_options=opts, checksums=True) as w:
        for s in seqs:
            w.write(s)
    with CTFWriter(s3.url("out/w.ctf"), STREAMS, storage_options=opts) as w:
        for s in seqs:
            w.write(s)
    with OFRecordWriter(s3.url("out/of"), 2, storage_options=opts) as w:
        for i in range(20):
            w.write({"v": np.full(3, i, np.float32)})
    names = sorted(p.rsplit("/", 1)[-1] for p in fs.find(f"{s3.bucket}/out"))
    assert names == ["part-00000", "part-00001", "w.cbf", "w.cbf.rkcrc", "w.ctf"]
    cbf = comparable(CBFReader(s3.url("out/w.cbf"), storage_options=opts))
    assert cbf == comparable(CTFReader(s3.url("out/w.ctf"), STREAMS, storage_options=opts))
    assert len(cbf) == 120
    assert len(list(OFRecordReader(s3.url("out/of"), batch_size=1, epochs=1, storage_options=opts))) == 20
    # an aborted writer leaves nothing behind under the name (nor a .part)
    with pytest.raises(RuntimeError):
        with CBFWriter(s3.url("out/aborted.cbf"), STREAMS, storage_options=opts) as w:
            w.write(seqs[0])
            raise RuntimeError("interrupted")
    assert not fs.exists(f"{s3.bucket}/out/aborted.cbf")
    assert not [p for p in fs.find(s3.bucket) if p.endswith(".part")]


def test_a_checksum_sidecar_on_s3_is_verified(s3, tmp_path):
    opts = s3.options()
    fs = s3.fs()
    with CBFWriter(s3.url("sum/w.cbf"), STREAMS, storage_options=opts, checksums=True) as w:
        for s in sequences(50):
            w.write(s)
    data = bytearray(fs.cat_file(f"{s3.bucket}/sum/w.cbf"))
    data[100] ^= 1
    fs.pipe_file(f"{s3.bucket}/sum/w.cbf", bytes(data))
    with pytest.raises(FormatError, match="changed after the index was written|checksum mismatch"):
        comparable(CBFReader(s3.url("sum/w.cbf"), storage_options=opts))


def test_cli_convert_cat_and_checksum_on_s3(s3, uploaded, capsys, tmp_path):
    import json
    opts = json.dumps(s3.options())
    assert main(["convert", s3.url("a.ctf"), s3.url("cli/a.cbf"), "--stream", "x=dense:8", "--stream",
                 "y=sparse:100", "--storage-options", opts, "--checksum"]) == 0
    capsys.readouterr()
    assert main(["checksum", "verify", s3.url("cli/a.cbf"), "--storage-options", opts]) == 0
    assert ": ok (" in capsys.readouterr().out
    assert main(["cat", s3.url("cli/a.cbf"), "--storage-options", opts, "--cache-dir", str(tmp_path)]) == 0
    remote_lines = capsys.readouterr().out.splitlines()
    assert main(["cat", str(uploaded / "a.cbf")]) == 0
    assert remote_lines == capsys.readouterr().out.splitlines()
    assert len(remote_lines) == 400
    # an OFRecord directory on S3 to a CBF file on S3: the feature's values become samples of dim 1
    assert main(["convert", s3.url("of"), s3.url("cli/of.cbf"), "--stream", "v=dense:1",
                 "--storage-options", opts]) == 0
    back = CBFReader(s3.url("cli/of.cbf"), storage_options=s3.options())
    assert back.num_sequences == 300 and sum(c.num_samples for c in back.chunks) == sum(i % 7 + 1 for i in range(300))


def test_cli_inspect_validate_and_reshard_on_s3(s3, uploaded, capsys):
    import json
    opts = json.dumps(s3.options())
    for name, fmt in (("a.cbf", "cbf"), ("a.ctf", "ctf")):
        assert main(["inspect", s3.url(name), "--json", "--storage-options", opts]) == 0
        remote = json.loads(capsys.readouterr().out)
        assert main(["inspect", str(uploaded / name), "--json"]) == 0
        local = json.loads(capsys.readouterr().out)
        assert remote["format"] == fmt and remote["chunks"] == local["chunks"]
    assert main(["validate", s3.url("of"), "--storage-options", opts]) == 0
    assert "300 records checked, 0 problem(s)" in capsys.readouterr().err
    assert main(["reshard", s3.url("of"), s3.url("resharded"), "--parts", "2", "--storage-options", opts]) == 0
    capsys.readouterr()
    back = OFRecordReader(s3.url("resharded"), batch_size=1, epochs=1, storage_options=s3.options())
    assert len(back.paths) == 2 and sorted(int(r[0]["key"].value[0]) for r in back) == list(range(300))


def test_a_sidecar_lookup_refused_with_403_means_no_sidecar(monkeypatch):
    """Buckets readable but not listable answer 403 for a missing key: the file must still open."""
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/public/blob.bin", b"x" * 100)
    real = type(fs).cat_file

    def refuse_sidecars(self, path, *a, **kw):
        if str(path).endswith(".rkcrc"):
            raise PermissionError("Access Denied")
        return real(self, path, *a, **kw)

    monkeypatch.setattr(type(fs), "cat_file", refuse_sidecars)
    src = open_source("memory://public/blob.bin")
    assert src.pread(10, 5) == b"xxxxx" and not hasattr(src, "table")
