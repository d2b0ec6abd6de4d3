"""recordkit.integrations.ray: datasources, datasinks, `convert --engine ray` and the training recipe,
on a real local Ray cluster (2 CPUs, started once for the module)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")

import recordkit  # noqa: E402
from recordkit import FormatError, StreamSpec  # noqa: E402
from recordkit.cli.main import main  # noqa: E402
from recordkit.engine.chunk import concat_chunks  # noqa: E402
from recordkit.errors import UsageError  # noqa: E402
from recordkit.formats.cbf import CBFReader, CBFWriter  # noqa: E402
from recordkit.formats.ctf import CTFReader  # noqa: E402
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer  # noqa: E402
from recordkit.formats.singa.deserializer import SingaRecordDeserializer  # noqa: E402
from recordkit.formats.singa import records as singa_records  # noqa: E402
from recordkit.formats.singa.store import open as open_store  # noqa: E402
from recordkit.integrations import ray as rk  # noqa: E402

HERE = Path(__file__).resolve().parent
SRC = Path(recordkit.__file__).resolve().parent.parent
STREAMS = [StreamSpec("x", "dense", 2, "x"), StreamSpec("y", "sparse", 5, "y")]
STREAM_ARGS = ["--stream", "x=dense:2:x", "--stream", "y=sparse:5:y"]
N_SEQ = 60


def write_ctf(path, n=N_SEQ):
    """Sequence k has k % 3 + 1 samples (so blocks mix lengths); x dense dim 2, y sparse dim 5 with
    one entry in a sequence's first sample and two in the others."""
    lines = []
    for k in range(n):
        for t in range(k % 3 + 1):
            y = f"{k % 5}:1" if t == 0 else f"{(k + t) % 5}:{t + 1} {(k + t + 2) % 5}:0.5"
            lines.append(f"{k * 10} |x {k} {t} |y {y}\n")
    path.write_text("".join(lines))
    return path


def worker_env() -> dict:
    """The environment tasks, CLI subprocesses and the example run in: this tree's recordkit first."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@pytest.fixture(scope="module")
def cluster():
    # workers inherit the driver's environment: make them import the recordkit under test
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = worker_env()["PYTHONPATH"]
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    from ray.data import DataContext
    ctx = DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.execution_options.preserve_order = True
    try:
        yield ray
    finally:
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_ctf(tmp_path_factory.mktemp("ray") / "data.ctf")


def blocks_of(ds):
    """Each block of a dataset, in order, as an Arrow table."""
    return list(ds.iter_batches(batch_size=None, batch_format="pyarrow"))


def assert_chunks_equal(got, want):
    assert np.array_equal(got.keys, want.keys)
    assert np.array_equal(got.lengths, want.lengths)
    for name, w in want.columns.items():
        g = got.columns[name]
        assert np.array_equal(g.seq_offsets, w.seq_offsets), name
        assert g.values.dtype == w.values.dtype, name
        assert np.array_equal(g.values, w.values), name
        if w.is_sparse:
            assert np.array_equal(g.indices, w.indices) and np.array_equal(g.indptr, w.indptr), name


def all_chunks(reader):
    with reader:
        return concat_chunks([reader.load_chunk(c.id) for c in reader.chunks])


def chunks_via_ray(ds, streams):
    return concat_chunks([rk.arrow_to_chunk(t, streams) for t in blocks_of(ds)])


# -- the example first: it starts its own cluster, better before the module's is up ------------------

def test_example_feeds_two_workers_through_streaming_split(tmp_path):
    out = subprocess.run([sys.executable, str(HERE.parent / "examples" / "ray_training_workers.py"),
                          "--workdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=180, env=worker_env())
    assert out.returncode == 0, out.stderr[-3000:]
    lines = [line for line in out.stdout.splitlines() if line.startswith("worker ")]
    assert len(lines) == 2, out.stdout
    seen = [int(line.split(" sequences")[0].rsplit(" ", 1)[1]) for line in lines]
    assert sum(seen) == 2000 and min(seen) > 0, out.stdout  # demo corpus: every sequence, split between them
    assert "all 2000 sequences seen once" in out.stdout


# -- the column layout (no cluster needed) ---------------------------------------------------------------

def test_chunk_to_arrow_round_trips_and_so_does_a_numpy_batch(data):
    from ray.data.block import BlockAccessor
    with CTFReader(data, STREAMS, precision="double") as reader:
        chunk = concat_chunks([reader.load_chunk(c.id) for c in reader.chunks])
    table = rk.chunk_to_arrow(chunk, STREAMS)
    assert table.column_names == ["key", "x", "y.indices", "y.values", "y.nnz"]
    assert_chunks_equal(rk.arrow_to_chunk(table, STREAMS), chunk)
    assert_chunks_equal(rk.arrow_to_chunk(table.slice(7, 20), STREAMS), chunk.take(range(7, 27)))
    numpy_batch = BlockAccessor.for_block(table).to_batch_format("numpy")  # what a map_batches fn returns
    assert_chunks_equal(rk.arrow_to_chunk(numpy_batch, STREAMS), chunk)
    same_length = chunk.take([0, 3, 6])  # all one sample: a fixed-shape tensor column
    assert_chunks_equal(rk.arrow_to_chunk(rk.chunk_to_arrow(same_length, STREAMS), STREAMS), same_length)


# -- reading ---------------------------------------------------------------------------------------------

def test_tasks_import_the_recordkit_under_test(cluster):
    where = ray.get(ray.remote(lambda: __import__("recordkit").__file__).remote())
    assert Path(where).resolve() == Path(recordkit.__file__).resolve()


def test_ctf_blocks_follow_chunk_boundaries(cluster, data):
    reader = CTFReader(data, STREAMS, chunk_size=200)
    n = len(reader.chunks)
    assert n >= 4
    source = rk.ctf_datasource(data, STREAMS, chunk_size=200)
    assert source.num_chunks == n and len(source.get_read_tasks(200)) == n
    ds = rk.read_ctf(data, STREAMS, chunk_size=200).materialize()
    assert ds.num_blocks() == n
    for i, table in enumerate(blocks_of(ds)):  # block i is chunk i, value for value
        assert_chunks_equal(rk.arrow_to_chunk(table, STREAMS), reader.load_chunk(i))


def test_fewer_read_tasks_cut_blocks_only_at_chunk_boundaries(cluster, data):
    source = rk.ctf_datasource(data, STREAMS, chunk_size=200)
    assert len(source.get_read_tasks(2)) == 2
    reader = CTFReader(data, STREAMS, chunk_size=200)
    firsts = {int(reader.sequence_keys(c.id)[0]) for c in reader.chunks}
    lasts = {int(reader.sequence_keys(c.id)[-1]) for c in reader.chunks}
    # a task yields a block per chunk; Ray may join a task's small blocks, never cut inside a chunk
    blocks = blocks_of(rk.read_ctf(data, STREAMS, chunk_size=200, num_read_tasks=2))
    assert 2 <= len(blocks) <= source.num_chunks
    for table in blocks:
        keys = table["key"].to_pylist()
        assert keys[0] in firsts and keys[-1] in lasts


def test_ctf_columns_hold_sequences_as_tensors_and_sparse_lists(cluster, data):
    rows = rk.read_ctf(data, STREAMS, precision="double").take(3)
    assert [r["key"] for r in rows] == [0, 10, 20]
    assert rows[2]["x"].shape == (3, 2) and rows[2]["x"].dtype == np.float64  # 3 samples of dim 2
    assert np.array_equal(rows[2]["x"], [[2, 0], [2, 1], [2, 2]])
    assert list(rows[2]["y.nnz"]) == [1, 2, 2]  # one count per sample
    assert list(rows[2]["y.indices"]) == [2, 3, 0, 4, 1] and list(rows[2]["y.values"]) == [1, 2, 0.5, 3, 0.5]


def test_cbf_values_and_continuing_keys_match_the_reader(cluster, data, tmp_path):
    files = []
    for part, (lo, hi) in enumerate([(0, 25), (25, 60)]):
        path = tmp_path / f"part-{part}.cbf"
        with CTFReader(data, STREAMS) as reader, CBFWriter(path, STREAMS, chunk_size=300) as writer:
            writer.write_chunk(concat_chunks([reader.load_chunk(c.id) for c in reader.chunks]).take(range(lo, hi)))
        files.append(path)
    chunks = sum(len(CBFReader(f).chunks) for f in files)
    ds = rk.read_cbf(tmp_path)  # the directory: parts in order, keys numbered on across them
    assert ds.materialize().num_blocks() == chunks > 2
    got = chunks_via_ray(ds, CBFReader(files[0]).streams)
    want = concat_chunks([all_chunks(CBFReader(f)) for f in files])
    want.keys = np.arange(N_SEQ, dtype=np.uint64)
    assert_chunks_equal(got, want)


def test_ofrecord_values_match_the_deserializer(cluster, data, tmp_path, capsys):
    out = tmp_path / "of"
    assert main(["convert", str(data), str(out), "--to", "ofrecord", "--parts", "2", *STREAM_ARGS]) == 0
    want_reader = OFRecordDeserializer(out, STREAMS, records_per_chunk=8)
    ds = rk.read_ofrecord(out, STREAMS, records_per_chunk=8)
    assert ds.materialize().num_blocks() == len(want_reader.chunks) == 8  # 2 parts of 30 records
    assert_chunks_equal(chunks_via_ray(ds, STREAMS), all_chunks(want_reader))


def test_singa_store_values_match_the_deserializer(cluster, tmp_path):
    path = tmp_path / "train.kv"
    rng = np.random.default_rng(3)
    with open_store(str(path), "create", "kvfile") as store:
        for i in range(23):
            store.write(b"%05d" % (i * 2), singa_records.encode_record(shape=(4,), label=i % 3,
                                                                       data=rng.normal(size=4).astype(np.float32)))
    want = SingaRecordDeserializer(path, tuples_per_chunk=5)
    ds = rk.read_singa(path, tuples_per_chunk=5)
    assert ds.materialize().num_blocks() == len(want.chunks) == 5
    assert_chunks_equal(chunks_via_ray(ds, want.streams), all_chunks(want))


# -- errors ------------------------------------------------------------------------------------------------

def test_missing_input_names_the_file(cluster, tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ctf"):
        rk.read_ctf(tmp_path / "nope.ctf", STREAMS)


def test_unknown_cbf_stream_is_a_usage_error_naming_the_file(cluster, data, tmp_path):
    path = tmp_path / "a.cbf"
    with CTFReader(data, STREAMS) as reader, CBFWriter(path, STREAMS) as writer:
        for c in reader.chunks:
            writer.write_chunk(reader.load_chunk(c.id))
    with pytest.raises(UsageError, match=r"a\.cbf: no stream 'nope'"):
        rk.read_cbf(path, ["z=dense:3:nope"])


def test_read_cbf_refuses_a_directory_that_is_not_one_data_set(tmp_path):
    from recordkit.errors import NotADataSetError
    for name in ("train.cbf", "test.cbf"):
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(NotADataSetError, match="holds 2 entries: test.cbf, train.cbf"):
        rk.read_cbf(tmp_path)


def test_bad_data_found_in_a_task_reaches_the_driver_as_format_error(cluster, tmp_path):
    path = tmp_path / "bad.ctf"
    path.write_text("0 |x 1 2 |y 1:1\n1 |x 3 4 |y 9:1\n")  # index 9 >= dim 5, found by the parse in the task
    with pytest.raises(FormatError) as info:
        rk.read_ctf(path, STREAMS).materialize()
    assert info.value.path == str(path) and info.value.line == 2


# -- writing -------------------------------------------------------------------------------------------------

def test_cbf_datasink_writes_one_part_per_task_and_removes_stale_parts(cluster, data, tmp_path):
    out = tmp_path / "cbf"
    out.mkdir()
    (out / "part-00099.cbf").write_bytes(b"old")
    (out / "notes.txt").write_text("kept")
    sink = rk.CBFDatasink(out, STREAMS)
    rk.read_ctf(data, STREAMS, chunk_size=400, num_read_tasks=3).write_datasink(sink)
    assert sorted(os.listdir(out)) == ["notes.txt", "part-00000.cbf", "part-00001.cbf", "part-00002.cbf"]
    assert sink.sequences_written == N_SEQ and len(sink.paths) == 3
    assert_chunks_equal(chunks_via_ray(rk.read_cbf(out), STREAMS), _ordinal(all_chunks(CTFReader(data, STREAMS))))


def failing_on(key):
    """A map_batches function that fails on the block holding ``key`` (a closure: the workers cannot
    import this test module, so it must be pickled by value)."""
    def fail(batch):
        if key in set(batch["key"].to_pylist()):
            raise RuntimeError(f"injected failure at key {key}")
        return batch
    return fail


def test_datasink_leaves_no_partial_part_when_a_task_fails(cluster, data, tmp_path):
    out = tmp_path / "cbf"

    class FailingAfterWriting(rk.CBFDatasink):
        """Writes each chunk to the part being built, then fails: the data is on disk when it does."""
        def _write_chunk(self, writer, chunk):
            super()._write_chunk(writer, chunk)
            writer._io.finish()  # the CBF writer encodes and writes on a background thread: let it finish
            raise RuntimeError(f"injected failure; on disk: {sorted(os.listdir(self.directory))}")

    with pytest.raises(Exception, match=r"injected failure; on disk: \['\.part-00000\.cbf\.\w+\.part'\]"):
        rk.read_ctf(data, STREAMS, num_read_tasks=1).write_datasink(FailingAfterWriting(out, STREAMS, chunk_size=64))
    assert os.listdir(out) == []  # neither a part under its final name nor the temporary file


def test_ofrecord_datasink_failure_keeps_complete_parts_only(cluster, data, tmp_path):
    out = tmp_path / "of"
    reader = CTFReader(data, STREAMS, chunk_size=200)
    bad = int(reader.sequence_keys(1)[0])
    ds = rk.read_ctf(data, STREAMS, chunk_size=200).map_batches(
        failing_on(bad), batch_size=None, batch_format="pyarrow")
    with pytest.raises(Exception, match="injected failure"):
        ds.write_datasink(rk.OFRecordDatasink(out, STREAMS))
    names = sorted(os.listdir(out)) if out.exists() else []
    assert "part-00001" not in names and not [n for n in names if n.startswith(".")]
    for name in names:  # whatever other tasks finished is complete and readable
        OFRecordDeserializer(out / name, STREAMS).load_chunk(0)


# -- convert --engine ray ----------------------------------------------------------------------------------

def _ordinal(chunk):
    chunk.keys = np.arange(len(chunk), dtype=np.uint64)
    return chunk


def test_ray_conversion_ctf_to_cbf_reads_back_as_the_local_one(cluster, data, tmp_path, capsys):
    local, parts = tmp_path / "local.cbf", tmp_path / "parts"
    assert main(["convert", str(data), str(local), *STREAM_ARGS, "--chunk-size", "200"]) == 0
    assert main(["convert", str(data), str(parts), "--engine", "ray", "--to", "cbf", *STREAM_ARGS,
                 "--chunk-size", "200"]) == 0
    assert "Ray" in capsys.readouterr().err
    names = sorted(os.listdir(parts))
    assert len(names) == len(CTFReader(data, STREAMS, chunk_size=200).chunks) and names[0] == "part-00000.cbf"
    want = all_chunks(CBFReader(local))
    assert_chunks_equal(_ordinal(concat_chunks([all_chunks(CBFReader(parts / n)) for n in names])), _ordinal(want))
    assert_chunks_equal(chunks_via_ray(rk.read_cbf(parts), STREAMS), want)


def test_ray_conversion_ctf_to_ofrecord_reads_back_as_the_local_one(cluster, data, tmp_path, capsys):
    local, parts = tmp_path / "local", tmp_path / "parts"
    assert main(["convert", str(data), str(local), "--to", "ofrecord", *STREAM_ARGS]) == 0
    assert main(["convert", str(data), str(parts), "--engine", "ray", "--to", "ofrecord", "--parts", "2",
                 *STREAM_ARGS, "--chunk-size", "200"]) == 0
    assert sorted(os.listdir(parts)) == ["part-00000", "part-00001"]
    assert_chunks_equal(all_chunks(OFRecordDeserializer(parts, STREAMS)),
                        all_chunks(OFRecordDeserializer(local, STREAMS)))


def test_ray_cbf_part_directory_is_one_data_set_for_the_commands(cluster, data, tmp_path, capsys):
    """`recordkit cat OUT.cbf` after `convert --engine ray OUT.cbf` reads the part directory as one
    data set (not "no 'part-N' part files")."""
    local, parts = tmp_path / "local.cbf", tmp_path / "out.cbf"
    assert main(["convert", str(data), str(local), *STREAM_ARGS]) == 0
    assert main(["convert", str(data), str(parts), "--engine", "ray", *STREAM_ARGS, "--chunk-size", "200"]) == 0
    assert len(os.listdir(parts)) > 1
    capsys.readouterr()
    assert main(["cat", str(local)]) == 0
    want = capsys.readouterr().out
    assert main(["cat", str(parts)]) == 0
    assert capsys.readouterr().out == want


def test_ray_conversion_to_parquet_reads_back_as_the_local_one(cluster, data, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    local, parts = tmp_path / "local.parquet", tmp_path / "parts"
    assert main(["convert", str(data), str(local), *STREAM_ARGS]) == 0
    assert main(["convert", str(data), str(parts), "--engine", "ray", "--to", "parquet", *STREAM_ARGS,
                 "--chunk-size", "200"]) == 0
    assert all(n.startswith("part-") and n.endswith(".parquet") for n in os.listdir(parts))
    assert pq.read_table(parts).schema.metadata[b"recordkit.streams"]
    capsys.readouterr()
    assert main(["cat", str(local)]) == 0
    want = capsys.readouterr().out
    assert main(["cat", str(parts)]) == 0
    assert capsys.readouterr().out == want


def _read_by_its_library(fmt, out):
    """(keys, samples of stream x per sequence) as the format's own library reads the data set."""
    if fmt == "webdataset":
        wds = pytest.importorskip("webdataset")
        urls = sorted(str(out / n) for n in os.listdir(out) if n.endswith(".tar"))
        got = list(wds.WebDataset(urls, shardshuffle=False).decode())
        return [int(s["__key__"]) for s in got], [s["x.npy"].tolist() for s in got]
    if fmt == "tfrecord":
        from recordkit.formats.tfrecord import framing
        keys, xs = [], []
        for n in sorted(os.listdir(out)):
            if not n.endswith(".tfrecord"):
                continue
            tfr = pytest.importorskip("tfrecord")  # the tfrecord package's reader
            recs = list(tfr.reader.sequence_loader(str(out / n), None, {"key": "int"}, {"x": "float"}))
            assert len(recs) == len(framing.scan((out / n).read_bytes(), n)[0])  # CRCs checked too
            for ctx, seq in recs:
                keys.append(int(ctx["key"][0]))
                xs.append(np.asarray(seq["x"]).reshape(-1, 2).tolist())
        return keys, xs
    if fmt == "mds":  # MosaicML's layout decoded by the MDS tests' reader (streaming itself: tools/bridge)
        import hashlib
        import json
        from test_mds import decode_shard
        rows = []
        for info in json.loads((out / "index.json").read_text())["shards"]:
            shard = out / info["raw_data"]["basename"]
            assert shard.stat().st_size == info["raw_data"]["bytes"]
            for algo, digest in info["raw_data"].get("hashes", {}).items():
                assert hashlib.new(algo, shard.read_bytes()).hexdigest() == digest
            rows += decode_shard(shard, info)
        return [int(r["key"]) for r in rows], [np.asarray(r["x"]).tolist() for r in rows]
    datasets = pytest.importorskip("datasets")
    ds = datasets.load_from_disk(str(out))
    return [int(k) for k in ds["key"]], [[list(map(float, v)) for v in x] for x in ds["x"]]


@pytest.mark.parametrize("fmt", ["webdataset", "tfrecord", "mds", "hf"])
def test_ray_conversion_to_a_data_set_format_is_the_local_one_joined(cluster, data, tmp_path, capsys, fmt):
    """`--engine ray --to webdataset|tfrecord|mds|hf`: a set per write task, joined
    in task order into one data set that reads back as the local conversion (recordkit cat) and as
    the format's own library reads it; no work directories are left."""
    local, out = tmp_path / "local", tmp_path / "out"
    assert main(["convert", str(data), str(local), "--to", fmt, *STREAM_ARGS]) == 0
    assert main(["convert", str(data), str(out), "--engine", "ray", "--to", fmt, "--parts", "3", *STREAM_ARGS,
                 "--chunk-size", "200"]) == 0
    assert "Ray" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["local", "out"]  # the tasks' work directory is gone
    assert main(["cat", str(local)]) == 0
    want = capsys.readouterr().out
    assert main(["cat", str(out)]) == 0
    assert capsys.readouterr().out == want
    keys, xs = _read_by_its_library(fmt, out)
    assert keys == [k * 10 for k in range(N_SEQ)]
    assert xs == [[[float(k), float(t)] for t in range(k % 3 + 1)] for k in range(N_SEQ)]
    names = sorted(os.listdir(out))
    data_files = [n for n in names if n not in ("__recordkit__.json", "index.json", "state.json",
                                                "dataset_info.json")]
    assert len(data_files) >= 2  # several tasks' sets were joined
    assert main(["validate", str(out)]) == 0


def test_ray_data_set_with_checksums_has_the_local_conversions_files(cluster, data, tmp_path, capsys):
    local, out = tmp_path / "local", tmp_path / "out"
    args = ["--to", "tfrecord", "--parts", "2", "--checksum", *STREAM_ARGS]
    assert main(["convert", str(data), str(local), *args]) == 0
    assert main(["convert", str(data), str(out), "--engine", "ray", "--chunk-size", "200", *args]) == 0
    assert sorted(os.listdir(out)) == sorted(os.listdir(local))
    from recordkit.storage import checksum
    for name in os.listdir(out):  # every moved sidecar describes the file now under its name
        if not name.endswith(".rkcrc"):
            side = checksum.ChecksumTable.from_bytes((out / (name + ".rkcrc")).read_bytes(), name)
            np.testing.assert_array_equal(side.crcs, checksum.compute_local(str(out / name)).crcs)


def test_a_failed_ray_write_leaves_neither_output_nor_work_directories(cluster, tmp_path, capsys):
    bad = tmp_path / "bad.ctf"
    bad.write_text("".join(f"{k} |x {k} 0 |y 1:1\n" for k in range(50)) + "50 |x 1 2 |y 9:1\n")
    assert main(["convert", str(bad), str(tmp_path / "out"), "--engine", "ray", "--to", "mds", *STREAM_ARGS,
                 "--chunk-size", "200"]) == 1
    assert f"{bad}:51:" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["bad.ctf"]


def test_ray_conversion_of_cbf_input(cluster, data, tmp_path, capsys):
    cbf, parts = tmp_path / "in.cbf", tmp_path / "parts"
    assert main(["convert", str(data), str(cbf), *STREAM_ARGS, "--output-chunk-size", "300"]) == 0
    assert main(["convert", str(cbf), str(parts), "--engine", "ray", "--to", "ofrecord"]) == 0
    assert_chunks_equal(all_chunks(OFRecordDeserializer(parts, STREAMS)), all_chunks(CBFReader(cbf)))


def test_ray_conversion_reports_bad_input_with_its_location(cluster, tmp_path, capsys):
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 |y 1:1\n1 |x 3 4 |y 9:1\n")
    assert main(["convert", str(bad), str(tmp_path / "out"), "--engine", "ray", "--to", "cbf", *STREAM_ARGS]) == 1
    assert f"recordkit: error: {bad}:2:" in capsys.readouterr().err


def test_ray_conversion_failure_prints_the_located_error_without_rays_logs(cluster, tmp_path):
    """A bad line under --engine ray: the one located error on stderr, not Ray Data's progress and
    task tracebacks, the workers' forwarded output or its retry advice (a process of its own,
    joining the module's cluster, as a user's command would start one)."""
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 |y 1:1\n1 |x 3 4 |y 9:1\n")
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", str(bad), str(tmp_path / "out"),
                          "--engine", "ray", "--to", "cbf", *STREAM_ARGS,
                          "--ray-address", ray.get_runtime_context().gcs_address],
                         capture_output=True, text=True, timeout=180, env=worker_env())
    assert out.returncode == 1, out.stderr[-3000:]
    assert f"recordkit: error: {bad}:2:13: sparse index 9 in input 'y' is out of range" in out.stderr
    assert "Traceback" not in out.stderr and "Failed to apply" not in out.stderr, out.stderr[-3000:]
    assert len(out.stderr.splitlines()) < 5, out.stderr[-3000:]


def test_ray_engine_refuses_outputs_it_cannot_write(cluster, data, tmp_path, capsys):
    assert main(["convert", str(data), str(tmp_path / "out.ctf"), "--engine", "ray", *STREAM_ARGS]) == 2
    assert "cbf, ofrecord or parquet parts, or a webdataset, tfrecord, mds, hf data set" in capsys.readouterr().err


def test_ray_engine_without_ray_says_how_to_install_it(data, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    assert main(["convert", str(data), str(tmp_path / "out"), "--engine", "ray", "--to", "cbf", *STREAM_ARGS]) == 2
    assert "pip install 'recordkit[ray]'" in capsys.readouterr().err


# -- feeding training workers ----------------------------------------------------------------------------------

def test_minibatches_from_ray_pack_like_the_engine(cluster, data):
    mbs = list(rk.minibatches_from_ray(rk.read_ctf(data, STREAMS, chunk_size=200), STREAMS, batch_size=16))
    assert [mb.num_sequences for mb in mbs] == [16, 16, 16, 12] and mbs[-1].end_of_sweep
    seqs = list(CTFReader(data, STREAMS))
    i = 0
    for mb in mbs:
        x, y = mb["x"], mb["y"]
        for s in range(mb.num_sequences):
            want = seqs[i]
            n = len(want["x"])
            assert int(mb.keys[s]) == want.key and x.lengths[s] == n
            assert np.array_equal(x.data[s, :n], want["x"]) and not x.mask[s, n:].any()
            rows = y.csr[y.seq_offsets[s]:y.seq_offsets[s + 1]]
            assert (rows != want["y"]).nnz == 0
            i += 1
    assert i == N_SEQ


def test_streaming_split_gives_each_worker_a_disjoint_share(cluster, data):
    ds = rk.read_ctf(data, STREAMS, chunk_size=200)

    @ray.remote(num_cpus=0)
    class Worker:
        def keys(self, it):
            from recordkit.integrations.ray import minibatches_from_ray
            return [int(k) for mb in minibatches_from_ray(it, STREAMS, batch_size=8) for k in mb.keys]

    workers = [Worker.remote() for _ in range(2)]
    its = ds.streaming_split(2)
    got = ray.get([w.keys.remote(it) for w, it in zip(workers, its)])
    assert all(got) and sorted(got[0] + got[1]) == [k * 10 for k in range(N_SEQ)]


def test_ray_conversion_from_and_to_s3_reads_back_as_the_local_one(cluster, data, tmp_path, capsys):
    """The remote-storage path end to end: CTF on a local S3 server -> CBF parts on S3, via Ray tasks."""
    import json
    sys.path.insert(0, str(HERE))
    from s3_server import S3
    s3 = S3(bucket="ray-test")  # moto servers in one process share their buckets: a bucket of its own
    try:
        fs = s3.fs()
        fs.put_file(str(data), f"{s3.bucket}/in/data.ctf")
        opts = json.dumps(s3.options())
        assert main(["convert", s3.url("in/data.ctf"), s3.url("out"), "--engine", "ray", "--to", "cbf",
                     *STREAM_ARGS, "--chunk-size", "200", "--storage-options", opts, "--checksum"]) == 0
        capsys.readouterr()
        names = sorted(p.rsplit("/", 1)[-1] for p in fs.ls(f"{s3.bucket}/out", detail=False))
        parts = [n for n in names if n.endswith(".cbf")]
        assert len(parts) == len(CTFReader(data, STREAMS, chunk_size=200).chunks)
        assert names == sorted(parts + [p + ".rkcrc" for p in parts])
        got = concat_chunks([all_chunks(CBFReader(s3.url(f"out/{n}"), storage_options=s3.options()))
                             for n in parts])
        local = tmp_path / "local.cbf"
        assert main(["convert", str(data), str(local), *STREAM_ARGS]) == 0
        assert_chunks_equal(_ordinal(got), _ordinal(all_chunks(CBFReader(local))))
    finally:
        s3.stop()


def test_a_row_whose_nnz_falls_back_is_refused_not_read_as_another_samples_entries():
    import pyarrow as pa
    ni, nv, nn = rk.sparse_columns("x")
    table = pa.table({ni: pa.array([[1, 2, 3, 4]], pa.large_list(pa.int32())),
                      nv: pa.array([[1.0, 2.0, 3.0, 4.0]], pa.large_list(pa.float32())),
                      nn: pa.array([[4, -4, 4]], pa.large_list(pa.int64()))})  # adds up to 4, through 0
    with pytest.raises(UsageError, match="none negative"):
        rk.arrow_to_chunk(table, [StreamSpec("x", "sparse", 10)])
