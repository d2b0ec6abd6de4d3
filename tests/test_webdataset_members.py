"""WebDataset shards written by ``webdataset.TarWriter``: streams inferred from the members'
extensions (``.npy`` arrays, ``.cls`` labels, images, text and JSON as bytes streams) and checked
against later samples; ``--stream`` selects and renames."""
import numpy as np
import pytest

from bridge_corpus import cat_records, cli
from recordkit.errors import FormatError
from recordkit.formats.webdataset import WebDatasetReader
from recordkit.formats.webdataset.members import INFER_SAMPLES

wds = pytest.importorskip("webdataset")


def write(path, samples):
    with wds.TarWriter(str(path)) as sink:
        for s in samples:
            sink.write(s)
    return path


def sample(i, **extra):
    return dict({"__key__": f"{i:06d}", "npy": (np.arange(4) * 0.5 + i).astype(np.float32), "cls": i % 10}, **extra)


def test_npy_and_cls_members_read_without_streams_every_value_as_written(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    write(tmp_path / "d" / "train-000000.tar", [sample(i) for i in range(12)])
    write(tmp_path / "d" / "train-000001.tar", [sample(i) for i in range(12, 20)])
    got = cat_records(capsys, tmp_path / "d")
    assert [r["key"] for r in got] == list(range(20))
    for i, r in enumerate(got):
        assert r["npy"] == [(np.arange(4) * 0.5 + i).tolist()] and r["cls"] == [[i % 10]]


def test_a_two_dimensional_npy_is_a_sequence_and_named_fields_name_the_streams(tmp_path, capsys):
    path = write(tmp_path / "s.tar", [{"__key__": f"s{i}", "x.npy": np.full((i + 1, 3), i, np.float64),
                                       "label.cls": 7 - i} for i in range(4)])
    got = cat_records(capsys, path)
    assert [len(r["x"]) for r in got] == [1, 2, 3, 4] and got[3]["x"][2] == [3.0, 3.0, 3.0]
    assert [r["label"] for r in got] == [[[7.0]], [[6.0]], [[5.0]], [[4.0]]]
    code, out, _ = cli(capsys, "inspect", path)
    assert "--stream label=dense:1:label.cls --stream x=dense:3:x.npy" in out


def test_images_text_and_json_read_as_bytes_streams_with_no_stream(tmp_path, capsys):
    jpg = b"\xff\xd8\xff\xe0 not decoded \x00\xfe"
    path = write(tmp_path / "i.tar", [sample(i, jpg=jpg + bytes([i]), txt=f"caption {i} \u00e9",
                                             json={"i": i}) for i in range(3)])
    reader = WebDatasetReader(str(path))
    assert {s.name: (s.format, s.alias) for s in reader.streams} == {
        "cls": ("dense", "cls"), "jpg": ("bytes", "jpg"), "json": ("bytes", "json"), "npy": ("dense", "npy"),
        "txt": ("bytes", "txt")}
    chunk = reader.load_chunk(0)
    assert list(chunk.columns["jpg"].values) == [jpg + bytes([i]) for i in range(3)]  # byte-identical
    assert list(chunk.columns["txt"].values) == [f"caption {i} \u00e9".encode() for i in range(3)]
    import json
    assert [json.loads(v) for v in chunk.columns["json"].values] == [{"i": i} for i in range(3)]
    code, out, _ = cli(capsys, "inspect", path)
    assert "--stream jpg=bytes:1 --stream json=bytes:1" in out
    got = cat_records(capsys, path, "--stream", "label=dense:1:cls", "--stream", "caption=bytes:txt")
    assert got[2] == {"key": 2, "label": [[2.0]], "caption": "caption 2 \u00e9"}


def test_a_bytes_member_missing_from_a_later_sample_is_located(tmp_path):
    samples = [sample(i, txt="t") for i in range(INFER_SAMPLES + 4)]
    del samples[INFER_SAMPLES + 1]["txt"]
    with pytest.raises(FormatError, match="has no member 'txt' .stream 'txt'.") as e:
        WebDatasetReader(str(write(tmp_path / "t.tar", samples))).load_chunk(0)
    assert e.value.record == f"sample {INFER_SAMPLES + 1}"


@pytest.mark.parametrize("change, match", [
    (lambda s: s.pop("cls"), "has no member 'cls'"),
    (lambda s: s.update(npy=np.zeros(5, np.float32)), r"shape \(5,\), expected \(samples, 4\)"),
    (lambda s: s.update(cls="seven"), "not a class label"),
    (lambda s: s.update(txt="late text"), "has member 'txt', which the first samples did not have"),
])
def test_a_sample_after_the_inferring_ones_that_differs_is_a_located_error(tmp_path, change, match):
    samples = [sample(i) for i in range(INFER_SAMPLES + 4)]
    change(samples[INFER_SAMPLES + 1])
    path = write(tmp_path / "t.tar", samples)
    with pytest.raises(FormatError, match=match) as e:
        WebDatasetReader(str(path)).load_chunk(0)
    assert e.value.record == f"sample {INFER_SAMPLES + 1}" and e.value.offset > 0


def test_members_that_vary_in_the_first_samples_are_refused_by_name(tmp_path):
    samples = [sample(i) for i in range(3)]
    samples[1]["npy"] = np.zeros(6, np.float32)
    with pytest.raises(FormatError, match="member 'npy' has dim 4 in sample 0, 6 in sample 1"):
        WebDatasetReader(str(write(tmp_path / "t.tar", samples)))


def test_integer_members_without_an_exact_float_are_refused(tmp_path):
    path = write(tmp_path / "t.tar", [{"__key__": "0", "cls": 2**24 + 1, "ids.npy": np.array([1, 2], np.int64)}])
    with pytest.raises(FormatError, match=r"integer 16777217 has no exact float32.*--precision double") as e:
        WebDatasetReader(str(path)).load_chunk(0)
    assert e.value.record == "sample 0"
    chunk = WebDatasetReader(str(path), precision="double").load_chunk(0)
    assert chunk.columns["cls"].values.ravel().tolist() == [2**24 + 1]
    path = write(tmp_path / "u.tar", [{"__key__": "0", "ids.npy": np.array([1, 2**40 + 1], np.int64)}])
    with pytest.raises(FormatError, match=r"member '0.ids.npy': integer 1099511627777 has no exact float32"):
        WebDatasetReader(str(path)).load_chunk(0)


def test_tarwriter_shards_with_pax_headers_scan_column_wise_as_member_by_member(tmp_path):
    from recordkit.formats.webdataset import tar
    path = write(tmp_path / "p.tar", [sample(i) for i in range(5)])
    data = path.read_bytes()
    assert data[156:157] == b"x"  # TarWriter's float mtime: a pax header before every member
    fast, slow = tar.scan_fast(data, str(path)), tar.scan(data, str(path))
    assert fast is not None
    assert [bytes(n) for n in fast[0]] == slow[0]
    for a, b in zip(fast[1:], slow[1:]):
        assert a.tolist() == b.tolist()
