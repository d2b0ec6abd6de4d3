"""The compiled image kernels give OpenCV's and NumPy's bytes: ``resize_area`` is ``cv2.resize(INTER_AREA)``
(the generic path: both sides shrink by factors that are not whole), ``normalize_lut`` is
``(x - mean) * inv_std`` in float32, crop and mirror included."""
from __future__ import annotations

import numpy as np
import pytest

cv2 = pytest.importorskip("cv2")

from recordkit.images import _kernel, codec  # noqa: E402


def _cv_area(src, h, w):
    ipp = cv2.ipp.useIPP()
    cv2.ipp.setUseIPP(False)
    try:
        return cv2.resize(src, (w, h), interpolation=cv2.INTER_AREA).reshape(h, w, src.shape[2])
    finally:
        cv2.ipp.setUseIPP(ipp)


def _image(rng, h, w, c, smooth):
    img = rng.integers(0, 256, (h, w, c), dtype=np.uint8)
    return cv2.GaussianBlur(img, (0, 0), 2).reshape(h, w, c) if smooth else img


@pytest.mark.parametrize("c", [1, 3, 4])
def test_resize_area_gives_opencvs_bytes(c):
    rng = np.random.default_rng(c)
    checked = 0
    for k in range(120):
        sh, sw = (int(v) for v in rng.integers(2, 90, 2))
        dh, dw = int(rng.integers(1, sh + 1)), int(rng.integers(1, sw + 1))
        if not codec._generic_area(sh, sw, dh, dw):
            continue
        src = _image(rng, sh, sw, c, smooth=k % 2 == 0)
        out = np.empty((dh, dw, c), np.uint8)
        _kernel.resize_area(src, out)
        assert out.tobytes() == _cv_area(src, dh, dw).tobytes(), (sh, sw, dh, dw, c)
        checked += 1
    assert checked > 60


def test_resize_area_of_crop_mirrored_strided_views():
    rng = np.random.default_rng(7)
    full = _image(rng, 375, 501, 3, smooth=True)
    rgba = _image(rng, 375, 500, 4, smooth=True)
    views = (full, full[13:300, 41:460], full[:, ::-1], full[::-1, ::-1], full[:, ::2], full[:, ::-3], rgba[:, :, :3])
    for view in views:
        for h, w in ((224, 160), (192, 150), (100, 111)):
            out = np.empty((h, w, 3), np.uint8)
            _kernel.resize_area(view, out)
            assert out.tobytes() == _cv_area(np.ascontiguousarray(view), h, w).tobytes(), (view.shape, h, w)


def test_resize_image_takes_the_kernel_only_where_opencv_takes_its_generic_area_path():
    assert codec._generic_area(375, 500, 224, 224)
    assert not codec._generic_area(448, 448, 224, 224)  # whole factors: OpenCV's fast area path
    assert not codec._generic_area(200, 500, 224, 224)  # one side grows: OpenCV's linear-like path
    assert codec._generic_area(448, 500, 224, 224)  # one whole factor is not enough
    rng = np.random.default_rng(3)
    for shape, size in (((448, 448, 3), (224, 224)), ((200, 500, 3), (224, 224)), ((375, 500, 3), (224, 224))):
        img = _image(rng, *shape, smooth=True)
        got = codec.resize_image(img, size[1], size[0], "BOX")
        assert got.tobytes() == _cv_area(img, *size).tobytes()
        slot = np.zeros((2,) + size + (3,), np.uint8)
        assert np.shares_memory(codec.resize_image(img, size[1], size[0], "BOX", out=slot[1]), slot[1])
        assert slot[1].tobytes() == got.tobytes() and not slot[0].any()


def test_resize_area_refuses_growing_and_channel_mismatches():
    src = np.zeros((10, 10, 3), np.uint8)
    with pytest.raises(ValueError, match="shrinks"):
        _kernel.resize_area(src, np.empty((12, 8, 3), np.uint8))
    with pytest.raises(ValueError, match="channels"):
        _kernel.resize_area(src, np.empty((5, 5, 1), np.uint8))


@pytest.mark.parametrize("chw", [True, False])
@pytest.mark.parametrize("mirror", [True, False])
def test_normalize_lut_is_numpys_subtract_then_multiply(chw, mirror):
    rng = np.random.default_rng(int(chw) * 2 + int(mirror))
    img = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
    mean, inv = np.float32([123.68, 116.779, 103.939]), np.float32(1) / np.float32([58.393, 57.12, 57.375])
    crop = img[3:27, 5:37]
    src = crop[:, ::-1] if mirror else crop
    expect = (src.astype(np.float32) - mean) * inv
    expect = expect.transpose(2, 0, 1) if chw else expect
    out = np.empty(expect.shape, np.float32)
    codec.normalize_into(crop, mean, inv, out, chw, mirror=mirror)
    assert out.tobytes() == np.ascontiguousarray(expect).tobytes()


def test_normalize_lut_refuses_a_table_or_output_of_the_wrong_shape():
    img = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="table"):
        _kernel.normalize_lut(img, np.zeros((1, 256), np.float32), np.empty((3, 4, 5), np.float32), True, False)
    with pytest.raises(ValueError, match="output shape"):
        _kernel.normalize_lut(img, np.zeros((3, 256), np.float32), np.empty((4, 5, 3), np.float32), True, False)
