"""Lance data sets: written by recordkit and read by `lance`, written by `lance` and read by recordkit
(with no --stream where the column types tell the streams), a CTF -> Lance -> CBF round trip proved
by verify, random access by Lance's take, and located errors."""
import json
import os

import numpy as np
import pytest

os.environ.setdefault("LANCE_LOG", "error")  # as recordkit sets it: no warning of a new data set
lance = pytest.importorskip("lance", reason="the Lance format needs pylance: pip install 'recordkit[lance]'")
pa = pytest.importorskip("pyarrow")

from recordkit.errors import FormatError  # noqa: E402
from recordkit.formats.detect import sniff_format  # noqa: E402
from bridge_corpus import cat_records, cli as run  # noqa: E402

STREAMS = ["--stream", "word=sparse:50:w", "--stream", "feat=dense:3:f"]


def make_ctf(path, n=40, seed=5):
    """Id-mode sequences of 1-4 samples: sparse words, dense features (some sequences without words)."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        for _ in range(int(rng.integers(1, 5))):
            fields = ["|f " + " ".join(repr(float(v)) for v in rng.normal(size=3).astype(np.float32))]
            if s % 4:
                fields.append(f"|w {int(rng.integers(0, 50))}:{float(np.float32(rng.normal()))!r}")
            lines.append(f"{100 + 3 * s} " + " ".join(fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def cat(capsys, path, *extra):
    return cat_records(capsys, path, *extra)


def foreign(path, **columns):
    """A data set written by `lance` itself (no recordkit metadata)."""
    lance.write_dataset(pa.table(columns), str(path), max_rows_per_file=3)
    return path


def embeddings(n=7):
    return {"emb": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(3 * n, dtype=np.float32)), 3),
            "label": pa.array(np.arange(n) * 10, pa.int64()),
            "seq": pa.array([[float(j) for j in range(i % 4)] for i in range(n)], pa.list_(pa.float32()))}


def test_recordkit_writes_and_lance_reads_every_value_equal(tmp_path, capsys):
    src = make_ctf(tmp_path / "a.ctf")
    out = tmp_path / "a.lance"
    assert run(capsys, "convert", src, out, *STREAMS)[0] == 0
    assert sniff_format(str(out)) == "lance"
    rows = lance.dataset(str(out)).to_table().to_pylist()
    records = cat(capsys, src, *STREAMS)
    assert len(rows) == len(records) == 40
    for row, rec in zip(rows, records):
        assert row["key"] == rec["key"]
        assert np.array_equal(np.asarray(row["feat"], np.float32), np.asarray(rec["feat"], np.float32))
        assert [(w["indices"], w["values"]) for w in row["word"]] == \
            [(w["indices"], [float(np.float32(v)) for v in w["values"]]) for w in rec["word"]]
    meta = lance.dataset(str(out)).schema.metadata
    assert json.loads(meta[b"recordkit.streams"])[0]["alias"] == "w"
    assert cat(capsys, out) == cat(capsys, src, *STREAMS)  # no --stream: the recorded streams


def test_lance_written_set_reads_with_no_stream_by_its_column_types(tmp_path, capsys):
    path = foreign(tmp_path / "f.lance", **embeddings())
    records = cat(capsys, path)
    assert [r["key"] for r in records] == list(range(7))  # no key column: the row's position
    assert records[5] == {"key": 5, "emb": [[15.0, 16.0, 17.0]], "label": [[50.0]], "seq": [[0.0]]}
    assert records[3]["seq"] == [[0.0], [1.0], [2.0]] and records[4]["seq"] == []
    code, out, _ = run(capsys, "stats", path)
    assert code == 0 and "7 sequences" in out
    # --stream selects and renames, with the same reading of the column's type
    assert cat(capsys, path, "--stream", "y=dense:1:label")[2] == {"key": 2, "y": [[20.0]]}


def test_a_key_column_gives_the_keys_and_random_access_takes_rows(tmp_path, monkeypatch):
    from recordkit.formats.lance.reader import LanceDeserializer
    from recordkit.integrations.random_access import RandomAccessDataSource
    cols = embeddings(10)
    cols["key"] = pa.array(np.arange(10, dtype=np.uint64) * 7)
    path = foreign(tmp_path / "k.lance", **cols)

    def refuse(what):
        def fail(*_a, **_k):
            raise AssertionError(what)
        return fail
    with monkeypatch.context() as m:  # 4 fragments, 4 cached chunks: decoded whole, kept for the next items
        m.setattr(LanceDeserializer, "take_sequences", refuse("rows taken where every chunk fits the cache"))
        assert [int(r["key"]) for r in RandomAccessDataSource(str(path)).__getitems__([9, 0])] == [63, 0]
    monkeypatch.setattr(LanceDeserializer, "load_chunk", refuse("a chunk was decoded for an item"))
    src = RandomAccessDataSource(str(path), cache_chunks=2)  # fewer than the fragments: items taken
    assert len(src) == 10
    items = src.__getitems__([9, 0, 5])
    assert [int(r["key"]) for r in items] == [63, 0, 35]
    assert np.array_equal(items[0]["emb"], [[27, 28, 29]]) and items[2]["seq"].shape == (1, 1)
    assert int(src[-1]["key"]) == 63
    with pytest.raises(IndexError):
        src[10]


def test_dense_sparse_and_sequences_round_trip_ctf_lance_cbf_verified(tmp_path, capsys):
    src = make_ctf(tmp_path / "a.ctf")
    out, back = tmp_path / "a.lance", tmp_path / "a.cbf"
    assert run(capsys, "convert", src, out, *STREAMS)[0] == 0
    assert run(capsys, "convert", out, back)[0] == 0
    code, _, err = run(capsys, "verify", src, out, *STREAMS)
    assert code == 0 and "40 sequences compared" in err and "keys compared: identical" in err
    code, _, err = run(capsys, "verify", out, back)
    assert code == 0 and "identical" in err
    code, _, err = run(capsys, "validate", out)
    assert code == 0 and "40 sequences checked, 0 problem(s)" in err
    # a set that differs in one value is not proved equal, and the difference is located
    other = make_ctf(tmp_path / "b.ctf")
    text = other.read_text().splitlines()
    i = next(k for k, line in enumerate(text) if line.startswith("103 "))
    fields = text[i].split()
    fields[2] = repr(float(np.nextafter(np.float32(fields[2]), np.float32(np.inf))))
    text[i] = " ".join(fields)
    other.write_text("\n".join(text) + "\n")
    code, out_text, err = run(capsys, "verify", other, out, *STREAMS)
    assert code == 1 and "DIFFERENT (1 difference(s))" in err
    assert f"DST {out}: fragment 0, row 1 of the fragment (row 1 of the data set, sample 0)" in out_text


def test_double_precision_is_kept(tmp_path, capsys):
    src = tmp_path / "d.ctf"
    src.write_text("|x 0.1 1e-300\n|x 3.141592653589793 2\n")
    out = tmp_path / "d.lance"
    assert run(capsys, "convert", src, out, "--stream", "x=dense:2", "--precision", "double")[0] == 0
    assert lance.dataset(str(out)).to_table().column("x").to_pylist()[0] == [[0.1, 1e-300]]
    assert run(capsys, "verify", src, out, "--stream", "x=dense:2", "--precision", "double")[0] == 0


def test_large_fragments_are_cut_into_chunks_of_about_chunk_size(tmp_path):
    from recordkit.formats.lance.reader import LanceDeserializer
    n = 3000
    table = pa.table({"emb": pa.FixedSizeListArray.from_arrays(pa.array(np.arange(8 * n, dtype=np.float32)), 8)})
    lance.write_dataset(table, str(tmp_path / "big.lance"))
    whole = LanceDeserializer(str(tmp_path / "big.lance"))
    cut = LanceDeserializer(str(tmp_path / "big.lance"), chunk_size=20_000)
    assert len(whole.chunks) == 1 and 4 <= len(cut.chunks) <= 40
    assert sum(c.num_sequences for c in cut.chunks) == n
    values = np.concatenate([cut.load_chunk(c.id).columns["emb"].values for c in cut.chunks])
    assert np.array_equal(values, np.arange(8 * n, dtype=np.float32).reshape(n, 8))
    keys = np.concatenate([cut.sequence_keys(c.id) for c in cut.chunks])
    assert np.array_equal(keys, np.arange(n))


def test_to_lance_names_the_format_and_an_existing_set_is_replaced_whole(tmp_path, capsys):
    src = make_ctf(tmp_path / "a.ctf", n=5)
    out = tmp_path / "plain"
    assert run(capsys, "convert", src, out, *STREAMS, "--to", "lance")[0] == 0
    assert run(capsys, "convert", src, out, "--stream", "feat=dense:3:f", "--to", "lance")[0] == 0
    assert lance.dataset(str(out)).schema.names == ["key", "feat"]
    assert sorted(os.listdir(tmp_path)) == ["a.ctf", "plain"]  # no staging directory left behind
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    code, _, err = run(capsys, "convert", src, tmp_path / "notes", *STREAMS, "--to", "lance")
    assert code == 2 and "todo.txt" in err and (tmp_path / "notes" / "todo.txt").read_text() == "mine"
    code, _, err = run(capsys, "convert", src, tmp_path / "c.lance", *STREAMS, "--checksum")
    assert code == 2 and "sidecars" in err and not (tmp_path / "c.lance").exists()


def test_a_missing_column_is_a_located_error(tmp_path, capsys):
    path = foreign(tmp_path / "f.lance", **embeddings())
    code, _, err = run(capsys, "cat", path, "--stream", "x=dense:3:nope")
    assert code == 1 and f"{path}" in err and "no column 'nope'" in err and "emb, label, seq" in err


def test_wrong_types_are_located_errors(tmp_path, capsys):
    path = foreign(tmp_path / "f.lance", **embeddings())
    code, _, err = run(capsys, "cat", path, "--stream", "x=dense:4:emb")
    assert code == 1 and "column 'emb'" in err and "samples hold 3" in err
    code, _, err = run(capsys, "cat", path, "--stream", "x=sparse:4:label")
    assert code == 1 and "column 'label'" in err and "struct<indices" in err
    # text and binary columns are bytes streams; a numeric declaration of one says so
    named = foreign(tmp_path / "n.lance", emb=embeddings()["emb"], name=pa.array(list("abcdefg")))
    assert [r["name"] for r in cat(capsys, named)] == list("abcdefg")
    code, _, err = run(capsys, "cat", named, "--stream", "n=dense:1:name")
    assert code == 1 and "column 'name'" in err and "--stream n=bytes" in err
    assert cat(capsys, named, "--stream", "emb=dense:3")[0]["emb"] == [[0.0, 1.0, 2.0]]
    blobs = foreign(tmp_path / "b.lance", img=pa.array([b"\x89PNG"] * 7, pa.binary()))
    assert cat(capsys, blobs)[0]["img"] == {"base64": "iVBORw=="}


def test_a_null_is_located_by_fragment_and_row(tmp_path, capsys):
    path = foreign(tmp_path / "f.lance", label=pa.array([1, 2, 3, 4, None, 6], pa.int64()))
    code, _, err = run(capsys, "cat", path)
    assert code == 1 and "column 'label' holds a null (row 1 of fragment 1 rows 0..2)" in err
    code, out, _ = run(capsys, "validate", path)
    assert code == 1 and "row 1 of fragment 1 rows 0..2" in out


def test_not_a_lance_set_is_a_located_error(tmp_path):
    from recordkit.formats.lance.reader import LanceDeserializer
    (tmp_path / "x.lance" / "_versions").mkdir(parents=True)
    with pytest.raises(FormatError, match="x.lance: cannot read the Lance data set"):
        LanceDeserializer(str(tmp_path / "x.lance"))
    with pytest.raises(FileNotFoundError, match="no such directory"):
        LanceDeserializer(str(tmp_path / "none.lance"))


def _png(i: int) -> bytes:
    """A tiny PNG-signed blob (the bytes after the signature are never decoded)."""
    return b"\x89PNG\r\n\x1a\n" + bytes([i]) * (10 + i)


def test_ofrecord_records_keep_images_and_bytes_as_binary_columns(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of"), 2) as w:
        for i in range(4):
            w.write({"encoded": _png(i), "tags": [b"a", b"b" * i], "class/label": np.array([i], np.int32),
                     "score": np.array([0.5, i], np.float64), "key": np.array([100 + i])})
    out = tmp_path / "of.lance"
    code, _, err = run(capsys, "convert", tmp_path / "of", out, "--image-feature", "encoded")
    assert code == 0, err
    table = lance.dataset(str(out)).to_table()
    assert table.schema.field("encoded").type == pa.binary()
    assert table.schema.field("tags").type == pa.list_(pa.binary())
    assert table.schema.field("class/label").type == pa.list_(pa.int32())
    assert table.schema.field("score").type == pa.list_(pa.float64())
    rows = sorted(table.to_pylist(), key=lambda r: r["key"])  # 2 parts: records dealt round robin
    assert [r["key"] for r in rows] == [100, 101, 102, 103]
    for i, r in enumerate(rows):
        assert r["encoded"] == _png(i) and r["tags"] == [b"a", b"b" * i]
        assert r["class/label"] == [i] and r["score"] == [0.5, float(i)]
    # the numeric and binary columns read back as streams; a list of bytes is named when not chosen
    assert cat(capsys, out, "--stream", "label=dense:1:class/label")[0]["label"] in ([[0.0]], [[1.0]])
    code, _, err = run(capsys, "cat", out)
    assert code == 1 and "column 'tags' is list<" in err and "--stream encoded=bytes:1" in err


def test_ofrecord_records_that_do_not_fit_one_column_per_feature_are_located(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of")) as w:
        w.write({"encoded": _png(0), "label": np.array([1], np.int64)})
        w.write({"encoded": _png(1)})
    code, _, err = run(capsys, "convert", tmp_path / "of", tmp_path / "a.lance", "--image-feature", "encoded")
    assert code == 1 and "record 1" in err and "differ from the first record's (encoded, label)" in err
    assert not (tmp_path / "a.lance").exists()
    with OFRecordWriter(str(tmp_path / "of2")) as w:
        w.write({"encoded": b"GIF89a...."})
    code, _, err = run(capsys, "convert", tmp_path / "of2", tmp_path / "b.lance", "--image-feature", "encoded")
    assert code == 1 and "neither JPEG nor PNG" in err and "record 0" in err
    code, _, err = run(capsys, "convert", tmp_path / "of", tmp_path / "c.lance", "--parts", "2")
    assert code == 2 and "--parts" in err and not (tmp_path / "c.lance").exists()
    code, _, err = run(capsys, "convert", tmp_path / "of", tmp_path / "c.lance", "--content-defined-chunking")
    assert code == 2 and "--content-defined-chunking" in err and not (tmp_path / "c.lance").exists()


def test_deleted_rows_are_skipped_alike_by_chunks_and_by_take(tmp_path):
    from recordkit.formats.lance.reader import LanceDeserializer
    path = foreign(tmp_path / "d.lance", label=pa.array(np.arange(10) * 10))  # fragments of 3 rows
    lance.dataset(str(path)).delete("label = 20 OR label = 70")
    r = LanceDeserializer(str(path))
    assert [c.num_sequences for c in r.chunks] == [2, 3, 2, 1]
    by_chunks = np.concatenate([r.load_chunk(c.id).columns["label"].values.ravel() for c in r.chunks])
    taken = r.take_sequences(np.arange(8))
    assert by_chunks.tolist() == taken.columns["label"].values.ravel().tolist() == [0, 10, 30, 40, 50, 60, 80, 90]
    assert taken.keys.tolist() == list(range(8))
