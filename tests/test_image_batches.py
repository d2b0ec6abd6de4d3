"""A batch's images on every core (``recordkit.images.pool``), and JPEGs decoded at a reduced scale
where the crop still covers the wanted size (``cover=``)."""
from __future__ import annotations

import io
import threading
import time

import numpy as np
import pytest

pytest.importorskip("PIL")
cv2 = pytest.importorskip("cv2")
from PIL import Image  # noqa: E402

from recordkit.compat.oneflow import ops  # noqa: E402
from recordkit.compat.oneflow.ops import image as img  # noqa: E402
from recordkit.errors import FormatError  # noqa: E402
from recordkit.formats.ofrecord.codec import Feature  # noqa: E402
from recordkit.images import pool  # noqa: E402


def jpeg(h, w, seed=0, quality=90):
    yy, xx = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(seed)
    a = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1), (xx + yy) % 256], axis=2)
    a = np.clip(a + rng.integers(-8, 8, a.shape), 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "JPEG", quality=quality)
    return buf.getvalue()


def records(*blobs):
    return [{"e": Feature("bytes_list", [b])} for b in blobs]


@pytest.fixture
def two_threads(monkeypatch):
    monkeypatch.setattr(pool, "THREADS", 2)


def test_a_batch_of_images_is_decoded_on_several_threads(two_threads, monkeypatch):
    seen = set()
    real = img.decode_image

    def spy(*a, **kw):
        seen.add(threading.get_ident())
        time.sleep(0.02)  # long enough for the second thread to take images too
        return real(*a, **kw)

    monkeypatch.setattr(img, "decode_image", spy)
    out = ops.image_decode(records(*[jpeg(16, 24, seed=i) for i in range(6)]), "e", "RGB")
    assert len(seen) == 2
    assert [o.shape for o in out] == [(16, 24, 3)] * 6


def test_the_first_bad_record_of_a_batch_is_reported_whatever_the_threads_finish_first(two_threads):
    good = jpeg(16, 16)
    batch = records(good, good, b"not an image", good, good[: len(good) // 2], good)
    for _ in range(5):
        with pytest.raises(FormatError, match=r"\(record 2\)"):
            ops.image_decode(batch, "e", "BGR")


def test_parallel_for_runs_every_index_once_and_raises_the_lowest_failure(two_threads):
    done = []

    def fn(i):
        done.append(i)
        if i in (3, 7):
            raise KeyError(i)

    with pytest.raises(KeyError) as info:
        pool.parallel_for(10, fn)
    assert info.value.args == (3,)
    assert sorted(done) == list(range(10))


def test_pool_threads_setting_is_checked(monkeypatch):
    monkeypatch.setattr(pool, "THREADS", 0)
    with pytest.raises(ValueError, match="THREADS must be a positive int"):
        pool.parallel_for(2, lambda i: None)


def test_batch_ops_on_several_threads_equal_one_thread(monkeypatch):
    batch = records(*[jpeg(40 + 3 * i, 50 + 2 * i, seed=i) for i in range(5)])

    def run():
        ims = ops.image_decode(batch, "e", "RGB")
        dense, _, _ = ops.resize(ims, (32, 24))
        kept, _, _ = ops.resize(ims, 20, keep_aspect_ratio=True, interpolation_type="bicubic")
        cmn = ops.crop_mirror_normalize(dense, crop_h=20, crop_w=30, mean=[1, 2, 3], std=[2, 3, 4],
                                        mirror=[1, 0, 1, 0, 1])
        cmn_hwc = ops.crop_mirror_normalize(kept, crop_h=20, crop_w=20, output_layout="NHWC", mirror=[0, 1, 0, 1, 1])
        crops = ops.image_decode_random_crop(batch, "e", "RGB", random_seed=5)
        return [dense, cmn, cmn_hwc, *kept, *crops]

    monkeypatch.setattr(pool, "THREADS", 1)
    one = run()
    monkeypatch.setattr(pool, "THREADS", 2)
    two = run()
    assert len(one) == len(two)
    for a, b in zip(one, two):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def test_resize_leaves_the_calling_threads_ipp_setting_alone():
    im = np.zeros((10, 12, 3), np.uint8)
    before = cv2.ipp.useIPP()
    try:
        for setting in (True, False):
            cv2.ipp.setUseIPP(setting)
            img.resize_image(im, 7, 5, "BICUBIC")
            assert cv2.ipp.useIPP() == setting
    finally:
        cv2.ipp.setUseIPP(before)


# --------------------------------------------------------------------------- reduced-scale decoding


def test_a_jpeg_is_decoded_at_the_smallest_scale_that_still_covers_the_wanted_size():
    data = jpeg(400, 480)
    full = img.decode_image(data, "BGR")
    assert full.shape == (400, 480, 3)
    assert img.decode_image(data, "BGR", cover=(100, 100)).shape == (100, 120, 3)   # 1/4
    assert img.decode_image(data, "BGR", cover=(101, 100)).shape == (200, 240, 3)   # 1/2
    assert img.decode_image(data, "BGR", cover=(201, 100)).shape == (400, 480, 3)   # full
    assert img.decode_image(data, "GRAY", cover=(50, 60)).shape == (50, 60, 1)     # 1/8
    reduced = img.decode_image(data, "RGB", cover=(100, 100))
    expect = cv2.resize(full[:, :, ::-1], (120, 100), interpolation=cv2.INTER_AREA)
    assert np.abs(reduced.astype(int) - expect).mean() < 3


def test_a_window_is_decoded_at_reduced_scale_only_while_it_covers_the_wanted_size():
    data = jpeg(400, 480)
    win = (40, 80, 240, 320)  # y, x, h, w: 1/2 gives 120x160, 1/4 60x80
    assert img.decode_image(data, "BGR", window=win, cover=(100, 100)).shape == (120, 160, 3)
    assert img.decode_image(data, "BGR", window=win, cover=(50, 80)).shape == (60, 80, 3)
    assert img.decode_image(data, "BGR", window=win, cover=(121, 100)).shape == (240, 320, 3)
    exact = img.decode_image(data, "BGR", window=win)
    assert exact.tobytes() == img.decode_image(data, "BGR")[40:280, 80:400].tobytes()


def test_png_is_always_decoded_at_full_scale():
    buf = io.BytesIO()
    Image.fromarray(np.zeros((64, 64, 3), np.uint8)).save(buf, "PNG")
    assert img.decode_image(buf.getvalue(), "BGR", cover=(8, 8)).shape == (64, 64, 3)


def test_random_crop_decoder_decodes_less_only_when_asked():
    batch = records(*[jpeg(400, 480, seed=i) for i in range(4)])
    full = ops.image_decode_random_crop(batch, "e", "RGB", random_seed=3, random_area=(0.9, 1.0))
    small = ops.image_decode_random_crop(batch, "e", "RGB", random_seed=3, random_area=(0.9, 1.0), cover=(64, 64))
    for f, s in zip(full, small):
        assert f.shape[0] >= 360 and s.shape[0] * 4 in range(f.shape[0], f.shape[0] + 8)
        assert min(s.shape[:2]) >= 64
    with pytest.raises(ValueError, match="cover must be a"):
        ops.image_decode_random_crop(batch, "e", random_seed=3, cover=(0, 64))


# --------------------------------------------------------------------------- the next batch, prepared ahead


def _image_parts(directory, n=12):
    import struct as _struct

    from recordkit.compat.oneflow import record_pb2 as pb
    directory.mkdir()
    with open(directory / "part-0", "wb") as f:
        for i in range(n):
            rec = pb.OFRecord(feature={"e": pb.Feature(bytes_list=pb.BytesList(value=[jpeg(24 + i, 30, seed=i)]))})
            data = rec.SerializeToString()
            f.write(_struct.pack("q", len(data)) + data)
    return str(directory)


def test_the_readers_next_batch_is_decoded_while_the_caller_uses_this_one(tmp_path, monkeypatch):
    import recordkit.compat.oneflow as flow
    threads = []
    real = img.decode_image

    def spy(*a, **kw):
        threads.append(threading.current_thread().name)
        return real(*a, **kw)

    monkeypatch.setattr(pool, "THREADS", 1)
    monkeypatch.setattr(img, "decode_image", spy)
    reader = flow.nn.OFRecordReader(_image_parts(tmp_path / "d"), batch_size=4)
    decode = flow.nn.OFRecordImageDecoder("e", "RGB")
    first = decode(reader()).numpy()
    deadline = time.monotonic() + 10
    while len(threads) < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(threads) == 8 and all(t.startswith("recordkit-images-ahead") for t in threads[4:]), threads
    second = decode(reader()).numpy()
    assert [a.shape[0] for a in first + second] == list(range(24, 32))
    assert all(t.startswith("recordkit-images-ahead") for t in threads[4:8])


def test_random_crops_prepared_ahead_are_the_crops_of_one_batch_at_a_time(tmp_path):
    import recordkit.compat.oneflow as flow
    data = _image_parts(tmp_path / "d")

    def crops(prefetch):
        reader = flow.nn.OFRecordReader(data, batch_size=4)
        decode = flow.nn.OFRecordImageDecoderRandomCrop("e", "RGB", random_seed=11, prefetch=prefetch)
        out = []
        for step in range(5):
            batch = reader()
            if step == 2:  # a batch out of the reader's order: the one prepared ahead is dropped, its draws undone
                out += decode(batch[1:3]).numpy()
            out += decode(batch).numpy()
        return out

    ahead, plain = crops(True), crops(False)
    assert len(ahead) == len(plain) == 22
    assert len({a.shape for a in plain}) > 3
    for a, b in zip(ahead, plain):
        assert a.shape == b.shape and a.tobytes() == b.tobytes()


def test_an_error_in_a_batch_prepared_ahead_is_raised_when_that_batch_is_asked_for(tmp_path):
    import struct as _struct

    import recordkit.compat.oneflow as flow
    from recordkit.compat.oneflow import record_pb2 as pb
    d = tmp_path / "d"
    d.mkdir()
    with open(d / "part-0", "wb") as f:
        for i in range(4):
            blob = jpeg(16, 16) if i != 2 else b"broken"
            data = pb.OFRecord(feature={"e": pb.Feature(bytes_list=pb.BytesList(value=[blob]))}).SerializeToString()
            f.write(_struct.pack("q", len(data)) + data)
    reader = flow.nn.OFRecordReader(str(d), batch_size=2)
    decode = flow.nn.OFRecordImageDecoder("e")
    assert len(decode(reader()).numpy()) == 2  # the broken record is in the batch prepared ahead
    with pytest.raises(FormatError, match=r"cannot decode image .*\(record 2\)"):
        decode(reader())


def test_one_generator_shared_by_every_slot_draws_in_record_order(monkeypatch):
    blobs = [jpeg(40, 50, seed=i) for i in range(6)]
    batch = records(*blobs)
    real = img.decode_image

    def slow_first(data, *a, **kw):
        if data == blobs[0]:
            time.sleep(0.05)  # on several threads, image 1 would draw from the shared generator first
        return real(data, *a, **kw)

    def crops():
        got = ops.image_decode_random_crop(batch, "e", random_seed=[np.random.default_rng(7)] * 6)
        return [a.tobytes() for a in got]

    monkeypatch.setattr(pool, "THREADS", 1)
    serial = crops()
    monkeypatch.setattr(pool, "THREADS", 2)
    monkeypatch.setattr(img, "decode_image", slow_first)
    assert crops() == serial
