"""``recordkit.images.ImageStage``: decode -> random-resized-crop -> flip -> normalize for a batch of
encoded images from any reader, seeded, its random state carried by a checkpoint."""
from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("PIL")
cv2 = pytest.importorskip("cv2")
from PIL import Image  # noqa: E402

from recordkit.errors import FormatError  # noqa: E402
from recordkit.images import ImageStage, pool  # noqa: E402


def encoded(h, w, seed=0, fmt="JPEG"):
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    a = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), (xx * 7 + yy) % 256], axis=2)
    a = np.clip(a + rng.integers(-10, 10, a.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, fmt)
    return buf.getvalue()


BLOBS = [encoded(40 + 4 * i, 60 - 2 * i, seed=i, fmt="PNG" if i % 3 == 0 else "JPEG") for i in range(7)]


def test_a_batch_becomes_one_normalized_nchw_array():
    mean, std = np.float32([120, 110, 100]), np.float32([60, 50, 40])
    out = ImageStage(16, mean=mean, std=std, seed=0)(BLOBS)
    pixels = ImageStage(16, dtype="uint8", seed=0)(BLOBS)
    assert out.shape == pixels.shape == (7, 3, 16, 16) and out.dtype == np.float32 and pixels.dtype == np.uint8
    expect = (pixels.astype(np.float32) - mean[:, None, None]) * (np.float32(1) / std)[:, None, None]
    assert out.tobytes() == expect.tobytes()
    assert len({p.tobytes() for p in pixels}) == 7


def test_without_crop_the_whole_image_is_resized_as_opencv_does():
    stage = ImageStage(16, crop=False, dtype="uint8", layout="NHWC", seed=0)
    out = stage(BLOBS[:1])
    rgb = cv2.imdecode(np.frombuffer(BLOBS[0], np.uint8), cv2.IMREAD_COLOR)[:, :, ::-1]
    assert out[0].tobytes() == cv2.resize(rgb, (16, 16), interpolation=cv2.INTER_AREA).tobytes()


def test_the_same_seed_gives_the_same_batches_whatever_the_threads(monkeypatch):
    monkeypatch.setattr(pool, "THREADS", 1)
    one = list(ImageStage(12, seed=5).batches(BLOBS * 2, 4, prefetch=False))
    monkeypatch.setattr(pool, "THREADS", 2)
    two = list(ImageStage(12, seed=5).batches(BLOBS * 2, 4))
    assert [b.shape[0] for b in one] == [4, 4, 4, 2]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(one, two))
    assert one[0].tobytes() != one[1].tobytes()
    assert ImageStage(12, seed=6)(BLOBS[:4]).tobytes() != one[0].tobytes()


def test_a_checkpoint_taken_between_batches_resumes_the_same_random_draws():
    stage = ImageStage(12, seed=9)
    it = stage.batches(BLOBS * 2, 4)  # prepares the next batch ahead: the state is still the next one's
    first = next(it)
    state = stage.state_dict()
    rest = list(it)
    resumed = ImageStage(12, seed=1)
    resumed.load_state_dict(state)
    again = list(resumed.batches((BLOBS * 2)[4:], 4))
    assert first.shape[0] == 4 and len(rest) == len(again) == 3
    assert all(a.tobytes() == b.tobytes() for a, b in zip(rest, again))


@pytest.mark.parametrize("state", [None, {}, {"rng": {"bit_generator": "MT19937"}},
                                   {"rng": {"bit_generator": "PCG64", "state": {"state": -1, "inc": 1},
                                            "has_uint32": 0, "uinteger": 0}}])
def test_a_malformed_checkpoint_is_refused(state):
    with pytest.raises(ValueError, match="image stage state"):
        ImageStage(8).load_state_dict(state)


def test_a_bad_image_is_a_located_error_and_bombs_are_refused_unread():
    with pytest.raises(FormatError, match=r"^shard-3.tar member 000002.jpg: cannot decode"):
        ImageStage(8)([BLOBS[1], b"junk"], where=["shard-3.tar member 000001.jpg", "shard-3.tar member 000002.jpg"])
    truncated = BLOBS[1][: len(BLOBS[1]) // 2]
    with pytest.raises(FormatError, match=r"^image 1 of the batch: "):
        ImageStage(8)([BLOBS[1], truncated])
    with pytest.raises(FormatError, match=r"more than the limit of 100"):
        ImageStage(8, max_pixels=100)(BLOBS[:1])


def test_large_jpegs_are_decoded_at_reduced_scale_unless_turned_off(monkeypatch):
    from recordkit.images import codec
    scales = []
    real = codec.reduced_scale

    def spy(*a):
        scales.append(real(*a))
        return scales[-1]

    monkeypatch.setattr(codec, "reduced_scale", spy)
    big = [encoded(256, 320, seed=1)]
    ImageStage(16, scale=(0.5, 1.0), seed=0)(big)
    assert scales and scales[-1] >= 4
    scales.clear()
    ImageStage(16, scale=(0.5, 1.0), seed=0, reduced=False)(big)
    assert scales == []


def test_the_stage_resizes_the_crop_from_a_view_of_the_decoded_image(monkeypatch):
    from recordkit.images import codec
    seen = []
    real = codec.resize_image

    def spy(image, *a, **kw):
        seen.append(image)
        return real(image, *a, **kw)

    monkeypatch.setattr(codec, "resize_image", spy)
    stage = ImageStage(16, scale=(0.2, 0.3), dtype="uint8", seed=0)
    out = stage(BLOBS[1:3])
    assert seen and all(not im.flags.c_contiguous and im.base is not None for im in seen)
    pixels = [codec.decode_image(b, "RGB", window=(0, 0, 20, 30)) for b in BLOBS[1:3]]
    view = [codec.decode_image(b, "RGB", window=(0, 0, 20, 30), contiguous=False) for b in BLOBS[1:3]]
    assert all(p.flags.c_contiguous and p.tobytes() == np.ascontiguousarray(v).tobytes() for p, v in zip(pixels, view))
    monkeypatch.setattr(codec, "resize_image", real)
    assert out.tobytes() == ImageStage(16, scale=(0.2, 0.3), dtype="uint8", seed=0)(BLOBS[1:3]).tobytes()


def test_a_batch_nothing_holds_any_more_is_written_again_and_a_held_one_never(monkeypatch):
    monkeypatch.setattr(pool, "THREADS", 1)
    expect = [b.copy() for b in ImageStage(12, seed=3).batches(BLOBS * 3, 3, prefetch=False)]
    stage = ImageStage(12, seed=3)
    made = []
    real_empty = np.empty

    def empty(shape, *a, **kw):
        made.append(shape == (3, 3, 12, 12))
        return real_empty(shape, *a, **kw)

    monkeypatch.setattr(np, "empty", empty)
    kept = {}
    for k, b in enumerate(stage.batches(BLOBS * 3, 3)):
        if k == 0:
            kept["view"] = b[1:]
        elif k == 2:
            kept["array"] = b
        assert b.tobytes() == expect[k].tobytes()
    assert 3 <= sum(made) < 7  # 7 batches, 2 held by the caller: the dropped ones were written again
    assert kept["view"].tobytes() == expect[0][1:].tobytes()
    assert kept["array"].tobytes() == expect[2].tobytes()
    first = stage(BLOBS[:3])
    again = stage(BLOBS[:3])
    assert first.ctypes.data != again.ctypes.data  # the caller holds the first: a new array
    import pickle
    copy = pickle.loads(pickle.dumps(stage))  # the kept batches are not part of a copy
    assert copy._spares.items == [] and copy(BLOBS[:3]).tobytes() == stage(BLOBS[:3]).tobytes()


@pytest.mark.parametrize("kw, msg", [(dict(size=0), "size must be"), (dict(flip=2), "flip must be"),
                                     (dict(layout="CHW"), "layout must be"), (dict(dtype="int8"), "dtype must be"),
                                     (dict(std=[1, 0, 1]), "std must not be 0"), (dict(mean=[1, 2]), "mean must have"),
                                     (dict(scale=(0.5, 0.1)), "random_area")])
def test_bad_settings_are_refused(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ImageStage(**{"size": 8, **kw})


# --------------------------------------------------------------------------- from OFRecord and WebDataset


def _ofrecord(directory, blobs):
    import struct

    from recordkit.compat.oneflow import record_pb2 as pb
    directory.mkdir()
    with open(directory / "part-0", "wb") as f:
        for b in blobs:
            data = pb.OFRecord(feature={"jpg": pb.Feature(bytes_list=pb.BytesList(value=[b])),
                                        "label": pb.Feature(int64_list=pb.Int64List(value=[1]))}).SerializeToString()
            f.write(struct.pack("q", len(data)) + data)
    return str(directory)


PNG = b"\x89PNG"


def _webdataset(path, blobs):
    import tarfile
    with tarfile.open(path, "w") as tf:
        for i, b in enumerate(blobs):
            ext = "png" if b.startswith(PNG) else "jpg"
            for name, data in ((f"{i:06d}.{ext}", b), (f"{i:06d}.cls", b"3")):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return str(path)


def test_ofrecord_and_webdataset_images_go_through_the_same_stage(tmp_path):
    from recordkit.formats.ofrecord.images import encoded_images as ofrecord_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    of = list(ImageStage(12, seed=3).batches(ofrecord_images(_ofrecord(tmp_path / "of", BLOBS), "jpg"), 3))
    wds = list(ImageStage(12, seed=3).batches(webdataset_images(_webdataset(tmp_path / "s.tar", BLOBS)), 3))
    assert [b.shape for b in of] == [(3, 3, 12, 12), (3, 3, 12, 12), (1, 3, 12, 12)]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(of, wds))


def test_a_bad_image_in_a_data_set_names_its_file_and_record_or_member(tmp_path):
    from recordkit.formats.ofrecord.images import encoded_images as ofrecord_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    blobs = [BLOBS[1], BLOBS[2][:300]]
    with pytest.raises(FormatError, match=r"part-0: cannot decode .* \(record 1\)"):
        list(ImageStage(8).batches(ofrecord_images(_ofrecord(tmp_path / "of", blobs), "jpg"), 2))
    with pytest.raises(FormatError, match=r"s.tar: .* \(member 000001.jpg\)"):
        list(ImageStage(8).batches(webdataset_images(_webdataset(tmp_path / "s.tar", blobs)), 2))
    with pytest.raises(FormatError, match=r"feature 'label' is a int64_list, the image stage needs a bytes_list"):
        list(ofrecord_images(str(tmp_path / "of"), "label"))


def _tfrecord(path, blobs, feature="image/encoded"):
    from recordkit.formats.tfrecord import framing
    from recordkit.formats.tfrecord.schema import Example
    enc = framing.FrameEncoder()
    with open(path, "wb") as f:
        for b in blobs:
            msg = Example()
            msg.features.feature[feature].bytes_list.value.append(b)
            msg.features.feature["label"].int64_list.value.append(1)
            f.write(enc.frame(msg.SerializeToString()))
    return str(path)


def test_tfrecord_images_go_through_the_same_stage_with_located_errors(tmp_path):
    from recordkit.formats.tfrecord.images import encoded_images as tfrecord_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    tf = list(ImageStage(12, seed=3).batches(tfrecord_images(_tfrecord(tmp_path / "a.tfrecord", BLOBS)), 3))
    wds = list(ImageStage(12, seed=3).batches(webdataset_images(_webdataset(tmp_path / "s.tar", BLOBS)), 3))
    assert len(tf) == 3 and all(a.tobytes() == b.tobytes() for a, b in zip(tf, wds))
    bad = _tfrecord(tmp_path / "b.tfrecord", [BLOBS[1], b"junk"])
    with pytest.raises(FormatError, match=r"b.tfrecord: cannot decode image .*\(record 1\)"):
        list(ImageStage(8).batches(tfrecord_images(bad), 2))
    with pytest.raises(FormatError, match=r"feature 'label' must be one bytes value .*\(byte offset 0, record 0\)"):
        list(tfrecord_images(bad, "label"))


def test_parquet_binary_and_hf_image_columns_go_through_the_same_stage(tmp_path):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    from recordkit.formats.parquet.images import encoded_images as parquet_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    images = pa.array([{"bytes": b, "path": None} for b in BLOBS],
                      pa.struct([("bytes", pa.binary()), ("path", pa.string())]))
    pq.write_table(pa.table({"jpg": pa.array(BLOBS, pa.binary()), "image": images, "label": list(range(7))}),
                   tmp_path / "t.parquet")
    wds = list(ImageStage(12, seed=3).batches(webdataset_images(_webdataset(tmp_path / "s.tar", BLOBS)), 3))
    for column in ("jpg", "image"):
        got = list(ImageStage(12, seed=3).batches(parquet_images(str(tmp_path / "t.parquet"), column, batch_rows=2), 3))
        assert len(got) == 3 and all(a.tobytes() == b.tobytes() for a, b in zip(got, wds))
    with pytest.raises(FormatError, match=r"column 'label' is int64, the image stage needs binary data"):
        list(parquet_images(str(tmp_path / "t.parquet"), "label"))
    pq.write_table(pa.table({"jpg": pa.array([BLOBS[1], None], pa.binary())}), tmp_path / "n.parquet")
    with pytest.raises(FormatError, match=r"n.parquet: column 'jpg' has no image bytes \(row 1\)"):
        list(parquet_images(str(tmp_path / "n.parquet"), "jpg"))


# --------------------------------------------------------------------------- any format, and the command line


def test_open_images_tells_the_format_from_the_path(tmp_path):
    from recordkit.images import open_images
    from recordkit.errors import UsageError
    shard = _webdataset(tmp_path / "s.tar", BLOBS[:3])
    of = _ofrecord(tmp_path / "of", BLOBS[:3])
    assert [w for _, w in open_images(shard, "jpg,png")] == [(shard, f"member 00000{i}.{e}")
                                                              for i, e in enumerate(("png", "jpg", "jpg"))]
    assert [w for _, w in open_images(of, "jpg")] == [(str(tmp_path / "of" / "part-0"), f"record {i}")
                                                       for i in range(3)]
    (tmp_path / "x.ctf").write_text("|a 1\n")
    with pytest.raises(UsageError, match="recordkit reads no images from ctf data"):
        open_images(str(tmp_path / "x.ctf"), "a")


def _cli(*args):
    import os
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ))


def test_read_images_runs_the_stage_over_a_data_set(tmp_path):
    import json
    shard = _webdataset(tmp_path / "s.tar", BLOBS)
    out = _cli("read", shard, "--images", "jpg,png", "--mb-size", "3", "--image-size", "32", "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert (got["images"], got["batches"], got["image_shape"]) == (7, 3, [3, 32, 32])
    bad = _ofrecord(tmp_path / "of", [BLOBS[1], b"junk"])
    out = _cli("read", bad, "--images", "jpg", "--mb-size", "2")
    assert out.returncode != 0
    assert out.stderr.startswith(f"recordkit: error: {tmp_path / 'of' / 'part-0'}: cannot decode image (4 bytes): "
                                 "not an image in any format recordkit decodes (JPEG, "), out.stderr
    assert out.stderr.endswith("(record 1)\n") and out.stderr.count("\n") == 1, out.stderr


def test_hf_save_to_disk_image_columns_go_through_the_same_stage(tmp_path):
    datasets = pytest.importorskip("datasets")
    from recordkit.images import open_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    features = datasets.Features({"image": datasets.Image(), "label": datasets.Value("int64")})
    ds = datasets.Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in BLOBS],
                                     "label": list(range(7))}, features=features)
    ds.save_to_disk(str(tmp_path / "hf"))
    got = list(ImageStage(12, seed=3).batches(open_images(str(tmp_path / "hf"), "image"), 3))
    wds = list(ImageStage(12, seed=3).batches(webdataset_images(_webdataset(tmp_path / "s.tar", BLOBS)), 3))
    assert len(got) == 3 and all(a.tobytes() == b.tobytes() for a, b in zip(got, wds))
    first = next(iter(open_images(str(tmp_path / "hf"), "image")))[1]
    assert first[0].endswith(".arrow") and first[1] == "row 0"
    with pytest.raises(FormatError, match=r"column 'label' is int64"):
        next(iter(open_images(str(tmp_path / "hf"), "label")))


def _mds(directory, blobs, encoding="jpeg"):
    import json
    import struct
    directory.mkdir()
    rows = [struct.pack("<I", len(b)) + b + struct.pack("<q", i) for i, b in enumerate(blobs)]
    head = 4 + 4 * (len(rows) + 1)
    offs = [head]
    for r in rows:
        offs.append(offs[-1] + len(r))
    data = struct.pack("<I", len(rows)) + struct.pack(f"<{len(offs)}I", *offs) + b"".join(rows)
    (directory / "shard.00000.mds").write_bytes(data)
    shard = {"column_encodings": [encoding, "int64"], "column_names": ["image", "label"], "column_sizes": [None, 8],
             "compression": None, "format": "mds", "hashes": [], "samples": len(rows), "size_limit": 1 << 26,
             "version": 2, "raw_data": {"basename": "shard.00000.mds", "bytes": len(data), "hashes": {}},
             "zip_data": None}
    (directory / "index.json").write_text(json.dumps({"version": 2, "shards": [shard]}))
    return str(directory)


def test_mds_image_columns_go_through_the_same_stage(tmp_path):
    from recordkit.images import open_images
    from recordkit.formats.webdataset.images import encoded_images as webdataset_images
    got = list(ImageStage(12, seed=3).batches(open_images(_mds(tmp_path / "mds", BLOBS), "image"), 3))
    wds = list(ImageStage(12, seed=3).batches(webdataset_images(_webdataset(tmp_path / "s.tar", BLOBS)), 3))
    assert len(got) == 3 and all(a.tobytes() == b.tobytes() for a, b in zip(got, wds))
    with pytest.raises(FormatError, match=r"shard.00000.mds: cannot decode image .*\(sample 1\)"):
        list(ImageStage(8).batches(open_images(_mds(tmp_path / "bad", [BLOBS[1], b"junk"]), "image"), 2))
    with pytest.raises(FormatError, match=r"column 'label' is encoded 'int64', the image stage needs one of jpeg"):
        next(iter(open_images(str(tmp_path / "mds"), "label")))
