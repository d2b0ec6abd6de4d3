"""WebDataset: recordkit's shards read by the real ``webdataset`` package (every value compared
with ``recordkit cat``), shards written by ``webdataset.TarWriter`` read by recordkit, the tar
layout checked with the standard ``tarfile``, records with images copied unchanged, and bad
shards as located errors."""
import io
import json
import os
import tarfile

import numpy as np
import pytest

from bridge_corpus import STREAMS, by_key, cat_records, cli, make_ctf
from recordkit import StreamSpec
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.webdataset import WebDatasetReader, WebDatasetWriter

wds = pytest.importorskip("webdataset")


@pytest.fixture
def converted(tmp_path, capsys):
    corpus = make_ctf(tmp_path / "c.ctf")
    out = tmp_path / "wds"
    assert cli(capsys, "convert", corpus, out, "--to", "webdataset", *STREAMS, "--parts", "3")[0] == 0
    return corpus, out


def test_the_webdataset_package_reads_every_value_that_recordkit_cat_prints(converted, capsys):
    corpus, out = converted
    want = cat_records(capsys, corpus, *STREAMS)
    urls = sorted(str(out / n) for n in os.listdir(out) if n.endswith(".tar"))
    got = list(wds.WebDataset(urls, shardshuffle=False).decode())
    assert [int(s["__key__"]) for s in got] == [r["key"] for r in want]
    for s, r in zip(got, want):
        feat = s["feat.npy"]
        assert feat.dtype == np.float32 and feat.shape == (len(r["feat"]), 4)
        np.testing.assert_array_equal(feat, np.array(r["feat"], dtype=np.float32).reshape(-1, 4))
        ind, val, off = s["lab.indices.npy"], s["lab.values.npy"], s["lab.offsets.npy"]
        assert ind.dtype == np.int32 and val.dtype == np.float32 and off.dtype == np.int64
        samples = [{"indices": ind[a:b].tolist(), "values": val[a:b].tolist()} for a, b in zip(off[:-1], off[1:])]
        assert samples == [{"indices": x["indices"], "values": np.float32(x["values"]).tolist()} for x in r["lab"]]


def test_the_tar_layout_is_what_tarfile_reads(converted):
    _, out = converted
    with tarfile.open(out / "shard-000000.tar") as tf:
        members = tf.getmembers()
        assert members[0].name.endswith(".feat.npy") and members[0].isfile() and members[0].mode == 0o644
        assert [m.name.split(".", 1)[1] for m in members[:4]] == [
            "feat.npy", "lab.indices.npy", "lab.values.npy", "lab.offsets.npy"]
        arr = np.load(io.BytesIO(tf.extractfile(members[0]).read()))
        assert arr.dtype == np.float32 and arr.shape[1] == 4
    # every member's data is padded with zeros to its last block (the writer zeroes only those)
    for shard in sorted(out.glob("*.tar")):
        raw = shard.read_bytes()
        with tarfile.open(shard) as tf:
            for mem in tf.getmembers():
                end = mem.offset_data + mem.size
                assert raw[end:-(-end // 512) * 512] == bytes(-end % 512), (shard.name, mem.name)
    desc = json.loads((out / "__recordkit__.json").read_text())
    assert desc["format"] == "webdataset" and desc["sequences"] == 120
    assert [s["name"] for s in desc["shards"]] == ["shard-000000.tar", "shard-000001.tar", "shard-000002.tar"]
    assert desc["streams"][0] == {"name": "feat", "alias": "F", "format": "dense", "dim": 4, "precision": "float"}


def test_shards_written_by_webdataset_tarwriter_read_with_declared_streams(tmp_path):
    rng = np.random.default_rng(0)
    expect = []
    (tmp_path / "d").mkdir()
    for shard in range(2):
        with wds.TarWriter(str(tmp_path / "d" / f"train-{shard}.tar")) as sink:
            for i in range(5):
                n = int(rng.integers(1, 4))
                x = rng.normal(size=(n, 3)).astype(np.float64)
                ind = rng.integers(0, 9, size=4).astype(np.int32)
                off = np.array([0] + sorted(rng.integers(0, 5, size=n - 1).tolist()) + [4], dtype=np.int64)
                sink.write({"__key__": f"s{shard}_{i}", "x.npy": x, "y.indices.npy": ind,
                            "y.values.npy": rng.normal(size=4).astype(np.float32), "y.offsets.npy": off,
                            "cls": str(i)})
                expect.append((x, ind, off))
    with pytest.raises(FormatError, match="__recordkit__.json"):
        WebDatasetReader(str(tmp_path / "d"))
    r = WebDatasetReader(str(tmp_path / "d"), [StreamSpec("x", "dense", 3), StreamSpec("y", "sparse", 9)],
                         precision="double")
    seqs = list(r)
    assert [s.key for s in seqs] == list(range(10))  # keys that are not numbers: positions
    for s, (x, ind, off) in zip(seqs, expect):
        np.testing.assert_array_equal(s["x"], x)
        np.testing.assert_array_equal(s["y"].indices, ind)
        np.testing.assert_array_equal(s["y"].indptr, off)


def test_records_with_images_are_copied_unchanged(tmp_path, capsys):
    from PIL import Image
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    blobs = []
    for i in range(4):
        buf = io.BytesIO()
        Image.fromarray(np.full((4, 5, 3), i * 40, np.uint8)).save(buf, format="PNG" if i % 2 else "JPEG")
        blobs.append(buf.getvalue())
    with OFRecordWriter(str(tmp_path / "of"), 2) as w:
        for i, blob in enumerate(blobs):
            w.write({"encoded": blob, "class/label": np.array([i], np.int32), "key": np.array([100 + i])})
    out = tmp_path / "wds"
    code, _, err = cli(capsys, "convert", tmp_path / "of", out, "--to", "webdataset", "--image-feature", "encoded")
    assert code == 0, err
    urls = sorted(str(out / n) for n in os.listdir(out) if n.endswith(".tar"))
    got = {int(s["__key__"]): s for s in wds.WebDataset(urls, shardshuffle=False)}
    # OFRecordWriter deals records round robin over 2 parts: part 0 holds 0, 2; part 1 holds 1, 3
    assert sorted(got) == [100, 101, 102, 103]
    for i, blob in enumerate(blobs):
        s = got[100 + i]
        assert s["png" if i % 2 else "jpg"] == blob
        assert np.load(io.BytesIO(s["class_label.npy"])).tolist() == [i]


def test_an_image_feature_that_is_not_an_image_is_a_located_error(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of")) as w:
        w.write({"encoded": b"GIF89a...."})
    code, _, err = cli(capsys, "convert", tmp_path / "of", tmp_path / "w", "--to", "webdataset", "--image-feature",
                       "encoded")
    assert code == 1 and "neither JPEG nor PNG" in err and "record 0" in err
    assert not (tmp_path / "w").exists()


def _small(tmp_path):
    src = tmp_path / "s.ctf"
    src.write_text("1 |a 1 2 |b 0:1\n2 |a 3 4\n3 |a 5 6 |b 1:2 1:3\n")
    out = tmp_path / "w"
    with WebDatasetWriter(str(out), [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 4)]) as w:
        from recordkit.formats.ctf import CTFReader
        for c in CTFReader(str(src), [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 4)]).iter_chunks():
            w.write_chunk(c)
    return out, out / "shard-000000.tar"


def test_a_truncated_shard_is_a_located_error_wherever_it_is_cut(tmp_path):
    out, shard = _small(tmp_path)
    data = shard.read_bytes()
    # every cut that loses data or the first end-of-archive block (a cut inside the second, all
    # zeros, loses nothing: tarfile and GNU tar accept that too)
    for cut in list(range(0, len(data) - 1024, 97)) + [len(data) - 1024, len(data) - 1024 + 511]:
        shard.write_bytes(data[:cut])
        with pytest.raises(FormatError) as e:
            WebDatasetReader(str(out)).load_chunk(0)
        assert e.value.path == str(shard) and e.value.offset is not None


def test_a_damaged_header_is_a_checksum_error(tmp_path):
    out, shard = _small(tmp_path)
    data = bytearray(shard.read_bytes())
    data[1024 + 2] ^= 0x20  # the second member's name (member 1: header + one data block)
    shard.write_bytes(bytes(data))
    with pytest.raises(FormatError, match="checksum mismatch") as e:
        WebDatasetReader(str(out)).load_chunk(0)
    assert e.value.offset == 1024


def test_a_missing_member_names_the_sample_and_the_member(tmp_path):
    out, shard = _small(tmp_path)
    with tarfile.open(shard) as tf:
        members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
    with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tf:
        for m, blob in members:
            if m.name != "2.b.values.npy":
                tf.addfile(m, io.BytesIO(blob))
    with pytest.raises(FormatError, match=r"sample '2' has no member 'b.values.npy'") as e:
        WebDatasetReader(str(out)).load_chunk(0)
    assert e.value.record == "sample 1"


def test_a_wrong_shape_or_bad_offsets_are_located_errors(tmp_path):
    out, shard = _small(tmp_path)
    good = shard.read_bytes()
    for name, arr, match in (("1.a.npy", np.zeros((1, 3), np.float32), r"shape \(1, 3\)"),
                             ("3.b.offsets.npy", np.array([0, 5], np.int64), "offsets must rise"),
                             ("3.b.indices.npy", np.array([1, 9], np.int32), "outside"),
                             ("1.a.npy", np.array([b"x"], dtype=object), "Python objects")):
        shard.write_bytes(good)
        with tarfile.open(shard) as tf:
            members = [(m, tf.extractfile(m).read()) for m in tf.getmembers()]
        with tarfile.open(shard, "w", format=tarfile.USTAR_FORMAT) as tf:
            for m, blob in members:
                if m.name == name:
                    buf = io.BytesIO()
                    np.save(buf, arr, allow_pickle=True)
                    blob = buf.getvalue()
                    m.size = len(blob)
                tf.addfile(m, io.BytesIO(blob))
        with pytest.raises(FormatError, match=match):
            WebDatasetReader(str(out)).load_chunk(0)


def test_random_damage_gives_only_located_errors(tmp_path):
    out, shard = _small(tmp_path)
    good = shard.read_bytes()
    rng = np.random.default_rng(1)
    for _ in range(300):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        shard.write_bytes(bytes(data))
        try:
            WebDatasetReader(str(out)).load_chunk(0)
        except RecordkitError as e:
            assert str(shard) in str(e) or "__recordkit__" in str(e)


def test_a_description_with_a_missing_shard_or_bad_json_is_a_located_error(tmp_path):
    out, shard = _small(tmp_path)
    os.rename(shard, out / "elsewhere.bin")
    with pytest.raises(FormatError, match="missing"):
        WebDatasetReader(str(out))
    (out / "__recordkit__.json").write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        WebDatasetReader(str(out))


def test_the_column_wise_path_and_the_checked_path_give_the_same_chunks(converted, monkeypatch):
    from recordkit.formats.webdataset import tar
    _, out = converted
    fast = [WebDatasetReader(str(out)).load_chunk(i) for i in range(3)]
    monkeypatch.setattr(tar, "scan_fast", lambda data, path: None)
    monkeypatch.setattr(WebDatasetReader, "_columns_fast", lambda self, *a: (None, None))
    slow = [WebDatasetReader(str(out)).load_chunk(i) for i in range(3)]
    for a, b in zip(fast, slow):
        assert a.keys.tolist() == b.keys.tolist() and a.lengths.tolist() == b.lengths.tolist()
        for name in ("feat", "lab"):
            ca, cb = a.columns[name], b.columns[name]
            np.testing.assert_array_equal(ca.values, cb.values)
            np.testing.assert_array_equal(ca.seq_offsets, cb.seq_offsets)
            if name == "lab":
                np.testing.assert_array_equal(ca.indices, cb.indices)
                np.testing.assert_array_equal(ca.indptr, cb.indptr)
