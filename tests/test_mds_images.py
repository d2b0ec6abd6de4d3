"""OFRecord records with encoded images into MDS feature by feature (``formats/mds/records.py``): the
images as Streaming's ``jpeg`` / ``png`` columns byte for byte, read back by recordkit's MDS reader
and image stage (MosaicML Streaming's own reading: tools/bridge/mds_images_check.py)."""
import io
import json

import numpy as np
import pytest

from bridge_corpus import cat_records, cli
from recordkit.formats.ofrecord.writer import OFRecordWriter
from recordkit.images import ImageStage, open_images

Image = pytest.importorskip("PIL.Image")


def encoded(i, fmt):
    buf = io.BytesIO()
    Image.fromarray(np.full((6 + i, 5, 3), i * 40, np.uint8)).save(buf, format=fmt)
    return buf.getvalue()


JPEGS = [encoded(i, "JPEG") for i in range(4)]
PNGS = [encoded(i, "PNG") for i in range(4)]


def ofrecord(path, records, parts=1):
    with OFRecordWriter(str(path), parts) as w:
        for r in records:
            w.write(r)
    return path


def images_set(tmp_path):
    return ofrecord(tmp_path / "of", [{"photo": j, "mask": p, "note": b"n%d" % i, "class/label": np.array([i], np.int32),
                                       "key": np.array([100 + i])} for i, (j, p) in enumerate(zip(JPEGS, PNGS))])


def b64(data: bytes) -> dict:
    """How ``recordkit cat`` prints a bytes value that is not UTF-8 text."""
    import base64
    return {"base64": base64.b64encode(data).decode()}


def columns(path):
    shard = json.loads((path / "index.json").read_text())["shards"][0]
    return dict(zip(shard["column_names"], shard["column_encodings"]))


def test_jpeg_and_png_features_become_image_columns_read_back_byte_for_byte(tmp_path, capsys):
    out = tmp_path / "m"
    code, _, err = cli(capsys, "convert", images_set(tmp_path), out, "--to", "mds", "--image-feature", "photo",
                       "--image-feature", "mask")
    assert code == 0, err
    assert columns(out) == {"key": "uint64", "photo": "jpeg", "mask": "png", "note": "bytes",
                            "class/label": "ndarray:int32"}
    assert [b for b, _ in open_images(str(out), "photo")] == JPEGS
    assert [b for b, _ in open_images(str(out), "mask")] == PNGS
    assert [b for b, _ in open_images(str(out), "note")] == [b"n%d" % i for i in range(4)]  # bytes, as written
    # the numeric feature of one length and the bytes features are recorded streams: read back with no
    # --stream, keys kept, images byte for byte
    assert cat_records(capsys, out) == [{"key": 100 + i, "class/label": [[float(i)]], "photo": b64(JPEGS[i]),
                                         "mask": b64(PNGS[i]), "note": "n%d" % i} for i in range(4)]


def test_the_image_stage_decodes_the_mds_columns_as_it_decodes_the_source(tmp_path, capsys):
    of = images_set(tmp_path)
    assert cli(capsys, "convert", of, tmp_path / "m", "--to", "mds", "--image-feature", "photo")[0] == 0
    assert columns(tmp_path / "m")["mask"] == "bytes"  # not named an image: kept as bytes
    for feature in ("photo", "mask"):
        want = list(ImageStage(8, seed=2).batches(open_images(str(of), feature), 3))
        got = list(ImageStage(8, seed=2).batches(open_images(str(tmp_path / "m"), feature), 3))
        assert [g.shape for g in got] == [(3, 3, 8, 8), (1, 3, 8, 8)]
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    code, out, err = cli(capsys, "read", tmp_path / "m", "--images", "photo", "--mb-size", "2", "--image-size", "8",
                         "--json")
    assert code == 0, err
    assert json.loads(out)["images"] == 4


def test_a_set_without_numeric_features_converts_and_its_image_columns_read(tmp_path, capsys):
    of = ofrecord(tmp_path / "of", [{"photo": j} for j in JPEGS], parts=2)
    assert cli(capsys, "convert", of, tmp_path / "m", "--to", "mds", "--image-feature", "photo")[0] == 0
    index = json.loads((tmp_path / "m" / "index.json").read_text())
    assert [(s["name"], s["format"]) for s in index["recordkit"]["streams"]] == [("photo", "bytes")]
    # the records in part order, keyed by their position
    assert sorted(b for b, _ in open_images(str(tmp_path / "m"), "photo")) == sorted(JPEGS)


@pytest.mark.parametrize("records, message", [
    ([{"photo": JPEGS[0]}, {"photo": b"GIF89a...."}], "image feature 'photo' value 0 is neither JPEG nor PNG"),
    ([{"photo": JPEGS[0]}, {"photo": PNGS[1]}], r"the record's columns \(photo png\) differ from the first "
                                                r"record's \(photo jpeg\)"),
    ([{"photo": JPEGS[0], "n": b"a"}, {"photo": JPEGS[1]}], r"the record's columns \(photo jpeg\) differ"),
    ([{"photo": JPEGS[0]}, {"photo": [JPEGS[1], JPEGS[2]]}], "feature 'photo' holds 2 values: an MDS column "
                                                            "holds one value a sample"),
    ([{"photo": JPEGS[0], "key": b"k"}], "'key' is the MDS column of the record's key"),
])
def test_records_an_mds_column_cannot_hold_are_located_errors_and_write_nothing(tmp_path, capsys, records, message):
    of = ofrecord(tmp_path / "of", records)
    code, _, err = cli(capsys, "convert", of, tmp_path / "m", "--to", "mds", "--image-feature", "photo")
    assert code == 1
    assert err.startswith(f"recordkit: error: {of / 'part-00000'}: ") and "byte offset" in err
    assert f"record {len(records) - 1})" in err
    import re
    assert re.search(message, err), err
    assert not (tmp_path / "m").exists() and [p.name for p in tmp_path.iterdir()] == ["of"]


def test_records_read_as_the_mds_reader_checks_them(tmp_path, capsys):
    from recordkit.formats.mds import MDSReader
    out = tmp_path / "m"
    assert cli(capsys, "convert", images_set(tmp_path), out, "--to", "mds", "--image-feature", "photo",
               "--shard-size", "700")[0] == 0
    reader = MDSReader(str(out))
    assert len(reader.chunks) > 1 and sum(c.num_sequences for c in reader.chunks) == 4
    assert cli(capsys, "validate", out)[0] == 0


# --------------------------------------------------------------------------- WebDataset samples into MDS


def tar_shard(path, samples):
    """A WebDataset shard as webdataset.TarWriter writes one: members KEY.FIELD in sample order."""
    import tarfile
    with tarfile.open(path, "w") as tf:
        for key, members in samples:
            for field, data in members.items():
                info = tarfile.TarInfo(f"{key}.{field}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return path


def test_recordkit_webdataset_images_convert_to_mds_image_columns_byte_for_byte(tmp_path, capsys):
    of = images_set(tmp_path)
    assert cli(capsys, "convert", of, tmp_path / "w", "--to", "webdataset", "--image-feature", "photo")[0] == 0
    # the WebDataset's image and bytes members are recorded streams: recordkit reads them all back
    assert cat_records(capsys, tmp_path / "w") == [{"key": 100 + i, "class_label": [[float(i)]], "jpg": b64(JPEGS[i]),
                                                    "mask": b64(PNGS[i]), "note": "n%d" % i} for i in range(4)]
    code, _, err = cli(capsys, "convert", tmp_path / "w", tmp_path / "m", "--to", "mds")
    assert code == 0, err
    assert columns(tmp_path / "m") == {"key": "uint64", "jpg": "jpeg", "mask.bin": "bytes", "note.bin": "bytes",
                                       "class_label": "ndarray:int32"}
    assert [b for b, _ in open_images(str(tmp_path / "m"), "jpg")] == JPEGS
    assert [b for b, _ in open_images(str(tmp_path / "m"), "mask.bin")] == PNGS
    # the WebDataset's recorded stream and the records' own keys carry over
    assert cat_records(capsys, tmp_path / "m") == [{"key": 100 + i, "class_label": [[float(i)]], "jpg": b64(JPEGS[i]),
                                                    "mask.bin": b64(PNGS[i]), "note.bin": "n%d" % i} for i in range(4)]
    want = list(ImageStage(8, seed=2).batches(open_images(str(of), "photo"), 3))
    got = list(ImageStage(8, seed=2).batches(open_images(str(tmp_path / "m"), "jpg"), 3))
    assert len(got) == 2 and all(a.tobytes() == b.tobytes() for a, b in zip(got, want))


def test_tarwriter_shards_with_images_and_labels_convert_to_mds(tmp_path, capsys):
    shard = tar_shard(tmp_path / "s.tar", [(f"{i:06d}", {"jpg": JPEGS[i], "png": PNGS[i], "cls": b"%d" % (i % 2),
                                                          "txt": b"caption %d" % i}) for i in range(4)])
    code, _, err = cli(capsys, "convert", shard, tmp_path / "m", "--to", "mds")
    assert code == 0, err
    assert columns(tmp_path / "m") == {"key": "uint64", "jpg": "jpeg", "png": "png", "cls": "ndarray:int64",
                                       "txt": "bytes"}
    assert [b for b, _ in open_images(str(tmp_path / "m"), "jpg")] == JPEGS
    assert [b for b, _ in open_images(str(tmp_path / "m"), "png")] == PNGS
    assert cat_records(capsys, tmp_path / "m") == [{"key": i, "cls": [[float(i % 2)]], "jpg": b64(JPEGS[i]),
                                                    "png": b64(PNGS[i]), "txt": "caption %d" % i} for i in range(4)]


@pytest.mark.parametrize("second, message", [
    ({"jpg": b"GIF89a....", "cls": b"1"}, "image 'jpg' is neither JPEG nor PNG"),
    ({"jpg": JPEGS[1]}, r"the record's columns \(jpg jpeg\) differ from the first record's \(cls ndarray:int64, "
                        r"jpg jpeg\)"),
    ({"jpg": JPEGS[1], "cls": b"one"}, "member 'cls': b'one' is not an integer"),
])
def test_samples_an_mds_column_cannot_hold_are_located_errors(tmp_path, capsys, second, message):
    import re
    shard = tar_shard(tmp_path / "s.tar", [("000000", {"jpg": JPEGS[0], "cls": b"0"}), ("000001", second)])
    code, _, err = cli(capsys, "convert", shard, tmp_path / "m", "--to", "mds")
    assert code == 1 and err.startswith(f"recordkit: error: {shard}: ") and err.endswith("sample 1)\n"), err
    import tarfile
    first_of_sample_1 = tarfile.open(shard).getmembers()[2].offset  # its first member's header
    assert f"byte offset {first_of_sample_1}, " in err and re.search(message, err), err
    assert not (tmp_path / "m").exists()
