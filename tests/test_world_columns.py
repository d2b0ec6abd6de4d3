"""Parquet and Hugging Face data sets as their usual writers make them (pyarrow ``write_table``,
``datasets`` ``save_to_disk``), read with no ``--stream``: the streams their column types imply,
every value equal to what the writer was given; a later row that does not fit the inferred layout
is a located error."""
import json

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bridge_corpus import cat_records, cli as run  # noqa: E402


def cat(capsys, path, *extra):
    return cat_records(capsys, path, *extra)


def embeddings_parquet(path, n=10, dim=16, row_group_size=4):
    """What pyarrow users write: a fixed_size_list<float>[16] embedding and an int label a row."""
    x = np.arange(n * dim, dtype=np.float32).reshape(n, dim) / 7
    y = (np.arange(n) * 3 % 5).astype(np.int64)
    pq.write_table(pa.table({"emb": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1)), dim),
                             "label": pa.array(y)}), path, row_group_size=row_group_size)
    return x, y


def test_pyarrow_fixed_size_list_and_int_label_read_with_no_stream(tmp_path, capsys):
    x, y = embeddings_parquet(tmp_path / "e.parquet")
    recs = cat(capsys, tmp_path / "e.parquet")
    assert [r["key"] for r in recs] == list(range(10))
    for r, xi, yi in zip(recs, x, y):
        assert np.array_equal(np.asarray(r["emb"], np.float32), xi[None, :])  # one sample a row
        assert r["label"] == [[float(yi)]]
    code, out, _ = run(capsys, "inspect", tmp_path / "e.parquet")
    assert code == 0 and "--stream emb=dense:16 --stream label=dense:1" in out
    # --stream still selects and renames
    assert cat(capsys, tmp_path / "e.parquet", "--stream", "y=dense:1:label")[1] == {"key": 1, "y": [[3.0]]}


def test_conversion_of_a_pyarrow_written_file_is_verified_lossless(tmp_path, capsys):
    embeddings_parquet(tmp_path / "e.parquet")
    assert run(capsys, "convert", tmp_path / "e.parquet", tmp_path / "e.cbf")[0] == 0
    code, _, err = run(capsys, "verify", tmp_path / "e.parquet", tmp_path / "e.cbf")
    assert code == 0 and "10 sequences compared" in err


def test_datasets_from_dict_2d_array_and_labels_read_with_no_stream(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    x = np.random.default_rng(1).normal(size=(12, 100)).astype(np.float32)
    y = np.arange(12) % 3
    datasets.Dataset.from_dict({"features": x, "label": y}).save_to_disk(str(tmp_path / "hf"))
    recs = cat(capsys, tmp_path / "hf")
    assert len(recs) == 12
    for r, xi, yi in zip(recs, x, y):
        assert np.array_equal(np.asarray(r["features"], np.float32), xi[None, :])
        assert r["label"] == [[float(yi)]]
    code, out, _ = run(capsys, "inspect", tmp_path / "hf")
    assert code == 0 and "--stream features=dense:100 --stream label=dense:1" in out
    assert run(capsys, "convert", tmp_path / "hf", tmp_path / "hf.ctf")[0] == 0
    code, _, err = run(capsys, "verify", tmp_path / "hf", tmp_path / "hf.ctf")
    assert code == 0 and "12 sequences compared" in err


def test_class_label_names_are_kept_in_the_description(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({"x": datasets.Sequence(datasets.Value("float32"), length=2),
                               "label": datasets.ClassLabel(names=["cat", "dog"])})
    datasets.Dataset.from_dict({"x": [[1, 2], [3, 4]], "label": [1, 0]}, features=feats).save_to_disk(
        str(tmp_path / "hf"))
    assert cat(capsys, tmp_path / "hf") == [{"key": 0, "x": [[1, 2]], "label": [[1]]},
                                           {"key": 1, "x": [[3, 4]], "label": [[0]]}]
    code, out, _ = run(capsys, "inspect", tmp_path / "hf")
    assert code == 0 and "label: ClassLabel names 0=cat, 1=dog" in out
    code, out, _ = run(capsys, "inspect", "--json", tmp_path / "hf")
    assert json.loads(out)["notes"] == {"label": "ClassLabel names 0=cat, 1=dog"}


def test_datasets_images_and_strings_read_as_bytes_streams_with_no_stream(tmp_path, capsys):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({"image": datasets.Image(), "text": datasets.Value("string"),
                               "label": datasets.Value("int64")})
    png = (b"\x89PNG\r\n\x1a\n" + b"\0\xff" * 8)
    datasets.Dataset.from_dict({"image": [{"bytes": png, "path": None}, {"bytes": png[:9], "path": None}],
                                "text": ["a", "d\u00e9j\u00e0"], "label": [4, 5]},
                               features=feats).save_to_disk(str(tmp_path / "hf"))
    import base64
    got = cat(capsys, tmp_path / "hf")
    assert got == [{"key": 0, "image": {"base64": base64.b64encode(png).decode()}, "text": "a", "label": [[4]]},
                   {"key": 1, "image": {"base64": base64.b64encode(png[:9]).decode()}, "text": "d\u00e9j\u00e0",
                    "label": [[5]]}]
    from recordkit import open as rk_open
    with rk_open(tmp_path / "hf") as reader:
        chunk = reader.load_chunk(0)
        assert [s.format for s in reader.streams] == ["bytes", "bytes", "dense"]
        assert list(chunk.columns["image"].values) == [png, png[:9]]  # byte-identical
        assert list(chunk.columns["text"].values) == [b"a", "d\u00e9j\u00e0".encode()]  # UTF-8
    code, out, _ = run(capsys, "inspect", tmp_path / "hf")
    assert code == 0 and "--stream image=bytes:1 --stream text=bytes:1 --stream label=dense:1" in out


def test_a_struct_that_is_no_image_is_refused_naming_the_column_and_the_others(tmp_path, capsys):
    pq.write_table(pa.table({"box": pa.array([{"x": 1, "y": 2}]), "label": pa.array([3])}), tmp_path / "s.parquet")
    code, _, err = run(capsys, "cat", tmp_path / "s.parquet")
    assert code == 1 and "column 'box' is struct<x: int64, y: int64>: a struct that is no image" in err
    assert "select them: --stream label=dense:1" in err


def test_a_null_bytes_value_is_located_by_row_and_column(tmp_path, capsys):
    pq.write_table(pa.table({"text": pa.array(["a", None, "c"])}), tmp_path / "n.parquet")
    code, _, err = run(capsys, "cat", tmp_path / "n.parquet")
    assert code == 1 and "column 'text' holds a null (row 1 of row group 0)" in err


def test_a_numeric_declaration_of_a_string_column_says_to_declare_bytes(tmp_path, capsys):
    pq.write_table(pa.table({"text": pa.array(["a"])}), tmp_path / "t.parquet")
    code, _, err = run(capsys, "cat", tmp_path / "t.parquet", "--stream", "t=dense:1:text")
    assert code != 0 and "--stream t=bytes" in err
    assert cat(capsys, tmp_path / "t.parquet", "--stream", "t=bytes:text") == [{"key": 0, "t": "a"}]


def test_variable_lists_are_sequences_and_constant_lists_one_sample_a_row(tmp_path, capsys):
    pq.write_table(pa.table({"seq": pa.array([[1.0], [2.0, 3.0], []], pa.list_(pa.float32())),
                             "vec": pa.array([[1, 2], [3, 4], [5, 6]], pa.list_(pa.int32()))}), tmp_path / "l.parquet")
    assert cat(capsys, tmp_path / "l.parquet") == [
        {"key": 0, "seq": [[1]], "vec": [[1, 2]]},
        {"key": 1, "seq": [[2], [3]], "vec": [[3, 4]]},
        {"key": 2, "seq": [], "vec": [[5, 6]]}]


def test_a_list_length_changing_later_is_located_not_reinterpreted(tmp_path, capsys):
    rows = [[float(i), float(i)] for i in range(PROBE_ROWS_PLUS)] + [[1.0, 2.0, 3.0]]
    pq.write_table(pa.table({"v": pa.array(rows, pa.list_(pa.float32()))}), tmp_path / "v.parquet",
                   row_group_size=3)
    code, _, err = run(capsys, "cat", tmp_path / "v.parquet")
    assert code == 1 and "v.parquet" in err and "column 'v': row 2 of row group 2 holds 3 values" in err
    assert "--stream v=dense:1:v" in err  # how to read the lists as sequences instead
    assert len(cat(capsys, tmp_path / "v.parquet", "--stream", "v=dense:1:v")) == PROBE_ROWS_PLUS + 1


PROBE_ROWS_PLUS = 8  # rows before the odd one: the probe sees only row group 0


def test_a_null_scalar_is_located_by_row_group_row_and_column(tmp_path, capsys):
    pq.write_table(pa.table({"label": pa.array([1, 2, 3, None, 5], pa.int64())}), tmp_path / "n.parquet",
                   row_group_size=2)
    code, _, err = run(capsys, "cat", tmp_path / "n.parquet")
    assert code == 1 and "n.parquet" in err and "column 'label' holds a null (row 1 of row group 1)" in err


def test_integers_convert_only_where_exact(tmp_path, capsys):
    pq.write_table(pa.table({"id": pa.array([1, 2**24 + 1], pa.int64())}), tmp_path / "i.parquet")
    code, _, err = run(capsys, "cat", tmp_path / "i.parquet")
    assert code == 1 and "column 'id': value 16777217 (row 1 of row group 0)" in err and "--precision double" in err
    assert cat(capsys, tmp_path / "i.parquet", "--precision", "double")[1]["id"] == [[2**24 + 1]]
    pq.write_table(pa.table({"id": pa.array([2**53 + 1], pa.uint64())}), tmp_path / "u.parquet")
    code, _, err = run(capsys, "cat", tmp_path / "u.parquet", "--precision", "double")
    assert code == 1 and "value 9007199254740993" in err


def test_every_number_width_reads_exactly(tmp_path, capsys):
    cols = {t: pa.array([0, 1, 100], getattr(pa, t)()) for t in
            ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")}
    cols.update({t: pa.array(np.array([0.5, -2, 1e3], dtype=t)) for t in ("float16", "float32", "float64")})
    pq.write_table(pa.table(cols), tmp_path / "w.parquet")
    recs = cat(capsys, tmp_path / "w.parquet")
    assert [r["int8"] for r in recs] == [[[0]], [[1]], [[100]]]
    assert [r["float16"] for r in recs] == [[[0.5]], [[-2]], [[1000]]]
    code, out, _ = run(capsys, "inspect", "--json", tmp_path / "w.parquet")
    dtypes = {s["name"]: s["dtype"] for s in json.loads(out)["streams"]}
    assert dtypes["float64"] == "float64" and dtypes["float16"] == dtypes["int64"] == "float32"
