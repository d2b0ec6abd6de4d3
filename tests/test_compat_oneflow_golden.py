"""A OneFlow 0.9 data script gives OneFlow's outputs under ``recordkit.compat.oneflow`` (golden data).

``tools/oracle/oneflow_compat_script.py`` is one OneFlow data script (every reader/decoder/image
module, batches across epoch ends, seeded shuffles); it was run under the real OneFlow 0.9.0
(``../shared/tools/oneflow-oracle``), which also wrote its data sets with OneFlow's own
``record_pb2`` recipe: ``tests/data/oneflow_compat/{mixed,many_parts}/`` and the outputs
``golden.npz``. Here the same script runs with ``import recordkit.compat.oneflow as flow`` on the
committed data sets (no OneFlow needed) and every output is compared:

* exactly: raw/bytes decoders, JPEG and PNG decoding (RGB, BGR, GRAY, float32), flip, normalize,
  batch_align, CropMirrorNormalize (NCHW, NHWC, GRAY), Resize (every interpolation, uint8 and
  float32 images, fixed size and keep-aspect: OpenCV's ``cv2.resize``, as OneFlow; float32 bicubic
  within a few float32 ulps), the tensor surface
  (dtype and shape strings), and the record order of seeded shuffles (OneFlow's
  std::default_random_engine shuffle buffer and std::mt19937 part shuffle, draw for draw);
* by properties: coin flips and random crops (OneFlow's random streams are not reproduced).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("PIL")

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "oneflow_compat"
SCRIPT = REPO / "tools" / "oracle" / "oneflow_compat_script.py"
IGNORED = {"meta/impl", "meta/version"}

def _script():
    spec = importlib.util.spec_from_file_location("oneflow_compat_script", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def golden():
    g = np.load(DATA / "golden.npz")
    assert str(g["meta/impl"]) == "oneflow" and str(g["meta/version"]) == "0.9.0"
    return {k: g[k] for k in g.files}


@pytest.fixture(scope="module")
def ours():
    mod = _script()
    flow, _ = mod.import_flow("recordkit")
    return mod.read(flow, str(DATA))


def _keys(golden, prefix):
    keys = sorted(k for k in golden if k.startswith(prefix) and k not in IGNORED)
    assert keys, prefix
    return keys


#: float32 images resized bicubically: OpenCV's wheels run its SIMD float kernel with fused multiply-adds,
#: OneFlow 0.9's OpenCV build without, so the last float32 bits differ (up to 3e-5 on 0..255 values).
_ULPS_APART = ("img/resize_f32in_bicubic/", "img/resize_keep_f32/")


def _same(k, a, b) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if k.startswith(_ULPS_APART) and not k.endswith("/n"):
        return bool(np.allclose(a, b, rtol=1e-6, atol=1e-4))
    return a.tobytes() == b.tobytes()


def _exact(golden, ours, keys):
    bad = []
    for k in keys:
        a, b = golden[k], ours[k]
        if not _same(k, a, b):
            bad.append(f"{k}: OneFlow {a.dtype}{a.shape} {a.ravel()[:8]} vs recordkit {b.dtype}{b.shape} {b.ravel()[:8]}")
    assert not bad, "\n".join(bad[:10])


def test_same_outputs_as_oneflow(golden, ours):
    """The script produced the same set of outputs (every module ran, every batch was taken)."""
    assert sorted(set(golden) - IGNORED) == sorted(set(ours))


def test_inputs_unchanged(golden, ours):
    """The committed data sets are the bytes OneFlow read when the golden was made."""
    _exact(golden, ours, _keys(golden, "files/"))


def test_tensor_surface_equals_oneflow(golden, ours):
    """dtype and shape print as OneFlow's (``oneflow.float32 oneflow.Size([5, 4])``), for records, dense
    tensors and tensor buffers; Resize's new_size is None for a fixed size, as in OneFlow."""
    _exact(golden, ours, _keys(golden, "meta/"))


def test_raw_decoder_equals_oneflow_across_epochs(golden, ours):
    """OFRecordRawDecoder over 7 batches of 5 from 23 records in 3 parts (two epoch wrap-arounds): casts
    between every list kind and dtype, reshapes, truncate, dim1_varying_length, bytes read as int8."""
    _exact(golden, ours, _keys(golden, "raw/"))


def test_bytes_decoder_equals_oneflow(golden, ours):
    _exact(golden, ours, _keys(golden, "bytes/"))


def test_image_ops_equal_oneflow(golden, ours):
    """image.decode of PNGs (RGB, BGR, GRAY, float32), flip, normalize, batch_align (aligned, float,
    OneFlow's layout for a larger shape), CropMirrorNormalize (tensor buffer and dense, mirror, crop
    positions, NHWC, GRAY), Resize (nearest, bilinear, bicubic, area and "auto"; shrinking, growing and
    mixed; uint8 and float32 images; fixed size and keep-aspect with min/max sizes): bit for bit."""
    _exact(golden, ours, _keys(golden, "img/"))


def test_shuffled_order_equals_oneflow(golden, ours):
    """Seeded shuffle buffers (sizes 1, 7, 30) over 80 records, shuffle_after_epoch over 7 parts for 180
    records (alone and with a buffer), and data_part_num below the number of parts: OneFlow's order."""
    _exact(golden, ours, _keys(golden, "order/"))


def test_jpeg_decoding_equals_oneflow(golden, ours):
    """OFRecordImageDecoder and image.decode of JPEGs (RGB, BGR float32, GRAY from libjpeg's luma): bit for
    bit. Both sides hand JPEG to a libjpeg build (OneFlow's libjpeg-turbo, Pillow's): a Pillow linked
    with another libjpeg could fail here while everything else passes."""
    _exact(golden, ours, _keys(golden, "jpeg/"))


def test_coin_flip_like_oneflow(golden, ours):
    """CoinFlip: int8 0/1 of shape (batch_size,) per call, a stream that changes from call to call, and the
    probability's frequency, in OneFlow's draws and in ours (the draws themselves differ: mt19937 vs PCG64)."""
    for key, p in (("random/coin_p50", 0.5), ("random/coin_p20", 0.2)):
        for who, a in (("OneFlow", golden[key]), ("recordkit", ours[key])):
            assert a.dtype == np.int8 and a.shape == golden[key].shape, (who, key)
            assert set(np.unique(a)) <= {0, 1}, (who, key)
            assert len({row.tobytes() for row in a}) >= len(a) // 4, f"{who} {key}: calls repeat"
            sigma = np.sqrt(p * (1 - p) / a.size)
            assert abs(a.mean() - p) < 4 * sigma, f"{who} {key}: frequency {a.mean()}"


def _window_of(full: np.ndarray, crop: np.ndarray, mean_tol: float) -> bool:
    """Whether ``crop`` is a window of ``full``: some position where the mean |difference| <= mean_tol."""
    h, w = crop.shape[:2]
    H, W = full.shape[:2]
    if h > H or w > W:
        return False
    c = crop.astype(np.int16)
    return min(np.abs(full[y:y + h, x:x + w].astype(np.int16) - c).mean()
               for y in range(H - h + 1) for x in range(W - w + 1)) <= mean_tol


def test_random_crop_like_oneflow(golden, ours):
    """OFRecordImageDecoderRandomCrop: every crop is a window of the decoded image, with an area fraction
    in [0.08, 1] and an aspect ratio in [0.75, 4/3] (or the whole image), for OneFlow's crops and ours;
    windows change from batch to batch (the slots' streams advance)."""
    for who, res in (("OneFlow", golden), ("recordkit", ours)):
        shapes = []
        for b in range(4):
            n = int(res[f"random/crop/b{b}/n"])
            for i in range(n):
                crop, full = res[f"random/crop/b{b}/{i}"], res[f"random/crop_full/b{b}/{i}"]
                H, W = full.shape[:2]
                h, w = crop.shape[:2]
                area, ratio = h * w / (H * W), w / h
                assert (h, w) == (H, W) or (0.08 - 1e-9 <= area <= 1 and 0.75 - 1e-9 <= ratio <= 1.333334), \
                    f"{who}: crop {h}x{w} of {H}x{W}"
                # OneFlow decodes only the window (libjpeg-turbo's cropped decode upsamples chroma differently
                # at its edges: up to 32 levels there, mean <= 0.54 per crop); recordkit crops the decoded image
                assert _window_of(full, crop, 0 if who == "recordkit" else 1.0), f"{who}: b{b}/{i} not a window"
                shapes.append((b % 2, i, h, w))
        first = [s[2:] for s in shapes if s[0] == 0]
        second = [s[2:] for s in shapes if s[0] == 1]
        assert first != second, f"{who}: the same windows in successive batches"


def test_writing_recipe_runs_unchanged(tmp_path):
    """The script's writer (``record_pb2.OFRecord(feature={...}).SerializeToString()`` + ``struct.pack("q",
    len)``) runs on recordkit's record_pb2 and writes the records OneFlow's wrote (map order aside):
    same features, kinds and values; images compared decoded (encoders may differ between Pillow builds)."""
    from recordkit.compat.oneflow.ops import image as _img
    from recordkit.formats.ofrecord.reader import OFRecordReader

    mod = _script()
    _, record_pb2 = mod.import_flow("recordkit")
    mod.write(record_pb2, str(tmp_path))
    for sub in ("mixed", "many_parts"):
        assert sorted(p.name for p in (tmp_path / sub).iterdir()) == sorted(p.name for p in (DATA / sub).iterdir())
        mine = [r for batch in OFRecordReader(str(tmp_path / sub), batch_size=8, epochs=1) for r in batch]
        theirs = [r for batch in OFRecordReader(str(DATA / sub), batch_size=8, epochs=1) for r in batch]
        assert len(mine) == len(theirs) > 0
        for i, (a, b) in enumerate(zip(mine, theirs)):
            assert sorted(a) == sorted(b), (sub, i)
            for name in a:
                assert a[name].kind == b[name].kind, (sub, i, name)
                if name in ("jpeg", "png"):
                    x, y = (_img.decode_image(f.value[0], "RGB").astype(np.int16) for f in (a[name], b[name]))
                    assert x.shape == y.shape and np.abs(x - y).max() <= (0 if name == "png" else 2), (sub, i, name)
                elif a[name].kind == "bytes_list":
                    assert list(a[name].value) == list(b[name].value), (sub, i, name)
                else:
                    assert np.asarray(a[name].value).tobytes() == np.asarray(b[name].value).tobytes(), (sub, i, name)


def test_script_command_line_under_recordkit(tmp_path):
    """``oneflow_compat_script.py --impl recordkit read`` writes an npz with the golden's outputs."""
    mod = _script()
    out = tmp_path / "rk.npz"
    assert mod.main(["--impl", "recordkit", "read", str(DATA), str(out)]) == 0
    got = np.load(out)
    assert str(got["meta/impl"]) == "recordkit"
    assert set(got.files) == set(np.load(DATA / "golden.npz").files)
