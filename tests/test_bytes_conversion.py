"""Bytes streams through ``convert`` and ``verify``: every format whose registry entry holds bytes
writes them back byte for byte (an encoded image, a UTF-8 text); the others refuse them by name."""
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from bridge_corpus import cat_records, cli  # noqa: E402
from recordkit.formats import registry  # noqa: E402

PNG = b"\x89PNG\r\n\x1a\n\x00\xff" * 3
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256))


def strings_and_images(path):
    pq.write_table(pa.table({"image": pa.array([PNG, JPEG, b""], pa.binary()), "text": ["a", "d\u00e9j\u00e0", ""],
                             "label": [1, 2, 3]}), path)
    return str(path)


HOLDERS = [f.name for f in registry.FORMATS.values() if f.bytes and f.writer and not f.missing()]
NUMBERS_ONLY = [f.name for f in registry.FORMATS.values() if not f.bytes and f.writer]


@pytest.mark.parametrize("to", HOLDERS)
def test_bytes_streams_round_trip_through_convert_and_verify(tmp_path, capsys, to):
    src = strings_and_images(tmp_path / "in.parquet")
    out = tmp_path / f"out.{to}"
    code, _, err = cli(capsys, "convert", src, out, "--to", to)
    assert code == 0, err
    code, _, err = cli(capsys, "verify", src, out)
    assert code == 0 and "identical" in err, err
    from recordkit import open as rk_open
    with rk_open(out) as reader:
        chunk = next(reader.iter_chunks())
        assert {s.name: s.format for s in reader.streams} == {"image": "bytes", "text": "bytes", "label": "dense"}
        assert list(chunk.columns["image"].values[:3]) == [PNG, JPEG, b""]
        assert list(chunk.columns["text"].values[:3]) == [b"a", "d\u00e9j\u00e0".encode(), b""]


@pytest.mark.parametrize("to", NUMBERS_ONLY)
def test_formats_of_numbers_refuse_a_bytes_stream_by_name(tmp_path, capsys, to):
    src = strings_and_images(tmp_path / "in.parquet")
    code, _, err = cli(capsys, "convert", src, tmp_path / "out", "--to", to)
    assert code != 0 and f"{to} holds numbers only, not bytes stream 'image'" in err
    assert "parquet" in err and not (tmp_path / "out").exists()


def test_selecting_the_numeric_streams_converts_to_a_format_of_numbers(tmp_path, capsys):
    src = strings_and_images(tmp_path / "in.parquet")
    code, _, err = cli(capsys, "convert", src, tmp_path / "out.ctf", "--stream", "label=dense:1")
    assert code == 0, err
    assert cat_records(capsys, tmp_path / "out.ctf", "--stream", "label=dense:1") == [
        {"key": k, "label": [[float(k + 1)]]} for k in range(3)]


def test_stats_and_report_count_bytes_values_without_numbers(tmp_path, capsys):
    import json
    src = strings_and_images(tmp_path / "in.parquet")
    code, out, err = cli(capsys, "stats", "--json", src)
    assert code == 0, err
    got = json.loads(out)["streams"]
    assert got["image"] == {"samples": 3, "nnz": 2, "sum": None, "min": None, "max": None}  # one empty value
    assert got["label"]["sum"] == 6.0
    code, _, err = cli(capsys, "report", src, "-o", tmp_path / "r.html")
    assert code == 0, err
    assert "image" in (tmp_path / "r.html").read_text()


def test_the_ray_engine_refuses_a_bytes_stream_by_name(tmp_path, capsys):
    pytest.importorskip("ray")
    src = strings_and_images(tmp_path / "in.parquet")
    assert cli(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord")[0] == 0
    code, _, err = cli(capsys, "convert", tmp_path / "of", tmp_path / "out", "--to", "ofrecord", "--engine", "ray")
    assert code != 0 and "--engine ray converts numeric streams, not bytes stream 'image'" in err
    assert not (tmp_path / "out").exists()


def test_an_ofrecord_set_without_declarations_reads_a_bytes_feature_declared_and_locates_a_list(tmp_path, capsys):
    import numpy as np
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of")) as w:
        for i in range(3):
            w.write({"encoded": PNG + bytes([i]), "tags": [b"a", b"b"], "label": np.array([i], np.int64)})
    got = cat_records(capsys, tmp_path / "of", "--stream", "image=bytes:encoded", "--stream", "label=dense:1")
    import base64
    assert [base64.b64decode(r["image"]["base64"]) for r in got] == [PNG + bytes([i]) for i in range(3)]
    code, _, err = cli(capsys, "cat", tmp_path / "of", "--stream", "t=bytes:tags")
    assert code == 1 and "feature 'tags' is a bytes_list of 2 values: bytes stream 't' reads a bytes_list of one" in err
    assert "record 0" in err


def test_the_peers_own_readers_read_the_bytes_recordkit_wrote(tmp_path, capsys):
    """pyarrow, `datasets`, webdataset and the `tfrecord` package read recordkit's bytes streams back
    byte for byte: an image and a text, as their users would."""
    import glob
    src = strings_and_images(tmp_path / "in.parquet")
    outs = {}
    for to in ("parquet", "hf", "webdataset", "tfrecord"):
        outs[to] = tmp_path / f"out.{to}"
        code, _, err = cli(capsys, "convert", src, outs[to], "--to", to)
        assert code == 0, err
    images, texts = [PNG, JPEG, b""], [b"a", "d\u00e9j\u00e0".encode(), b""]
    table = pq.read_table(str(outs["parquet"]))
    assert table.column("image").to_pylist() == images and table.column("text").to_pylist() == texts
    datasets = pytest.importorskip("datasets")
    hf = datasets.load_from_disk(str(outs["hf"]))
    assert hf["image"] == images and hf["text"] == texts
    wds = pytest.importorskip("webdataset")
    shards = sorted(glob.glob(str(outs["webdataset"] / "*.tar")))
    samples = list(wds.WebDataset(shards, shardshuffle=False))
    # "text" is itself an extension: the member is KEY.text; "image" is not: KEY.image.bin
    assert [s["image.bin"] for s in samples] == images and [s["text"] for s in samples] == texts
    tfrecord = pytest.importorskip("tfrecord")
    parts = sorted(glob.glob(str(outs["tfrecord"] / "*.tfrecord")))
    records = [r for p in parts for r in tfrecord.tfrecord_loader(p, None, {"image": "byte", "text": "byte"})]
    assert [bytes(r["image"]) for r in records] == images and [bytes(r["text"]) for r in records] == texts
