"""recordkit.integrations.spark: the Python data source on a local Spark session (local[1], no UI).

Spark starts a JVM (10-20 s) once for the module; every test is one or two small jobs. The
module is skipped without PySpark 4 or without a Java runtime, and its tests carry the
``spark`` marker (``-m "not spark"`` leaves them out; ``tools/spark/run_spark_checks.sh`` runs them).
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyspark.sql.datasource")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("Spark needs a Java runtime (apt-get install openjdk-17-jre-headless)", allow_module_level=True)

import recordkit  # noqa: E402
from recordkit import FormatError, StreamSpec  # noqa: E402
from recordkit.engine.chunk import concat_chunks  # noqa: E402
from recordkit.formats.cbf import CBFReader, CBFWriter  # noqa: E402
from recordkit.formats.ctf import CTFReader  # noqa: E402

pytestmark = pytest.mark.spark

SRC = Path(recordkit.__file__).resolve().parent.parent
STREAMS = [StreamSpec("x", "dense", 2), StreamSpec("y", "sparse", 5)]
N_SEQ = 24


def ctf_text(n=N_SEQ) -> str:
    """Sequence k has k % 3 + 1 samples; x dense dim 2, y sparse dim 5 (one entry, then two per sample)."""
    lines = []
    for k in range(n):
        for t in range(k % 3 + 1):
            y = f"{k % 5}:1" if t == 0 else f"{(k + t) % 5}:{t + 1} {(k + t + 2) % 5}:0.5"
            lines.append(f"{k} |x {k} {t * 0.25} |y {y}\n")
    return "".join(lines)


@pytest.fixture(scope="module")
def spark():
    # Spark's Python workers run this interpreter and import the recordkit under test
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join([str(SRC)] + [p for p in (saved["PYTHONPATH"] or "").split(os.pathsep)
                                                             if p])
    from pyspark.sql import SparkSession
    from recordkit.integrations.spark import register
    session = (SparkSession.builder.master("local[1]").appName("recordkit-tests")
               .config("spark.ui.enabled", "false").config("spark.driver.memory", "512m")
               .config("spark.sql.shuffle.partitions", "1").config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        session.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cbf(tmp_path_factory):
    """A CBF file of three chunks, written from the CTF text."""
    d = tmp_path_factory.mktemp("spark")
    (d / "data.ctf").write_text(ctf_text())
    with CTFReader(d / "data.ctf", STREAMS) as r:
        chunks = [r.load_chunk(c.id) for c in r.chunks]
    data = concat_chunks(chunks)
    path = d / "data.cbf"
    with CBFWriter(path, STREAMS, chunk_size=200) as w:
        w.write_chunk(data)
    with CBFReader(path) as r:
        assert len(r.chunks) >= 3
    return path


def reader_chunk(path):
    with CBFReader(path) as r:
        return concat_chunks([r.load_chunk(c.id) for c in r.chunks]), len(r.chunks)


def cat(path) -> str:
    env = dict(os.environ, PYTHONPATH=str(SRC))
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "cat", str(path)], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_cbf_read_through_spark_has_a_partition_per_chunk_and_the_readers_values(spark, cbf):
    want, n_chunks = reader_chunk(cbf)
    from pyspark.sql.functions import spark_partition_id
    df = spark.read.format("recordkit").load(str(cbf))
    rows = df.withColumn("partition", spark_partition_id()).collect()  # one job, no shuffle: in file order
    assert [r.key for r in rows] == [int(k) for k in want.keys]
    assert len({r.partition for r in rows}) == n_chunks
    x, y = want.columns["x"], want.columns["y"]
    for i, row in enumerate(rows):
        a, b = int(x.seq_offsets[i]), int(x.seq_offsets[i + 1])
        assert np.array_equal(np.array(row.x, dtype=np.float32).reshape(-1, 2), x.values[a:b])
        a, b = int(y.seq_offsets[i]), int(y.seq_offsets[i + 1])
        assert len(row.y) == b - a
        for s, sample in zip(range(a, b), row.y):
            lo, hi = int(y.indptr[s]), int(y.indptr[s + 1])
            assert list(sample.indices) == y.indices[lo:hi].tolist()
            assert np.array_equal(np.array(sample.values, dtype=np.float32), y.values[lo:hi])
    # the stream declarations ride in the schema, so the DataFrame writes back without --stream
    assert df.schema["x"].metadata == {"recordkit.stream": "x=dense:2"}


def test_dataframe_written_to_cbf_is_what_recordkit_cat_reads_back(spark, cbf, tmp_path):
    out = tmp_path / "out_cbf"
    df = spark.read.format("recordkit").load(str(cbf))
    df.write.format("recordkit").mode("overwrite").option("to", "cbf").save(str(out))
    names = sorted(os.listdir(out))
    assert names and all(n.startswith("part-") and n.endswith(".cbf") for n in names)
    assert cat(out) == cat(cbf)
    assert [n for n in os.listdir(tmp_path) if n != "out_cbf"] == []  # no work directory left


def test_a_bytes_stream_goes_through_spark_as_binary_and_back_byte_for_byte(spark, tmp_path):
    """Images and text in a bytes stream: a Spark ``binary`` column each way, never a float array."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    values = [bytes([i]) * (i + 1) + b"\xff\xd8" for i in range(5)]
    src = tmp_path / "b.parquet"
    pq.write_table(pa.table({"label": pa.array([float(i) for i in range(5)], pa.float32()),
                             "blob": pa.array(values, pa.binary())}), src)
    df = spark.read.format("recordkit").load(str(src))
    assert df.schema["blob"].dataType.simpleString() == "binary"
    assert [bytes(r.blob) for r in df.orderBy("key").collect()] == values
    out = tmp_path / "out_wds"
    df.write.format("recordkit").mode("overwrite").option("to", "webdataset").save(str(out))
    lines = [json.loads(line) for line in cat(out).splitlines()]
    assert sorted(line["blob"]["base64"] for line in lines) == sorted(base64.b64encode(v).decode() for v in values)


def test_plain_dataframe_writes_with_declared_streams_and_refuses_an_existing_path(spark, tmp_path):
    from pyspark.sql.types import ArrayType, FloatType, LongType, StructField, StructType
    schema = StructType([StructField("key", LongType()), StructField("x", ArrayType(ArrayType(FloatType())))])
    df = spark.createDataFrame([(0, [[1.0, 2.0]]), (1, [[3.0, 4.0], [5.0, 6.0]])], schema)
    out = tmp_path / "plain"
    df.write.format("recordkit").mode("append").option("to", "cbf").option("streams", "x=dense:2").save(str(out))
    assert cat(out) == '{"key":0,"x":[[1.0,2.0]]}\n{"key":1,"x":[[3.0,4.0],[5.0,6.0]]}\n'
    with pytest.raises(Exception, match="exists; .mode\\('overwrite'\\) replaces it"):  # append adds no parts
        df.write.format("recordkit").mode("append").option("to", "cbf").option("streams", "x=dense:2").save(str(out))


def test_a_failed_write_leaves_neither_output_nor_work_directory(spark, tmp_path):
    from pyspark.sql.types import ArrayType, FloatType, LongType, StructField, StructType
    schema = StructType([StructField("key", LongType()), StructField("x", ArrayType(ArrayType(FloatType())))])
    df = spark.createDataFrame([(0, [[1.0, 2.0]]), (1, [[3.0, 4.0, 5.0]])], schema)  # a sample of 3, dim 2
    out = tmp_path / "bad"
    with pytest.raises(Exception, match="holds 3 values, the stream's dim is 2"):
        df.write.format("recordkit").mode("overwrite").option("to", "cbf").option("streams", "x=dense:2").save(str(out))
    assert os.listdir(tmp_path) == []


def test_keys_beyond_sparks_long_are_a_located_error():
    from recordkit.engine.chunk import ChunkData, DenseColumn
    from recordkit.integrations.spark import _columns
    spec = [StreamSpec("x", "dense", 1)]
    chunk = ChunkData(7, np.array([1, 2**63], dtype=np.uint64), np.ones(2, dtype=np.int64),
                      {"x": DenseColumn(np.zeros((2, 1), np.float32), np.array([0, 1, 2]))})
    target = _columns.arrow_schema(_columns.spark_schema(spec, "float"))
    with pytest.raises(FormatError, match=r"in\.cbf: sequence key 9223372036854775808 does not fit "
                                          r".*chunk 7, sequence 1"):
        list(_columns.batches(chunk, spec, "float", target, "in.cbf"))


def test_bad_ctf_line_fails_the_job_with_the_located_error(spark, tmp_path):
    text = ctf_text(6).splitlines(keepends=True)
    text[4] = "2 |x 2 0.2.5 |y 2:1\n"
    path = tmp_path / "bad.ctf"
    path.write_text("".join(text))
    with pytest.raises(FormatError) as local, CTFReader(path, STREAMS) as r:
        for c in r.chunks:
            r.load_chunk(c.id)
    assert f"{path}:5:" in str(local.value)
    df = spark.read.format("recordkit").option("streams", "x=dense:2,y=sparse:5").load(str(path))
    with pytest.raises(Exception) as failed:
        df.collect()
    assert str(local.value) in str(failed.value)


# -- the publication the writer's commit() runs (integrations/task_sets), without a Spark job ------------------
def test_publishing_parts_replaces_an_older_part_directory_whole(cbf, tmp_path):
    from recordkit.formats import registry
    from recordkit.integrations import task_sets
    fmt = registry.get("cbf")
    out = tmp_path / "out"
    out.mkdir()
    for i in range(3):  # an earlier, larger write
        shutil.copy(cbf, out / f"part-{i:05d}.cbf")
    work = task_sets.work_directory(str(out))
    os.makedirs(work)
    written = [task_sets.task_output(fmt, work, t) for t in (4, 9)]  # tasks 4 and 9 had rows
    for w in written:
        shutil.copy(cbf, w)
    paths = task_sets.publish(fmt, written, str(out), STREAMS, work=work)
    assert sorted(os.listdir(out)) == ["part-00000.cbf", "part-00001.cbf"]
    assert paths == [str(out / "part-00000.cbf"), str(out / "part-00001.cbf")]
    assert sorted(os.listdir(tmp_path)) == ["out"]  # the work and staging directories are gone
    assert cat(out) == cat(cbf) + "".join(line.replace(f'"key":{i}', f'"key":{i + N_SEQ}', 1) for i, line in
                                          enumerate(cat(cbf).splitlines(keepends=True)))


def test_publishing_no_task_output_writes_one_empty_data_set_and_one_file_formats_need_parts(tmp_path):
    from recordkit.errors import UsageError
    from recordkit.formats import registry
    from recordkit.integrations import task_sets
    out = tmp_path / "empty"
    task_sets.publish(registry.get("cbf"), [], str(out), STREAMS, work=task_sets.work_directory(str(out)))
    assert os.listdir(out) == ["part-00000.cbf"] and cat(out) == ""
    with pytest.raises(UsageError, match="ctf: a distributed write cannot join"):
        task_sets.check_writable(registry.get("ctf"))
