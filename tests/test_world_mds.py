"""MDS data sets written by MosaicML Streaming's own ``MDSWriter`` (tests/data/world/make_mds.py,
committed with the values the writer was given), read with no ``--stream``: the streams their
``column_encodings`` imply."""
import json
import shutil
from pathlib import Path

import numpy as np

from bridge_corpus import cat_records, cli as run  # noqa: E402

WORLD = Path(__file__).parent / "data" / "world"


def cat(capsys, path, *extra):
    return cat_records(capsys, path, *extra)


def expected(name):
    return json.loads((WORLD / name / "expected.json").read_text())["rows"]


def rows_of(value):
    """What recordkit delivers for one written value: (samples, dim) rows."""
    a = np.asarray(value, dtype=np.float64)
    if a.ndim == 0:
        return a.reshape(1, 1)
    return a.reshape(1, -1) if a.ndim == 1 else a


def test_every_scalar_and_ndarray_encoding_reads_with_no_stream(capsys):
    want = expected("numbers")
    recs = cat(capsys, WORLD / "numbers", "--precision", "double")
    assert len(recs) == len(want) == 10
    for r, w in zip(recs, want):
        for name, value in w.items():
            got = np.asarray(r[name], dtype=np.float64)
            if name == "seq":  # a 1-D array whose length varies: a sequence of dim 1
                assert np.array_equal(got.reshape(-1), np.asarray(value)), name
            else:
                assert np.array_equal(got, rows_of(value)), name
    code, out, _ = run(capsys, "inspect", WORLD / "numbers")
    assert code == 0 and "--stream int=dense:1" in out and "--stream vec=dense:4" in out
    assert "--stream grid=dense:3" in out and "--stream seq=dense:1" in out and "--stream emb=dense:5" in out
    assert "--stream any=dense:2" in out


def test_the_stream_dtype_follows_the_encoding_and_integers_stay_exact(capsys):
    code, out, _ = run(capsys, "inspect", "--json", WORLD / "numbers")
    dtypes = {s["name"]: s["dtype"] for s in json.loads(out)["streams"]}
    assert dtypes["float64"] == dtypes["seq"] == "float64"
    assert dtypes["float16"] == dtypes["uint64"] == dtypes["vec"] == "float32"
    # float32 holds these labels exactly: the default precision reads them
    assert [r["uint16"] for r in cat(capsys, WORLD / "numbers")][:3] == [[[0]], [[7]], [[14]]]


def test_conversion_of_a_streaming_written_set_is_verified_lossless(tmp_path, capsys):
    assert run(capsys, "convert", WORLD / "numbers", tmp_path / "n.cbf", "--precision", "double")[0] == 0
    code, _, err = run(capsys, "verify", WORLD / "numbers", tmp_path / "n.cbf", "--precision", "double")
    assert code == 0 and "10 sequences compared" in err


def test_text_bytes_images_json_and_pickles_read_as_bytes_streams_with_no_stream(capsys):
    from recordkit import open as rk_open
    with rk_open(WORLD / "mixed") as reader:
        assert {s.name: s.format for s in reader.streams} == {
            "blob": "bytes", "jpg": "bytes", "label": "dense", "meta": "bytes", "obj": "bytes", "pil": "bytes",
            "png": "bytes", "text": "bytes"}
        chunk = reader.load_chunk(0)
    col = {name: list(c.values) if c.is_bytes else None for name, c in chunk.columns.items()}
    assert col["text"] == [f"t{i}".encode() for i in range(4)] and col["blob"] == [bytes([i]) for i in range(4)]
    assert [json.loads(v) for v in col["meta"]] == [{"i": i} for i in range(4)]
    assert all(v.startswith(b"\x89PNG\r\n\x1a\n") for v in col["png"])  # the PNG files, byte for byte
    assert all(v.startswith(b"\xff\xd8\xff") and v.endswith(b"\xff\xd9") for v in col["jpg"])
    assert all(v.startswith(b"\x80") for v in col["obj"])  # pickles, handed over, never unpickled
    assert cat(capsys, WORLD / "mixed", "--stream", "label=dense:1") == [
        {"key": i, "label": [[float(r["label"])]]} for i, r in enumerate(expected("mixed"))]
    code, _, err = run(capsys, "cat", WORLD / "mixed", "--stream", "o=dense:1:obj")
    assert code == 1 and "column 'obj' is encoded 'pkl': bytes, not numbers (a bytes stream: --stream o=bytes)" in err


def test_mixed_streaming_columns_convert_and_verify_byte_for_byte(tmp_path, capsys):
    assert run(capsys, "convert", WORLD / "mixed", tmp_path / "m.parquet")[0] == 0
    code, _, err = run(capsys, "verify", WORLD / "mixed", tmp_path / "m.parquet")
    assert code == 0 and "identical" in err, err


def test_a_length_changing_in_a_later_shard_is_located_not_reinterpreted(capsys):
    code, _, err = run(capsys, "cat", WORLD / "changing")
    assert code == 1 and "shard.00002.mds" in err and "column 'v': shape (4,), expected" in err
    assert "sample 1" in err and "--stream v=dense:1:v" in err
    recs = cat(capsys, WORLD / "changing", "--stream", "v=dense:1:v")
    assert [np.asarray(r["v"]).reshape(-1).tolist() for r in recs] == [w["v"] for w in expected("changing")]


def test_an_integer_with_no_exact_float_is_refused(tmp_path, capsys):
    # the numbers set with its uint64 column's first value raised past 2**24 (float32's exact integers)
    shutil.copytree(WORLD / "numbers", tmp_path / "n")
    index = json.loads((tmp_path / "n" / "index.json").read_text())
    shard = index["shards"][0]
    data = bytearray((tmp_path / "n" / shard["raw_data"]["basename"]).read_bytes())
    first = int.from_bytes(data[4:8], "little")  # the first sample: its variable sizes, then the columns
    var = [s for s in shard["column_sizes"] if s is None]
    sizes = iter(np.frombuffer(bytes(data), "<u4", len(var), first).tolist())
    start = first + 4 * len(var)
    for c, size in zip(shard["column_names"], shard["column_sizes"]):
        if c == "uint64":
            data[start:start + 8] = (2**24 + 1).to_bytes(8, "little")
            break
        start += size if size is not None else next(sizes)
    shard["raw_data"]["hashes"] = {}
    (tmp_path / "n" / "index.json").write_text(json.dumps(index))
    (tmp_path / "n" / shard["raw_data"]["basename"]).write_bytes(bytes(data))
    code, _, err = run(capsys, "cat", tmp_path / "n")
    assert code == 1 and "column 'uint64': value 16777217 (sample 0 of the shard)" in err and "shard.00000" in err
    assert "--precision double" in err
    assert cat(capsys, tmp_path / "n", "--precision", "double")[0]["uint64"] == [[2**24 + 1]]


def test_recordkit_sparse_columns_without_their_description_are_named_not_split(tmp_path, capsys):
    (tmp_path / "a.ctf").write_text("0 |f 1 2 |l 3:1\n0 |f 3 4\n1 |f 5 6 |l 0:2 4:1\n")
    streams = ["--stream", "feat=dense:2:f", "--stream", "lab=sparse:5:l"]
    assert run(capsys, "convert", tmp_path / "a.ctf", tmp_path / "m", "--to", "mds", *streams)[0] == 0
    index = json.loads((tmp_path / "m" / "index.json").read_text())
    del index["recordkit"]
    (tmp_path / "m" / "index.json").write_text(json.dumps(index))
    code, _, err = run(capsys, "cat", tmp_path / "m")
    assert code == 1 and "columns 'lab.indices/.values/.offsets' are a sparse stream" in err
    assert "--stream lab=sparse:DIM" in err and "select them: --stream feat=dense:2" in err
    assert cat(capsys, tmp_path / "m", "--stream", "feat=dense:2", "--stream", "lab=sparse:5")[1]["lab"] == [
        {"indices": [0, 4], "values": [2.0, 1.0]}]
