"""Parquet and Hugging Face datasets: written by recordkit and read by pyarrow / datasets,
written by pyarrow and read by recordkit, round trips, bad input, atomic output."""
import json
import os

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from recordkit.cli.main import main  # noqa: E402
from recordkit.errors import FormatError  # noqa: E402

STREAMS = ["--stream", "word=sparse:500:w", "--stream", "feat=dense:4:f", "--stream", "tag=sparse:12:t"]


def make_ctf(path, n=300, seed=3):
    """Id-mode sequences of 1-9 samples: sparse one-hot words, dense features, sparse tags; some
    sequences without tags (an empty stream)."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        key = 1000 + 7 * s
        for j in range(int(rng.integers(1, 10))):
            fields = [f"|w {int(rng.integers(0, 500))}:1 {int(rng.integers(0, 500))}:{rng.normal():.5g}",
                      "|f " + " ".join(f"{v:.6g}" for v in rng.normal(size=4))]
            if s % 5:
                fields.append(f"|t {int(rng.integers(0, 12))}:1")
            lines.append(f"{key} " + " ".join(fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def cat(capsys, path, *extra):
    capsys.readouterr()
    assert main(["cat", str(path), *extra]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def convert(capsys, *args):
    code = main(["convert", *map(str, args)])
    out, err = capsys.readouterr()
    return code, err


def assert_rows_equal_cat(rows, records, dtype=np.float32):
    """pyarrow/datasets rows (python lists) equal `recordkit cat` records, value for value."""
    assert len(rows) == len(records)
    for row, rec in zip(rows, records):
        assert row["key"] == rec["key"]
        for name in ("word", "feat", "tag"):
            if name == "feat":
                got = np.asarray(row[name], dtype=dtype).reshape(-1, 4)
                want = np.asarray(rec[name], dtype=dtype).reshape(-1, 4)
                assert np.array_equal(got, want), (rec["key"], name)
            else:
                assert len(row[name]) == len(rec[name])
                for a, b in zip(row[name], rec[name]):
                    assert a["indices"] == b["indices"]
                    assert np.array_equal(np.asarray(a["values"], dtype), np.asarray(b["values"], dtype))


@pytest.fixture()
def corpus(tmp_path):
    return make_ctf(tmp_path / "s.ctf")


def test_parquet_output_read_by_pyarrow_equals_cat_value_for_value(tmp_path, capsys, corpus):
    out = tmp_path / "s.parquet"
    code, err = convert(capsys, corpus, out, *STREAMS)
    assert code == 0, err
    table = pq.read_table(out)
    assert table.schema.field("feat").type == pa.list_(pa.list_(pa.float32(), 4))
    assert table.schema.field("word").type == pa.list_(pa.struct([("indices", pa.list_(pa.int32())),
                                                                  ("values", pa.list_(pa.float32()))]))
    assert table.schema.field("key").type == pa.uint64()
    declared = json.loads(table.schema.metadata[b"recordkit.streams"])
    assert [(d["name"], d["alias"], d["format"], d["dim"], d["precision"]) for d in declared] == [
        ("word", "w", "sparse", 500, "float"), ("feat", "f", "dense", 4, "float"), ("tag", "t", "sparse", 12, "float")]
    records = cat(capsys, corpus, *STREAMS)
    assert_rows_equal_cat(table.to_pylist(), records)
    assert cat(capsys, out) == records  # and recordkit reads it back without --stream


def test_hf_output_read_by_datasets_load_from_disk_equals_cat(tmp_path, capsys, corpus):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "hf"
    code, err = convert(capsys, corpus, out, "--to", "hf", "--parts", "3", *STREAMS)
    assert code == 0, err
    ds = datasets.load_from_disk(str(out))
    assert ds.num_rows == 300 and len(os.listdir(out)) == 5  # 3 data files, state.json, dataset_info.json
    records = cat(capsys, corpus, *STREAMS)
    assert_rows_equal_cat(ds.to_list(), records)
    assert cat(capsys, out) == records


def test_float64_stays_float64(tmp_path, capsys):
    src = tmp_path / "d.ctf"
    src.write_text("0 |x 0.1 1e-300 3\n1 |x 2.5 -7 0.30000000000000004\n")
    out = tmp_path / "d.parquet"
    assert convert(capsys, src, out, "--stream", "x=dense:3", "--precision", "double")[0] == 0
    table = pq.read_table(out)
    assert table.schema.field("x").type == pa.list_(pa.list_(pa.float64(), 3))
    assert table.column("x").to_pylist() == [[[0.1, 1e-300, 3.0]], [[2.5, -7.0, 0.30000000000000004]]]
    back = tmp_path / "back.ctf"
    assert convert(capsys, out, back)[0] == 0
    ref = tmp_path / "ref.ctf"
    assert convert(capsys, src, ref, "--stream", "x=dense:3", "--precision", "double")[0] == 0
    assert back.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("target,extra", [("parquet", []), ("parquet", ["--parts", "4"]), ("hf", []),
                                          ("hf", ["--parts", "2"]), ("parquet", ["--shard-size", "2K"]),
                                          ("hf", ["--shard-size", "2K"])])
def test_round_trip_ctf_to_x_to_ctf_equals_ctf_to_ctf(tmp_path, capsys, corpus, target, extra):
    mid = tmp_path / ("mid.parquet" if target == "parquet" else "mid")
    assert convert(capsys, corpus, mid, "--to", target, *extra, *STREAMS)[0] == 0
    back, ref = tmp_path / "back.ctf", tmp_path / "ref.ctf"
    code, err = convert(capsys, mid, back)  # no --stream: the declarations travel with the data
    assert code == 0, err
    assert convert(capsys, corpus, ref, *STREAMS)[0] == 0
    assert back.read_bytes() == ref.read_bytes()


@pytest.mark.parametrize("target", ["parquet", "hf"])
def test_shard_size_counts_bytes_of_data_as_for_the_shard_formats(tmp_path, capsys, corpus, target):
    """``--shard-size`` is bytes for every directory format: a new part after that much data."""
    from recordkit.formats.sharding import sequence_bytes
    from recordkit.formats.ctf import CTFReader
    from recordkit.engine.streams import StreamSpec
    reader = CTFReader(str(corpus), [StreamSpec.parse(t) for t in STREAMS[1::2]])
    sizes = np.concatenate([sequence_bytes(c, reader.streams, 4) for c in reader.iter_chunks()])
    total, biggest = int(sizes.sum()), int(sizes.max())
    out = tmp_path / "sharded"
    assert convert(capsys, corpus, out, "--to", target, "--shard-size", "2K", *STREAMS)[0] == 0
    files = [n for n in os.listdir(out) if n.endswith((".parquet", ".arrow"))]
    # each part closes after the sequence that reaches 2 KiB: 2 KiB to 2 KiB + one sequence each
    assert total // (2048 + biggest) <= len(files) <= total // 2048 + 1, (len(files), total, biggest)


def test_parts_are_consecutive_runs_in_part_order(tmp_path, capsys, corpus):
    out = tmp_path / "parts"
    assert convert(capsys, corpus, out, "--to", "parquet", "--parts", "4", *STREAMS)[0] == 0
    names = sorted(os.listdir(out))
    assert names == [f"part-{i:05d}.parquet" for i in range(4)]
    keys = [pq.read_table(out / n).column("key").to_pylist() for n in names]
    assert [len(k) for k in keys] == [75, 75, 75, 75]
    assert sum(keys, []) == [1000 + 7 * s for s in range(300)]
    # pyarrow reads the directory as one data set too
    assert pq.read_table(out).num_rows == 300


def test_pyarrow_written_file_without_metadata_needs_streams_then_reads(tmp_path, capsys):
    t = pa.table({"key": pa.array([5, 9], pa.int64()),
                  "img": pa.array([[[1.0, 2.0]], [[3.0, 4.0], [5.0, 6.0]]], pa.list_(pa.list_(pa.float32(), 2))),
                  "lab": pa.array([[{"indices": [1], "values": [1.0]}], []],
                                  pa.list_(pa.struct([("indices", pa.list_(pa.int32())),
                                                      ("values", pa.list_(pa.float32()))])))})
    path = tmp_path / "foreign.parquet"
    pq.write_table(t, path, row_group_size=1)
    code = main(["cat", str(path)])
    err = capsys.readouterr().err
    assert code == 1 and "foreign.parquet" in err and "column 'lab'" in err and "--stream lab=sparse:DIM" in err
    assert "--stream img=dense:2" in err  # the other columns, as read with no --stream
    recs = cat(capsys, path, "--stream", "image=dense:2:img", "--stream", "label=sparse:3:lab")
    assert recs == [{"key": 5, "image": [[1, 2]], "label": [{"indices": [1], "values": [1]}]},
                    {"key": 9, "image": [[3, 4], [5, 6]], "label": []}]


def test_pyarrow_written_variable_lists_and_float64_read_through_minibatch_source(tmp_path):
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.parquet import ParquetDeserializer
    from recordkit import StreamSpec
    rows = [[[float(i), float(i) + 0.5]] * (i % 3 + 1) for i in range(50)]
    pq.write_table(pa.table({"x": pa.array(rows, pa.list_(pa.list_(pa.float64())))}), tmp_path / "v.parquet",
                   row_group_size=7)
    with ParquetDeserializer(tmp_path / "v.parquet", [StreamSpec("x", "dense", 2)]) as r:
        assert len(r.chunks) == 8 and r.streams[0].dtype == np.float64
        with MinibatchSource(r, randomize=True, seed=1, max_sweeps=1) as src:
            got = {}
            for mb in src.minibatches(10):
                for j, key in enumerate(mb.keys):
                    got[int(key)] = mb["x"].data[j][mb["x"].mask[j].astype(bool)]
    assert sorted(got) == list(range(50))  # keys: ordinals when there is no key column
    for i in range(50):
        assert np.array_equal(got[i], np.asarray(rows[i]))


def test_minibatches_from_parquet_equal_those_from_ctf(tmp_path, capsys, corpus):
    from recordkit.engine.source import MinibatchSource
    from recordkit.compose.convert import open_reader
    out = tmp_path / "s.parquet"
    assert convert(capsys, corpus, out, *STREAMS, "--chunk-size", "4096")[0] == 0
    ctf = open_reader(str(corpus), streams=STREAMS[1::2], chunk_size=4096)
    par = open_reader(str(out))
    assert [c.num_sequences for c in par.chunks] == [c.num_sequences for c in ctf.chunks]
    assert [c.num_samples for c in par.chunks] == [c.num_samples for c in ctf.chunks]
    with ctf, par:
        a = MinibatchSource(ctf, randomize=True, window=3, seed=5, max_sweeps=2)
        b = MinibatchSource(par, randomize=True, window=3, seed=5, max_sweeps=2)
        for ma, mb in zip(a.minibatches(64), b.minibatches(64)):
            assert list(ma.keys) == list(mb.keys)
            assert np.array_equal(ma["feat"].data, mb["feat"].data)
            assert (ma["word"].csr != mb["word"].csr).nnz == 0


def test_truncated_parquet_file_is_a_located_error(tmp_path, capsys, corpus):
    out = tmp_path / "s.parquet"
    assert convert(capsys, corpus, out, *STREAMS)[0] == 0
    data = out.read_bytes()
    out.write_bytes(data[:len(data) // 2])
    code = main(["cat", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and f"{out}:" in err and "truncated" in err


def test_wrong_column_type_is_a_located_error(tmp_path):
    from recordkit import StreamSpec
    from recordkit.formats.parquet import ParquetDeserializer
    pq.write_table(pa.table({"x": pa.array(["a", "b"])}), tmp_path / "w.parquet")
    with pytest.raises(FormatError, match=r"w\.parquet.*column 'x'.*is string: expected numbers"):
        ParquetDeserializer(tmp_path / "w.parquet", [StreamSpec("x", "dense", 2)])
    pq.write_table(pa.table({"x": pa.array([[[1.0, 2.0, 3.0]]], pa.list_(pa.list_(pa.float32(), 3)))}),
                   tmp_path / "d.parquet")
    with pytest.raises(FormatError, match=r"d\.parquet.*fixed_size_list<float>\[2\]"):
        ParquetDeserializer(tmp_path / "d.parquet", [StreamSpec("x", "dense", 2)])
    with pytest.raises(FormatError, match="no column 'y'"):
        ParquetDeserializer(tmp_path / "d.parquet", [StreamSpec("y", "dense", 3)])


def test_nulls_short_samples_and_bad_sparse_indices_are_located_errors(tmp_path):
    from recordkit import StreamSpec
    from recordkit.formats.parquet import ParquetDeserializer
    from recordkit.formats.parquet import reader as parquet_reader
    rows = [[[1.0, 2.0]]] * 20000 + [None]  # the null in the row group's third read batch
    pq.write_table(pa.table({"x": pa.array(rows, pa.list_(pa.list_(pa.float32())))}), tmp_path / "n.parquet")
    assert 2 * parquet_reader.READ_BATCH < 20000
    with ParquetDeserializer(tmp_path / "n.parquet", [StreamSpec("x", "dense", 2)]) as r:
        with pytest.raises(FormatError, match=r"n\.parquet.*null.*row 20000 of row group 0"):
            r.load_chunk(0)
    pq.write_table(pa.table({"x": pa.array([[[1.0, 2.0], [3.0]]], pa.list_(pa.list_(pa.float32())))}),
                   tmp_path / "s.parquet")
    with ParquetDeserializer(tmp_path / "s.parquet", [StreamSpec("x", "dense", 2)]) as r:
        with pytest.raises(FormatError, match="sample 1 holds 1 values"):
            r.load_chunk(0)
    sp_type = pa.list_(pa.struct([("indices", pa.list_(pa.int32())), ("values", pa.list_(pa.float32()))]))
    pq.write_table(pa.table({"y": pa.array([[{"indices": [3, 12], "values": [1.0, 2.0]}]], sp_type)}),
                   tmp_path / "i.parquet")
    with ParquetDeserializer(tmp_path / "i.parquet", [StreamSpec("y", "sparse", 10)]) as r:
        with pytest.raises(FormatError, match=r"sparse index 12 outside \[0, 10\)"):
            r.load_chunk(0)


def test_schema_metadata_that_is_not_a_declaration_list_is_a_located_error(tmp_path):
    from recordkit.formats.parquet import ParquetDeserializer
    t = pa.table({"x": pa.array([[[1.0]]], pa.list_(pa.list_(pa.float32(), 1)))})
    pq.write_table(t.replace_schema_metadata({b"recordkit.streams": b"{not json"}), tmp_path / "m.parquet")
    with pytest.raises(FormatError, match=r"m\.parquet.*recordkit\.streams"):
        ParquetDeserializer(tmp_path / "m.parquet")


def test_hf_directory_with_a_missing_data_file_or_truncated_stream(tmp_path, capsys, corpus):
    out = tmp_path / "hf"
    assert convert(capsys, corpus, out, "--to", "hf", "--parts", "2", *STREAMS)[0] == 0
    data = out / "data-00001-of-00002.arrow"
    blob = data.read_bytes()
    data.write_bytes(blob[:len(blob) - 100])
    code = main(["cat", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "data-00001-of-00002.arrow" in err and "truncated" in err
    data.unlink()
    code = main(["cat", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "data-00001-of-00002.arrow" in err and "missing" in err


def test_directory_output_is_replaced_whole_and_a_failed_write_leaves_the_old(tmp_path, capsys, corpus):
    from recordkit.formats.parquet import ParquetWriter
    from recordkit.compose.convert import open_reader
    out = tmp_path / "parts"
    assert convert(capsys, corpus, out, "--to", "parquet", "--parts", "5", *STREAMS)[0] == 0
    assert convert(capsys, corpus, out, "--to", "parquet", "--parts", "2", *STREAMS)[0] == 0
    assert sorted(os.listdir(out)) == ["part-00000.parquet", "part-00001.parquet"]
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    reader = open_reader(str(corpus), streams=STREAMS[1::2])
    with pytest.raises(RuntimeError, match="boom"):
        with ParquetWriter(out, reader.streams, parts=3, total_sequences=300) as w:
            w.write_chunk(reader.load_chunk(0))
            raise RuntimeError("boom")
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    assert [n for n in os.listdir(tmp_path) if n.startswith(".parts.")] == []  # no staging left behind
    with pytest.raises(RuntimeError, match="boom"):
        with ParquetWriter(tmp_path / "one.parquet", reader.streams) as w:
            w.write_chunk(reader.load_chunk(0))
            raise RuntimeError("boom")
    assert not (tmp_path / "one.parquet").exists()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".part")] == []


def test_checksums_on_request_are_verified_on_read(tmp_path, capsys, corpus):
    out = tmp_path / "s.parquet"
    assert convert(capsys, corpus, out, *STREAMS, "--checksum")[0] == 0
    assert (tmp_path / "s.parquet.rkcrc").exists()
    records = cat(capsys, out)
    data = bytearray(out.read_bytes())
    data[100] ^= 0xFF
    out.write_bytes(bytes(data))
    code = main(["cat", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "checksum mismatch" in err and len(records) == 300
    hf = tmp_path / "hf"
    assert convert(capsys, corpus, hf, "--to", "hf", *STREAMS, "--checksum")[0] == 0
    assert (hf / "data-00000-of-00001.arrow.rkcrc").exists()
    assert cat(capsys, hf) == records


def test_library_convert_returns_what_it_did(tmp_path, corpus):
    import recordkit
    result = recordkit.convert(str(corpus), tmp_path / "lib.parquet", streams=STREAMS[1::2])
    assert result.to == "parquet" and result.sequences == 300 and result.input_bytes == corpus.stat().st_size
    assert result.estimate is not None and result.estimate.densified == []
    result = recordkit.convert(str(tmp_path / "lib.parquet"), tmp_path / "lib.cbf")
    assert result.to == "cbf" and result.sequences == 300


def test_selection_renames_and_precision_converts(tmp_path, capsys, corpus):
    out = tmp_path / "s.parquet"
    assert convert(capsys, corpus, out, *STREAMS)[0] == 0
    recs = cat(capsys, out, "--stream", "F=dense:4:feat", "--precision", "double")
    assert list(recs[0]) == ["key", "F"] and len(recs) == 300
    code = main(["cat", str(out), "--stream", "F=dense:5:feat"])
    assert code == 2 and "dense dim 4" in capsys.readouterr().err


def test_inspect_shows_files_streams_and_row_groups(tmp_path, capsys, corpus):
    out = tmp_path / "parts"
    assert convert(capsys, corpus, out, "--to", "parquet", "--parts", "2", *STREAMS, "--chunk-size", "8192")[0] == 0
    assert main(["inspect", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["format"] == "parquet" and len(info["files"]) == 2 and info["sequences"] == 300
    assert [s["name"] for s in info["streams"]] == ["word", "feat", "tag"]
    assert sum(c["samples"] for c in info["chunks"]) == sum(len(r["feat"]) for r in cat(capsys, corpus, *STREAMS))
    assert all(c["bytes"] > 0 for c in info["chunks"])


KILL_CHILD = r'''
import sys, time
import numpy as np
from recordkit import StreamSpec
from recordkit.engine.chunk import ChunkData, DenseColumn
from recordkit.formats.parquet import ParquetWriter
target, gen, n, pause, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
kw = dict(parts=3, total_sequences=n) if parts == "parts" else {}
w = ParquetWriter(target, [StreamSpec("x", "dense", 3)], **kw)
print("ready", flush=True)
for i in range(n):
    w.write_chunk(ChunkData(i, np.array([i], np.uint64), np.array([1]),
                            {"x": DenseColumn(np.full((1, 3), gen * 1000 + i, np.float32), np.array([0, 1]))}))
    time.sleep(pause)
w.close()
print("done", flush=True)
'''


@pytest.mark.parametrize("layout", ["file", "parts"])
def test_killed_parquet_writer_leaves_old_or_new_content(tmp_path, layout):
    import hashlib
    import random
    import signal
    import subprocess
    import sys as _sys
    child = tmp_path / "child.py"
    child.write_text(KILL_CHILD)
    target = tmp_path / ("out.parquet" if layout == "file" else "out")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(__import__("recordkit").__file__))] + os.environ.get("PYTHONPATH", "").split(
            os.pathsep)))

    def snapshot():
        if target.is_dir():
            return {n: hashlib.sha256((target / n).read_bytes()).hexdigest() for n in sorted(os.listdir(target))}
        return hashlib.sha256(target.read_bytes()).hexdigest() if target.exists() else None

    def generation(gen, n, pause=0.0, kill_after=None):
        p = subprocess.Popen([_sys.executable, str(child), str(target), str(gen), str(n), str(pause), layout],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert p.stdout.readline() == "ready\n", p.stderr.read()
        if kill_after is not None:
            time.sleep(kill_after)
            p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
        p.stdout.close()
        p.stderr.close()
        return p.returncode

    import time
    assert generation(0, 10) == 0
    old = snapshot()
    assert generation(1, 30) == 0
    new = snapshot()
    rng = random.Random(5)
    for trial in range(4):
        assert generation(0, 10) == 0
        generation(1, 30, pause=0.005, kill_after=rng.uniform(0, 0.3))
        assert snapshot() in (old, new), trial
    # the next writer removes what a killed one left beside the target
    assert generation(1, 30) == 0
    assert [n for n in os.listdir(tmp_path) if n.startswith(".out")] == []


def test_a_dataset_saved_by_datasets_itself_reads_with_declared_streams(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({
        "emb": datasets.Sequence(datasets.Sequence(datasets.Value("float32"), length=2)),
        "tags": [{"indices": datasets.Sequence(datasets.Value("int32")),
                  "values": datasets.Sequence(datasets.Value("float32"))}]})
    ds = datasets.Dataset.from_dict({"emb": [[[1, 2], [3, 4]], [[5, 6]]],
                                     "tags": [[{"indices": [4], "values": [1.0]}], []]}, features=feats)
    ds.save_to_disk(str(tmp_path / "theirs"), num_shards=2)
    code = main(["cat", str(tmp_path / "theirs")])
    err = capsys.readouterr().err  # a sparse column's dim is not in the data: it must be declared
    assert code == 1 and "--stream tags=sparse:DIM" in err and "select them: --stream emb=dense:2" in err
    recs = cat(capsys, tmp_path / "theirs", "--stream", "emb=dense:2", "--stream", "tags=sparse:8")
    assert recs == [{"key": 0, "emb": [[1, 2], [3, 4]], "tags": [{"indices": [4], "values": [1]}]},
                    {"key": 1, "emb": [[5, 6]], "tags": []}]
