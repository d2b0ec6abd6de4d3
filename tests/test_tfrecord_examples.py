"""TFRecord files of ``tf.train.Example`` (what tf.io.TFRecordWriter and the ``tfrecord`` package
write most): streams inferred from the first records' features and checked against the rest,
bytes features refused with the ``--stream`` list that selects the others, int64 values read
only where exact; one-sample sequences written as Examples (``--tfrecord-kind``)."""
import json
import os

import numpy as np
import pytest

from bridge_corpus import cat_records, cli
from recordkit import StreamSpec
from recordkit.errors import FormatError
from recordkit.formats.tfrecord import TFRecordReader
from recordkit.formats.tfrecord.examples import INFER_RECORDS

tfr = pytest.importorskip("tfrecord")


def write(path, records):
    """``records``: [{name: (value, kind)}] through the tfrecord package's writer."""
    w = tfr.TFRecordWriter(str(path))
    for r in records:
        w.write(r)
    w.close()
    return path


def plain(i):
    return {"x": ((np.arange(4) * 0.25 + i).tolist(), "float"), "label": (i % 3, "int"), "w": (0.5 * i, "float")}


def test_examples_written_by_the_tfrecord_package_read_without_streams(tmp_path, capsys):
    path = write(tmp_path / "train.tfrecord", [plain(i) for i in range(30)])
    got = cat_records(capsys, path)
    assert [r["key"] for r in got] == list(range(30))
    for i, r in enumerate(got):
        assert r["x"] == [(np.arange(4) * 0.25 + i).tolist()]
        assert r["label"] == [[i % 3]] and r["w"] == [[0.5 * i]]


def test_inspect_prints_the_inferred_stream_list_and_stream_selects_and_renames(tmp_path, capsys):
    path = write(tmp_path / "train.tfrecord", [plain(i) for i in range(3)])
    code, out, _ = cli(capsys, "inspect", path)
    assert code == 0
    assert "--stream label=dense:1 --stream w=dense:1 --stream x=dense:4" in out
    got = cat_records(capsys, path, "--stream", "features=dense:4:x")
    assert got[2] == {"key": 2, "features": [[2.0, 2.25, 2.5, 2.75]]}


def test_a_bytes_feature_of_one_value_is_a_bytes_stream_and_of_several_refused_by_name(tmp_path, capsys):
    records = [{"image": (b"\xff\xd8\xff%d" % i, "byte"), "label": (i, "int"), "x": ([1.0, float(i)], "float")}
               for i in range(3)]
    path = write(tmp_path / "img.tfrecord", records)
    reader = TFRecordReader(str(path))
    assert {s.name: s.format for s in reader.streams} == {"image": "bytes", "label": "dense", "x": "dense"}
    assert list(reader.load_chunk(0).columns["image"].values) == [b"\xff\xd8\xff%d" % i for i in range(3)]
    got = cat_records(capsys, path, "--stream", "label=dense:1", "--stream", "x=dense:2")
    assert [r["x"] for r in got] == [[[1.0, float(i)]] for i in range(3)] and got[2]["label"] == [[2.0]]
    tags = write(tmp_path / "tags.tfrecord", [{"tags": ([b"a", b"b"], "byte"), "label": (i, "int")} for i in range(3)])
    code, out, err = cli(capsys, "cat", tags)
    assert code != 0 and out == "" and len(err.strip().splitlines()) == 1
    assert "'tags' is a bytes_list of 2 values in record 0" in err and "--stream label=dense:1" in err


@pytest.mark.parametrize("change, match", [
    (lambda r: r.pop("w"), "no feature 'w'"),
    (lambda r: r.update(x=([1.0, 2.0], "float")), "feature 'x': 2 values, expected dim 4"),
    (lambda r: r.update(label=(1.5, "float")), "feature 'label' is a float_list, expected int64_list"),
    (lambda r: r.update(extra=(1.0, "float")), "feature 'extra' is not in the first records"),
])
def test_a_record_after_the_inferring_ones_that_differs_is_a_located_error(tmp_path, change, match):
    records = [plain(i) for i in range(INFER_RECORDS + 5)]
    change(records[INFER_RECORDS + 2])
    path = write(tmp_path / "t.tfrecord", records)
    with pytest.raises(FormatError, match=match) as e:
        TFRecordReader(str(path)).load_chunk(0)
    assert e.value.record == f"record {INFER_RECORDS + 2}" and e.value.offset > 0


def test_features_that_vary_in_the_first_records_are_refused_by_name(tmp_path):
    records = [plain(i) for i in range(4)]
    records[2]["x"] = ([1.0, 2.0, 3.0], "float")
    with pytest.raises(FormatError, match="'x' has 4 values in record 0, 3 in record 2"):
        TFRecordReader(str(write(tmp_path / "t.tfrecord", records)))


def test_int64_values_are_read_where_the_float_holds_them_exactly_and_refused_elsewhere(tmp_path, capsys):
    big = 2**24 + 1
    path = write(tmp_path / "t.tfrecord", [{"id": (2**24, "int")}, {"id": (big, "int")}])
    with pytest.raises(FormatError, match=f"int64 integer {big} has no exact float32.*--precision double") as e:
        TFRecordReader(str(path)).load_chunk(0)
    assert e.value.record == "record 1"
    got = TFRecordReader(str(path), precision="double").load_chunk(0).columns["id"].values
    assert got.ravel().tolist() == [2**24, big]
    path = write(tmp_path / "u.tfrecord", [{"id": (2**53 + 1, "int")}])
    with pytest.raises(FormatError, match="has no exact float64"):
        TFRecordReader(str(path), precision="double").load_chunk(0)


def _ctf(tmp_path, text):
    p = tmp_path / "s.ctf"
    p.write_text(text)
    return p


ONE = "0 |x 1 2 3 |y 0:1.5\n1 |x 4 5 6 |y 2:2\n2 |x 7 8 9 |y\n"
STREAMS = ["--stream", "x=dense:3", "--stream", "y=sparse:4"]


def test_one_sample_sequences_are_written_as_examples_that_read_back_lossless(tmp_path, capsys):
    src = _ctf(tmp_path, ONE)
    out = tmp_path / "ex"
    assert cli(capsys, "convert", src, out, "--to", "tfrecord", *STREAMS)[0] == 0
    got = list(tfr.tfrecord_loader(str(out / "part-00000.tfrecord"), None,
                                   {"x": "float", "y.indices": "int", "y.values": "float", "key": "int"}))
    assert [g["key"].tolist() for g in got] == [[0], [1], [2]]
    assert got[1]["x"].tolist() == [4.0, 5.0, 6.0] and got[1]["y.indices"].tolist() == [2]
    assert got[2]["y.indices"].tolist() == [] and got[0]["y.values"].tolist() == [1.5]
    code, out_text, _ = cli(capsys, "verify", src, out, *STREAMS)
    assert code == 0
    part = out / "part-00000.tfrecord"  # a part alone still reads: its first record describes the streams
    assert cat_records(capsys, part) == cat_records(capsys, src, *STREAMS)


def test_sequences_stay_sequence_examples_and_the_kind_can_be_chosen(tmp_path, capsys):
    src = _ctf(tmp_path, "0 |x 1 2 3\n0 |x 4 5 6\n1 |x 7 8 9\n")
    out = tmp_path / "seq"
    assert cli(capsys, "convert", src, out, "--to", "tfrecord", "--stream", "x=dense:3")[0] == 0
    assert TFRecordReader(str(out)).kind == "sequence"
    code, _, err = cli(capsys, "convert", src, tmp_path / "ex", "--to", "tfrecord", "--stream", "x=dense:3",
                       "--tfrecord-kind", "example")
    assert code != 0 and "sequence 0: 2 samples, a tf.train.Example holds one" in err
    assert "--tfrecord-kind sequence" in err and not (tmp_path / "ex").exists()
    one = _ctf(tmp_path, ONE)
    assert cli(capsys, "convert", one, tmp_path / "s2", "--to", "tfrecord", *STREAMS, "--tfrecord-kind",
               "sequence")[0] == 0
    assert TFRecordReader(str(tmp_path / "s2")).kind == "sequence"
    assert cat_records(capsys, tmp_path / "s2") == cat_records(capsys, one, *STREAMS)


def test_sets_of_examples_and_of_sequence_examples_do_not_join(tmp_path):
    from recordkit import StreamSpec
    from recordkit.engine.chunk import ChunkData, DenseColumn
    from recordkit.errors import UsageError
    from recordkit.formats.tfrecord import TFRecordWriter
    from recordkit.formats.tfrecord.writer import join_sets
    chunk = ChunkData(0, np.arange(2, dtype=np.uint64), np.ones(2, np.int64),
                      {"x": DenseColumn(np.ones((2, 3), np.float32), np.arange(3))})
    for name, kind in (("a", "example"), ("b", "sequence"), ("c", "auto")):
        with TFRecordWriter(str(tmp_path / name), [StreamSpec("x", "dense", 3)], tfrecord_kind=kind) as w:
            w.write_chunk(chunk)
    with pytest.raises(UsageError, match="some hold tf.train.Example records, others SequenceExamples"):
        join_sets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "j"))
    join_sets([str(tmp_path / "a"), str(tmp_path / "c")], str(tmp_path / "j"))
    assert TFRecordReader(str(tmp_path / "j")).kind == "example"
    assert len(TFRecordReader(str(tmp_path / "j")).load_chunk(1)) == 2


@pytest.mark.parametrize("to", ["tfrecord", "webdataset"])
def test_records_converted_feature_by_feature_read_back_without_streams(tmp_path, capsys, to):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of")) as w:
        for i in range(3):
            w.write({"label": np.array([i], np.int32), "f": np.array([1.5, i], np.float32)})
    out = tmp_path / "out"
    assert cli(capsys, "convert", tmp_path / "of", out, "--to", to)[0] == 0
    got = cat_records(capsys, out)
    assert [(r["label"], r["f"]) for r in got] == [([[i]], [[1.5, i]]) for i in range(3)]


def test_the_column_wise_example_decoder_and_protobuf_give_the_same_chunks(tmp_path, monkeypatch):
    from recordkit.formats.tfrecord import examples, fastread
    records = [dict(plain(i), key=(1000 + i, "int")) for i in range(20)]
    path = write(tmp_path / "k.tfrecord", records)
    world = os.path.join(os.path.dirname(__file__), "data", "world", "tf_example.tfrecord")
    cases = [(path, None), (world, None), (world, [StreamSpec("label", "dense", 1), StreamSpec("v", "dense", 4, "x")])]
    fast = [TFRecordReader(p, s).load_chunk(0) for p, s in cases]
    used = []
    monkeypatch.setattr(examples.ExampleColumns, "columns_fast",
                        lambda *a: used.append(1) or (_ for _ in ()).throw(fastread.NotCanonical()))
    slow = [TFRecordReader(p, s).load_chunk(0) for p, s in cases]
    assert len(used) == 3
    for a, b in zip(fast, slow):
        assert a.keys.tolist() == b.keys.tolist() and a.lengths.tolist() == b.lengths.tolist()
        assert sorted(a.columns) == sorted(b.columns)
        for name in a.columns:
            assert a.columns[name].values.dtype == b.columns[name].values.dtype
            np.testing.assert_array_equal(a.columns[name].values, b.columns[name].values)
            np.testing.assert_array_equal(a.columns[name].seq_offsets, b.columns[name].seq_offsets)
    assert fast[0].keys.tolist() == list(range(1000, 1020))


def test_a_file_of_examples_larger_than_the_chunk_size_is_read_as_runs_and_checked_per_run(tmp_path, capsys):
    records = [plain(i) for i in range(INFER_RECORDS + 40)]
    records[INFER_RECORDS + 30]["x"] = ([1.0, 2.0], "float")  # in a late run, past the inferring records
    path = write(tmp_path / "t.tfrecord", records)
    cut = TFRecordReader(str(path), chunk_size=600)
    assert cut.inferred and len(cut.chunks) > 3
    with pytest.raises(FormatError, match="feature 'x': 2 values, expected dim 4") as e:
        for c in cut.chunks:
            cut.load_chunk(c.id)
    whole = TFRecordReader(str(path))
    with pytest.raises(FormatError) as w:
        whole.load_chunk(0)
    assert e.value.record == w.value.record == f"record {INFER_RECORDS + 30}"
    assert e.value.offset == w.value.offset > 600  # in the file, not in its run
    # a described set of Examples: runs whose keys and values are the whole file's, counts checked
    src = tmp_path / "s.ctf"
    src.write_text("".join(f"{i} |x {i} {i + 1} {i + 2} |y {i % 4}:1.5\n" for i in range(60)))
    out = tmp_path / "ex"
    assert cli(capsys, "convert", src, out, "--to", "tfrecord", *STREAMS)[0] == 0
    whole, cut = TFRecordReader(str(out)), TFRecordReader(str(out), chunk_size=500)
    assert whole.kind == cut.kind == "example" and len(whole.chunks) == 1 and len(cut.chunks) > 3
    a = whole.load_chunk(0)
    runs = [cut.load_chunk(c.id) for c in cut.chunks]
    assert np.concatenate([r.keys for r in runs]).tolist() == a.keys.tolist() == list(range(60))
    assert sum(c.num_samples for c in cut.chunks) == 60
    for name in ("x", "y"):
        np.testing.assert_array_equal(np.concatenate([r.columns[name].values for r in runs]), a.columns[name].values)
    meta = out / "__recordkit__.json"
    doc = json.loads(meta.read_text())
    doc["shards"][0]["sequences"] -= 1
    meta.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match="holds 60 records, __recordkit__.json says 59"):
        TFRecordReader(str(out), chunk_size=500)
