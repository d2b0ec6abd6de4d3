"""OFRecord decoders and preprocessing ops: OneFlow semantics on NumPy (spec sections 4.1-4.4)."""
from __future__ import annotations

import io
import math
import os
import struct
import subprocess
import sys
import types
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

PIL = pytest.importorskip("PIL")
from PIL import Image  # noqa: E402

from recordkit.errors import FormatError  # noqa: E402
from recordkit.compat.oneflow import ops as dec  # noqa: E402
from recordkit.compat.oneflow.ops import image as img  # noqa: E402

try:
    from recordkit.formats.ofrecord.codec import Feature
except ImportError:  # the codec is being written alongside; same record representation

    @dataclass(frozen=True)
    class Feature:
        kind: str
        value: object


# --------------------------------------------------------------------------- builders


def floats(*v):
    return Feature("float_list", np.array(v, dtype=np.float32))


def doubles(*v):
    return Feature("double_list", np.array(v, dtype=np.float64))


def int32s(*v):
    return Feature("int32_list", np.array(v, dtype=np.int32))


def int64s(*v):
    return Feature("int64_list", np.array(v, dtype=np.int64))


def byteses(*v):
    return Feature("bytes_list", list(v))


def recs(name, *features):
    return [{name: f} for f in features]


def encode(arr, fmt, **kw):
    buf = io.BytesIO()
    mode = None
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    Image.fromarray(arr, mode).save(buf, fmt, **kw)
    return buf.getvalue()


def rgb_pattern(h, w, seed=0):
    """An image whose three channels differ everywhere, so channel order is observable."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
    a[..., 0] = (np.arange(w)[None, :] * 3 % 256).astype(np.uint8)
    a[..., 2] = 255 - a[..., 0]
    return a


def smooth_rgb(h, w):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1),
                     np.full_like(xx, 90)], axis=2).astype(np.uint8)


# --------------------------------------------------------------------------- raw decoder


def test_raw_exact_length_records_stack_into_n_by_shape():
    r = recs("x", floats(1, 2, 3, 4), floats(5, 6, 7, 8))
    out = dec.raw_decode(r, "x", (2, 2), np.float32)
    assert out.shape == (2, 2, 2) and out.dtype == np.float32
    np.testing.assert_array_equal(out.reshape(2, 4), [[1, 2, 3, 4], [5, 6, 7, 8]])


def test_raw_empty_shape_gives_one_label_per_record():
    out = dec.raw_decode(recs("label", int32s(3), int32s(7), int32s(-1)), "label", (), np.int32)
    assert out.shape == (3,) and out.dtype == np.int32
    np.testing.assert_array_equal(out, [3, 7, -1])


def test_raw_fast_path_concatenates_once(monkeypatch):
    calls = []
    real = np.concatenate

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(np, "concatenate", counting)
    r = recs("x", *[int64s(*range(i, i + 5)) for i in range(100)])
    out = dec.raw_decode(r, "x", (5,), np.int32)
    assert len(calls) == 1
    np.testing.assert_array_equal(out, np.arange(100)[:, None] + np.arange(5)[None, :])


def test_raw_fast_path_for_exact_length_bytes():
    r = recs("x", byteses(b"\x01\x02"), byteses(b"\xff\x80"))
    np.testing.assert_array_equal(dec.raw_decode(r, "x", (2,), np.int64), [[1, 2], [-1, -128]])


def test_raw_accepts_python_lists_as_numeric_values():
    r = [{"x": Feature("float_list", [1.5, 2.5])}]
    np.testing.assert_array_equal(dec.raw_decode(r, "x", (2,), np.float64), [[1.5, 2.5]])


def test_raw_length_mismatch_names_feature_file_and_record():
    r = recs("labels", int32s(1, 2), int32s(1, 2, 3))
    where = [("part-00001", 11), ("part-00001", 12)]
    with pytest.raises(FormatError) as ei:
        dec.raw_decode(r, "labels", (2,), np.int32, where=where)
    e = ei.value
    assert e.path == "part-00001" and e.record == "record 12"
    assert "'labels'" in str(e) and "3 values" in str(e) and "needs 2" in str(e)
    assert str(e).startswith("part-00001: feature 'labels'") and str(e).endswith("(record 12)")


def test_raw_shorter_list_is_an_error_by_default_too():
    with pytest.raises(FormatError, match=r"'x' has 1 values.*\(record 0\)"):
        dec.raw_decode(recs("x", floats(1.0)), "x", (3,), np.float32)


def test_raw_default_location_is_records_and_batch_index():
    r = recs("x", floats(1), floats(1), floats(1, 2))
    with pytest.raises(FormatError) as ei:
        dec.raw_decode(r, "x", (), np.float32)
    assert str(ei.value).startswith("<records>: ") and ei.value.record == "record 2"


def test_raw_missing_feature_names_feature_and_record():
    r = [{"x": floats(1)}, {"y": floats(2)}]
    with pytest.raises(FormatError) as ei:
        dec.raw_decode(r, "x", (), np.float32, where=[("part-00003", 40), ("part-00003", 41)])
    assert str(ei.value) == "part-00003: feature 'x' is missing (record 41)"


def test_raw_unknown_or_unset_kind_is_a_format_error():
    odd = types.SimpleNamespace(kind="string_list", value=["a"])
    unset = types.SimpleNamespace(kind=None, value=None)
    with pytest.raises(FormatError, match="unknown kind 'string_list'"):
        dec.raw_decode([{"x": odd}], "x", (), np.float32)
    with pytest.raises(FormatError, match="kind not set"):
        dec.raw_decode([{"x": unset}], "x", (), np.float32)


def test_raw_truncate_zero_fills_short_lists_and_cuts_long_ones():
    r = recs("x", floats(1, 2), floats(1, 2, 3, 4, 5, 6), floats(7, 8, 9, 10))
    out = dec.raw_decode(r, "x", (4,), np.float32, truncate=True)
    np.testing.assert_array_equal(out, [[1, 2, 0, 0], [1, 2, 3, 4], [7, 8, 9, 10]])


def test_raw_dim1_varying_length_copies_min_and_never_overflows_into_next_sample():
    r = recs("x", int64s(1, 2, 3, 4, 5, 6), int64s(9), int64s())
    out = dec.raw_decode(r, "x", (3,), np.int64, dim1_varying_length=True)
    # OneFlow would write 4, 5, 6 into the second sample's slot; we stop at K.
    np.testing.assert_array_equal(out, [[1, 2, 3], [9, 0, 0], [0, 0, 0]])


def test_raw_auto_zero_padding_warns_and_acts_as_truncate():
    r = recs("x", floats(1, 2))
    with pytest.warns(DeprecationWarning, match="auto_zero_padding"):
        out = dec.raw_decode(r, "x", (3,), np.float32, auto_zero_padding=True)
    np.testing.assert_array_equal(out, [[1, 2, 0]])


@pytest.mark.parametrize("dtype, expected", [
    (np.uint8, [200, 1, 127, 128]),
    (np.int8, [-56, 1, 127, -128]),
    ("char", [-56, 1, 127, -128]),
    (np.int32, [-56, 1, 127, -128]),
    (np.int64, [-56, 1, 127, -128]),
    (np.float32, [-56.0, 1.0, 127.0, -128.0]),
    (np.float64, [-56.0, 1.0, 127.0, -128.0]),
])
def test_raw_bytes_are_read_as_signed_int8_then_cast(dtype, expected):
    out = dec.raw_decode(recs("b", byteses(b"\xc8\x01\x7f\x80")), "b", (4,), dtype)
    np.testing.assert_array_equal(out[0], expected)
    assert out.dtype == (np.int8 if dtype == "char" else dtype)


def test_raw_bytes_shorter_than_slot_are_zero_filled_and_longer_cut_without_flags():
    r = recs("b", byteses(b"\x05"), byteses(b"\x01\x02\x03\x04\x05"))
    np.testing.assert_array_equal(dec.raw_decode(r, "b", (3,), np.uint8), [[5, 0, 0], [1, 2, 3]])


def test_raw_bytes_list_needs_exactly_one_value():
    for feature, count in ((byteses(b"a", b"b"), 2), (byteses(), 0)):
        with pytest.raises(FormatError, match=f"exactly one bytes value, it holds {count}.*record 0"):
            dec.raw_decode([{"b": feature}], "b", (1,), np.uint8)


def test_raw_mixed_kinds_and_lengths_in_one_batch():
    r = [{"x": floats(1.9, -1.9)}, {"x": int64s(7)}, {"x": byteses(b"\xfe\x02\x03")}, {"x": doubles(2.5, 3.5)}]
    out = dec.raw_decode(r, "x", (2,), np.int32, truncate=True)
    np.testing.assert_array_equal(out, [[1, -1], [7, 0], [-2, 2], [2, 3]])


def test_raw_float_to_int_truncates_toward_zero():
    out = dec.raw_decode(recs("x", floats(2.7, -2.7, 0.5, -0.5)), "x", (4,), np.int32)
    np.testing.assert_array_equal(out[0], [2, -2, 0, 0])
    out = dec.raw_decode(recs("x", doubles(99.99, -99.99)), "x", (2,), np.int8)
    np.testing.assert_array_equal(out[0], [99, -99])


def test_raw_int64_to_int32_wraps():
    v = int64s(2**32 + 5, 2**31, -(2**31) - 1, 2**40)
    out = dec.raw_decode(recs("x", v), "x", (4,), np.int32)
    np.testing.assert_array_equal(out[0], [5, -(2**31), 2**31 - 1, 0])


def test_raw_narrowing_integer_casts_wrap_modulo():
    out = dec.raw_decode(recs("x", int32s(300, -1, 256)), "x", (3,), np.uint8)
    np.testing.assert_array_equal(out[0], [44, 255, 0])
    out = dec.raw_decode(recs("x", int64s(200, -129)), "x", (2,), np.int8)
    np.testing.assert_array_equal(out[0], [-56, 127])


def test_raw_int64_and_double_to_float_round_to_nearest():
    out = dec.raw_decode(recs("x", int64s(2**24 + 1, 2**24 + 3)), "x", (2,), np.float32)
    assert out[0].tolist() == [16777216.0, 16777220.0]
    out = dec.raw_decode(recs("x", doubles(0.1)), "x", (), np.float32)
    assert out[0] == np.float32(0.1)


def test_raw_int_to_float64_is_exact():
    out = dec.raw_decode(recs("x", int64s(2**53, -7)), "x", (2,), np.float64)
    assert out[0].tolist() == [2.0**53, -7.0]


@pytest.mark.parametrize("dtype", [np.float16, np.bool_, np.uint16, np.int16, np.complex64, "int128", object])
def test_raw_rejects_unsupported_dtype(dtype):
    with pytest.raises(ValueError, match="dtype must be one of float32, float64, int8, int32, int64, uint8"):
        dec.raw_decode(recs("x", floats(1)), "x", (), dtype)


def test_raw_empty_batch_has_zero_rows():
    assert dec.raw_decode([], "x", (2, 3), np.float32).shape == (0, 2, 3)


def test_raw_where_must_match_record_count():
    with pytest.raises(ValueError, match="where has 1 entries for 2 records"):
        dec.raw_decode(recs("x", floats(1), floats(2)), "x", (), np.float32, where=[("f", 0)])


def _reference_truncate(values, K, dtype):
    out = np.zeros((len(values), K), dtype=dtype)
    for i, v in enumerate(values):
        for j in range(min(len(v), K)):
            out[i, j] = v[j]
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.integers(-1000, 1000), max_size=8), max_size=12),
    st.integers(0, 6),
    st.sampled_from(["int32_list", "int64_list", "float_list", "double_list"]),
    st.sampled_from([np.int32, np.int64, np.float32, np.float64]),
)
def test_raw_truncate_matches_elementwise_reference(lists, K, kind, dtype):
    from recordkit.formats.ofrecord import decoders as codec
    src = codec._KIND_DTYPES[kind]
    r = [{"x": Feature(kind, np.array(v, dtype=src))} for v in lists]
    out = dec.raw_decode(r, "x", (K,), dtype, truncate=True)
    np.testing.assert_array_equal(out, _reference_truncate(lists, K, dtype))
    out2 = dec.raw_decode(r, "x", (K,), dtype, dim1_varying_length=True)
    np.testing.assert_array_equal(out2, out)


# --------------------------------------------------------------------------- bytes decoder


def test_bytes_decode_returns_uint8_copies():
    r = recs("t", byteses("héllo".encode()), byteses(b""), byteses(b"\x00\xff"))
    out = dec.bytes_decode(r, "t")
    assert [o.dtype for o in out] == [np.uint8] * 3
    assert bytes(out[0]).decode() == "héllo" and out[1].shape == (0,)
    np.testing.assert_array_equal(out[2], [0, 255])
    out[2][0] = 9  # a writable copy, not a view of the record's bytes
    assert r[2]["t"].value[0] == b"\x00\xff"


def test_bytes_decode_needs_one_value_and_bytes_kind():
    with pytest.raises(FormatError, match=r"exactly one bytes value, it holds 2 \(record 0\)"):
        dec.bytes_decode(recs("t", byteses(b"a", b"b")), "t")
    with pytest.raises(FormatError) as ei:
        dec.bytes_decode(recs("t", byteses(b"a"), floats(1)), "t", where=[("part-00000", 0), ("part-00000", 1)])
    assert "feature 't' is a float_list" in str(ei.value) and ei.value.record == "record 1"


def test_bytes_decode_missing_feature():
    with pytest.raises(FormatError, match=r"feature 'encoded' is missing \(record 0\)"):
        dec.bytes_decode([{}], "encoded")


# --------------------------------------------------------------------------- image decoder


def test_image_decode_png_rgb_is_exact_and_bgr_reverses_channels():
    a = rgb_pattern(9, 13)
    r = recs("encoded", byteses(encode(a, "PNG")))
    rgb = dec.image_decode(r, "encoded", "RGB")[0]
    bgr = dec.image_decode(r, "encoded", "BGR")[0]
    assert rgb.dtype == np.uint8 and rgb.shape == (9, 13, 3)
    np.testing.assert_array_equal(rgb, a)
    np.testing.assert_array_equal(bgr, a[:, :, ::-1])
    assert bgr.flags.c_contiguous


def test_image_decode_default_color_space_is_bgr():
    a = rgb_pattern(4, 5)
    out = dec.image_decode(recs("e", byteses(encode(a, "PNG"))), "e")[0]
    np.testing.assert_array_equal(out, a[:, :, ::-1])


def test_image_decode_gray_has_one_channel_with_luma_values():
    a = rgb_pattern(6, 7)
    out = dec.image_decode(recs("e", byteses(encode(a, "PNG"))), "e", "GRAY")[0]
    assert out.shape == (6, 7, 1) and out.dtype == np.uint8
    luma = a[..., 0] * 0.299 + a[..., 1] * 0.587 + a[..., 2] * 0.114
    assert np.abs(out[..., 0].astype(float) - luma).max() <= 1.0


def test_image_decode_gray_source_replicates_into_color_channels():
    g = np.arange(20, dtype=np.uint8).reshape(4, 5) * 10
    r = recs("e", byteses(encode(g, "PNG")))
    out = dec.image_decode(r, "e", "RGB")[0]
    assert out.shape == (4, 5, 3)
    for c in range(3):
        np.testing.assert_array_equal(out[..., c], g)
    np.testing.assert_array_equal(dec.image_decode(r, "e", "GRAY")[0][..., 0], g)


def test_image_decode_jpeg_close_to_source_in_every_color_space():
    a = smooth_rgb(32, 48)
    r = recs("e", byteses(encode(a, "JPEG", quality=95)))
    rgb = dec.image_decode(r, "e", "RGB")[0]
    bgr = dec.image_decode(r, "e", "BGR")[0]
    gray = dec.image_decode(r, "e", "GRAY")[0]
    assert rgb.shape == (32, 48, 3) and gray.shape == (32, 48, 1)
    assert np.abs(rgb.astype(int) - a).mean() < 3
    np.testing.assert_array_equal(bgr, rgb[:, :, ::-1])
    luma = rgb @ np.array([0.299, 0.587, 0.114])
    assert np.abs(gray[..., 0] - luma).max() <= 2


def test_image_decode_grayscale_jpeg_gives_three_equal_channels_for_rgb():
    g = (np.arange(64, dtype=np.uint8).reshape(8, 8) * 4)
    out = dec.image_decode(recs("e", byteses(encode(g, "JPEG", quality=100))), "e", "RGB")[0]
    assert out.shape == (8, 8, 3)
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()


def test_image_decode_drops_alpha_and_expands_palette():
    a = rgb_pattern(5, 6)
    rgba = np.dstack([a, np.full((5, 6), 7, np.uint8)])
    buf = io.BytesIO()
    Image.fromarray(rgba, "RGBA").save(buf, "PNG")
    np.testing.assert_array_equal(dec.image_decode(recs("e", byteses(buf.getvalue())), "e", "RGB")[0], a)
    pal = Image.fromarray(a, "RGB").convert("P", palette=Image.Palette.ADAPTIVE, colors=8)
    buf = io.BytesIO()
    pal.save(buf, "PNG")
    np.testing.assert_array_equal(
        dec.image_decode(recs("e", byteses(buf.getvalue())), "e", "RGB")[0], np.asarray(pal.convert("RGB"))
    )


def test_image_decode_16bit_png_keeps_the_high_byte():
    v = np.array([[0, 256, 65535], [1000, 40000, 255]], dtype=np.uint16)
    buf = io.BytesIO()
    Image.fromarray(v).save(buf, "PNG")
    out = dec.image_decode(recs("e", byteses(buf.getvalue())), "e", "GRAY")[0]
    np.testing.assert_array_equal(out[..., 0], v >> 8)


@pytest.mark.parametrize("fmt", ["BMP", "TIFF", "WEBP"])
def test_image_decode_other_lossless_formats(fmt):
    a = rgb_pattern(5, 7)
    kw = {"lossless": True} if fmt == "WEBP" else {}
    np.testing.assert_array_equal(dec.image_decode(recs("e", byteses(encode(a, fmt, **kw))), "e", "RGB")[0], a)


def test_image_decode_corrupt_bytes_name_feature_file_and_record():
    good = encode(rgb_pattern(4, 4), "PNG")
    r = recs("encoded", byteses(good), byteses(b"definitely not an image"))
    with pytest.raises(FormatError) as ei:
        dec.image_decode(r, "encoded", "RGB", where=[("part-00007", 3), ("part-00007", 4)])
    e = ei.value
    assert e.path == "part-00007" and e.record == "record 4" and "'encoded'" in str(e)
    assert "cannot decode image" in str(e)


def test_image_decode_truncated_jpeg_is_a_format_error():
    data = encode(smooth_rgb(64, 64), "JPEG")
    with pytest.raises(FormatError, match=r"record 0"):
        dec.image_decode(recs("e", byteses(data[: len(data) // 2])), "e", "RGB")


def forged_png(width, height):
    """A 1x1 PNG whose IHDR (CRC fixed) declares ``width`` x ``height``: a few dozen bytes."""
    b = bytearray(encode(rgb_pattern(1, 1), "PNG"))
    assert b[12:16] == b"IHDR"
    b[16:24] = struct.pack(">II", width, height)
    b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])))
    return bytes(b)


def forged_jpeg(width, height):
    """An 8x8 baseline JPEG whose SOF0 declares ``width`` x ``height``: some 600 bytes."""
    b = bytearray(encode(rgb_pattern(8, 8), "JPEG"))
    at = 2
    while b[at + 1] != 0xC0:
        at += 2 + struct.unpack(">H", b[at + 2:at + 4])[0]
    b[at + 5:at + 9] = struct.pack(">HH", height, width)
    return bytes(b)


_BOMB_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
from recordkit.compat.oneflow import ops
from recordkit.errors import FormatError
from recordkit.formats.ofrecord.codec import Feature
data = open(sys.argv[1], "rb").read()
try:
    ops.image_decode([{"img": Feature("bytes_list", [data])}], "img", "BGR", where=[("part-00003", 7)])
    print("decoded")
except FormatError as e:
    print("error:", e)
# VmHWM: this program's own peak (ru_maxrss keeps the forking parent's peak across exec on Linux, so a
# large test process would be charged to the child)
try:
    peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
except OSError:
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("peak MiB", peak_kib // 1024)
"""


@pytest.mark.parametrize("kind, size", [("png", 12000), ("jpeg", 13000)])
def test_image_bomb_is_refused_by_its_declared_size_in_bounded_memory(tmp_path, kind, size):
    """A PNG of ~70 bytes declaring 12000x12000 and a JPEG of ~630 declaring 13000x13000 (Pillow only
    warns below twice its threshold) were decoded into 0.4-0.5 GB of zero-filled pixels, peaking
    at 0.9-2.9 GB: now refused from the header, in a child whose address space is capped."""
    data = (forged_png if kind == "png" else forged_jpeg)(size, size)
    (tmp_path / "bomb").write_bytes(data)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(Path(sys.modules["recordkit"].__file__).parents[1])] + sys.path))
    out = subprocess.run([sys.executable, "-c", _BOMB_CHILD, str(tmp_path / "bomb")], capture_output=True,
                         text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    first, peak = out.stdout.splitlines()
    assert first.startswith("error: part-00003: feature 'img': ") and first.endswith("(record 7)"), first
    assert f"declares {size}x{size} = {size * size:,} pixels, more than the limit of 89,478,485" in first
    assert int(peak.split()[-1]) < 200, peak


@pytest.mark.parametrize("kind", ["png", "jpeg"])
def test_image_decode_refuses_data_too_short_for_its_declared_size(kind):
    """Within the pixel budget, bytes that cannot hold the declared pixels are truncated or forged:
    an error, not an image of zero-filled rows."""
    data = (forged_png if kind == "png" else forged_jpeg)(4000, 4000)
    with pytest.raises(FormatError, match=r"declares 4000x4000 pixels, which need at least [\d,]+ bytes "
                                          r"of encoded data: truncated or a forged size \(record 0\)"):
        dec.image_decode(recs("e", byteses(data)), "e", "RGB")


def test_pixel_budget_is_configurable_per_call_per_decoder_and_for_the_module(monkeypatch):
    from recordkit.compat.oneflow import nn
    data = encode(rgb_pattern(40, 50), "PNG")  # 2,000 pixels
    r = recs("e", byteses(data))
    assert dec.image_decode(r, "e", max_pixels=2000)[0].shape == (40, 50, 3)
    with pytest.raises(FormatError, match=r"declares 50x40 = 2,000 pixels, more than the limit of 1,999"):
        dec.image_decode(r, "e", max_pixels=1999)
    with pytest.raises(FormatError, match="limit of 1,000"):
        dec.image_decode_random_crop(r, "e", random_seed=0, max_pixels=1000)
    with pytest.raises(ValueError, match="max_pixels must be a positive integer"):
        nn.OFRecordImageDecoder("e", max_pixels=0)
    monkeypatch.setattr(img, "MAX_PIXELS", 1500)
    with pytest.raises(FormatError, match="limit of 1,500"):
        dec.image_decode(r, "e")


def test_image_decode_refuses_to_run_with_pillows_truncated_loading_on(monkeypatch):
    from PIL import ImageFile
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    data = encode(smooth_rgb(64, 64), "JPEG")
    with pytest.raises(FormatError, match="LOAD_TRUNCATED_IMAGES is set.*record 0"):
        dec.image_decode(recs("e", byteses(data[: len(data) // 2])), "e", "RGB")


def test_image_decode_rejects_unknown_color_space_and_wrong_kind():
    r = recs("e", byteses(encode(rgb_pattern(2, 2), "PNG")))
    with pytest.raises(ValueError, match="color_space"):
        dec.image_decode(r, "e", "HSV")
    with pytest.raises(FormatError, match="feature 'e' is a int64_list"):
        dec.image_decode(recs("e", int64s(1)), "e")


# --------------------------------------------------------------------------- random crop


def _windows(seed, n, H, W, **kw):
    gens = dec.random_crop_generators(seed, n)
    return [img.random_crop_window(H, W, g, **kw) for g in gens]


def test_random_crop_is_deterministic_for_a_seed_and_varies_with_it():
    a = rgb_pattern(60, 80)
    r = recs("e", *[byteses(encode(a, "PNG"))] * 8)
    one = dec.image_decode_random_crop(r, "e", "RGB", random_seed=7)
    two = dec.image_decode_random_crop(r, "e", "RGB", random_seed=7)
    other = dec.image_decode_random_crop(r, "e", "RGB", random_seed=8)
    assert all(np.array_equal(x, y) for x, y in zip(one, two))
    assert [x.shape for x in one] != [x.shape for x in other]
    assert len({x.shape for x in one}) > 1  # each slot has its own generator


def test_random_crop_output_is_the_window_of_the_decoded_image():
    a = rgb_pattern(50, 70)
    r = recs("e", *[byteses(encode(a, "PNG"))] * 6)
    out = dec.image_decode_random_crop(r, "e", "BGR", random_seed=123)
    for crop, (y, x, h, w) in zip(out, _windows(123, 6, 50, 70)):
        np.testing.assert_array_equal(crop, a[y:y + h, x:x + w, ::-1])


def test_random_crop_gray_has_one_channel():
    a = rgb_pattern(30, 30)
    out = dec.image_decode_random_crop(recs("e", byteses(encode(a, "PNG"))), "e", "GRAY", random_seed=1)
    assert out[0].ndim == 3 and out[0].shape[2] == 1


def test_random_crop_windows_stay_in_bounds_and_respect_area_and_ratio():
    H, W = 240, 320
    for (y, x, h, w) in _windows(2024, 400, H, W):
        assert 0 <= y and y + h <= H and 0 <= x and x + w <= W and h >= 1 and w >= 1
        assert 0.75 <= w / h <= 1.333333
        # sqrt rounding moves the area by at most about one row plus one column
        assert 0.08 * H * W - (w + h + 1) <= w * h <= H * W


def test_random_crop_area_and_ratio_ranges_are_honoured():
    H, W = 400, 400
    ws = _windows(5, 300, H, W, random_area=(0.25, 0.36), random_aspect_ratio=(1.0, 1.0))
    for (y, x, h, w) in ws:
        assert h == w
        assert 0.25 * H * W - (2 * w + 1) <= w * h <= 0.36 * H * W + (2 * w + 1)
    assert len({w for *_, w in ws}) > 5


def test_random_crop_fallback_is_whole_image_scaled_to_max_area():
    # No attempts: the whole (ratio-compatible) image, shrunk to the maximum area.
    assert _windows(0, 1, 100, 120, num_attempts=0) == [(0, 0, 100, 120)]
    (y, x, h, w), = _windows(0, 1, 100, 120, num_attempts=0, random_area=(0.1, 0.5))
    assert (h, w) == (int(100 * math.sqrt(0.5)), int(120 * math.sqrt(0.5)))
    assert 0 <= y <= 100 - h and 0 <= x <= 120 - w


def test_random_crop_fallback_clamps_too_wide_and_too_tall_images_to_ratio():
    (_, _, h, w), = _windows(0, 1, 100, 400, num_attempts=0)
    assert (h, w) == (100, int(100 * 1.333333))
    (_, _, h, w), = _windows(0, 1, 400, 100, num_attempts=0)
    assert (h, w) == (int(100 / 0.75), 100)


def test_random_crop_extreme_aspect_image_takes_the_full_height_crop():
    # Even a full-height crop at the widest allowed ratio is below the minimum area.
    for (y, x, h, w) in _windows(3, 20, 10, 1000, random_area=(0.5, 1.0)):
        assert (y, h, w) == (0, 10, 13) and 0 <= x <= 1000 - 13


def test_random_crop_too_tall_for_the_ratio_range_takes_the_full_width_crop():
    # Ratio exactly 2 on a 3x3 image: even a full-width crop (height int(3/2) = 1) is below
    # the minimum area, so OneFlow takes that crop without any attempt.
    for (y, x, h, w) in _windows(11, 50, 3, 3, random_aspect_ratio=(2.0, 2.0), random_area=(1.0, 1.0)):
        assert (x, h, w) == (0, 1, 3) and 0 <= y <= 2


def test_random_crop_attempts_that_all_miss_the_ratio_fall_back():
    # On 10x10 with area 0.5 every try rounds to 7x7 (ratio 1.0), outside [1.001, 1.002]:
    # the fallback clamps the image to ratio (maxH=int(10/1.001)=9, W=10), then scales it
    # by sqrt(50/90) -> (int(9*0.745), int(10*0.745)) = (6, 7).
    for (y, x, h, w) in _windows(4, 30, 10, 10, random_area=(0.5, 0.5), random_aspect_ratio=(1.001, 1.002)):
        assert (h, w) == (6, 7) and 0 <= y <= 4 and 0 <= x <= 3


def test_random_crop_generators_list_advances_between_batches():
    a = rgb_pattern(64, 64)
    r = recs("e", *[byteses(encode(a, "PNG"))] * 4)
    gens = dec.random_crop_generators(99, 4)
    first = dec.image_decode_random_crop(r, "e", "RGB", random_seed=gens)
    second = dec.image_decode_random_crop(r, "e", "RGB", random_seed=gens)
    again = dec.image_decode_random_crop(r, "e", "RGB", random_seed=99)
    assert all(np.array_equal(x, y) for x, y in zip(first, again))
    assert not all(np.array_equal(x, y) for x, y in zip(first, second))


def test_random_crop_rejects_bad_ranges_and_generator_lists():
    r = recs("e", byteses(encode(rgb_pattern(8, 8), "PNG")))
    for kw in ({"random_area": (0.0, 1.0)}, {"random_area": (0.6, 0.5)}, {"random_area": (0.5, 1.5)},
               {"random_aspect_ratio": (0.0, 1.0)}, {"random_aspect_ratio": (2.0, 1.0)},
               {"num_attempts": -1}):
        with pytest.raises(ValueError):
            dec.image_decode_random_crop(r, "e", **kw)
    with pytest.raises(ValueError, match="Generators"):
        dec.image_decode_random_crop(r, "e", random_seed=["nope"])


def test_random_crop_corrupt_image_names_record():
    r = recs("e", byteses(b"\x89PNG\r\n\x1a\n garbage"))
    with pytest.raises(FormatError, match=r"feature 'e'.*\(record 0\)"):
        dec.image_decode_random_crop(r, "e", random_seed=0)


# --------------------------------------------------------------------------- resize


def test_resize_fixed_size_gives_dense_batch_and_scales():
    ims = [rgb_pattern(10, 20), rgb_pattern(30, 15)]
    out, scale, new_size = dec.resize(ims, (8, 6))
    assert out.shape == (2, 6, 8, 3) and out.dtype == np.uint8 and new_size is None
    assert scale.dtype == np.float32 and scale.shape == (2, 2)
    np.testing.assert_allclose(scale, [[8 / 20, 6 / 10], [8 / 15, 6 / 30]], rtol=1e-6)


def test_resize_fixed_size_float_output_is_the_uint8_result_converted():
    ims = [smooth_rgb(11, 17)]
    u8, _, _ = dec.resize(ims, (23, 19), interpolation_type="bilinear")
    f32, _, _ = dec.resize(ims, (23, 19), dtype=np.float32, interpolation_type="bilinear")
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32, u8.astype(np.float32))


def test_resize_float_input_to_uint8_rounds_and_saturates():
    im = np.full((4, 4, 1), 300.0, np.float32)
    im[0, 0, 0] = -5.0
    out, _, _ = dec.resize([im], (4, 4), channels=1, interpolation_type="nn")
    assert out.dtype == np.uint8 and out[0, 0, 0, 0] == 0 and out[0, 3, 3, 0] == 255


def test_resize_accepts_nhwc_array_input():
    batch = np.stack([rgb_pattern(8, 8, s) for s in range(3)])
    out, _, _ = dec.resize(batch, (4, 4))
    assert out.shape == (3, 4, 4, 3)


@pytest.mark.parametrize("interp", ["auto", "bilinear", "nearest_neighbor", "nn", "bicubic", "area"])
def test_resize_constant_image_stays_constant_under_every_interpolation(interp):
    im = np.full((9, 13, 3), 77, np.uint8)
    for size in ((5, 4), (26, 18)):
        out, _, _ = dec.resize([im], size, interpolation_type=interp)
        assert (out == 77).all()


def test_resize_nearest_neighbour_doubling_repeats_pixels():
    im = rgb_pattern(3, 4)
    for interp in ("nn", "nearest_neighbor"):
        out, _, _ = dec.resize([im], (8, 6), interpolation_type=interp)
        np.testing.assert_array_equal(out[0], np.repeat(np.repeat(im, 2, axis=0), 2, axis=1))


def test_resize_area_halving_averages_blocks():
    im = rgb_pattern(8, 8).astype(np.uint8)
    out, _, _ = dec.resize([im], (4, 4), interpolation_type="area")
    ref = im.reshape(4, 2, 4, 2, 3).astype(float).mean(axis=(1, 3))
    err = np.abs(out[0].astype(float) - ref)
    assert err.max() <= 1.0 and err.mean() < 0.6  # Pillow's fixed-point box filter rounds


def test_resize_auto_is_bilinear_when_enlarging_and_area_when_shrinking():
    im = rgb_pattern(12, 16)
    up = {k: dec.resize([im], (32, 24), interpolation_type=k)[0] for k in ("auto", "bilinear", "area")}
    np.testing.assert_array_equal(up["auto"], up["bilinear"])
    down = {k: dec.resize([im], (5, 7), interpolation_type=k)[0] for k in ("auto", "bilinear", "area")}
    np.testing.assert_array_equal(down["auto"], down["area"])
    assert not np.array_equal(down["area"], down["bilinear"])
    # same pixel count counts as "not shrinking": bilinear
    same = {k: dec.resize([im], (12, 16), interpolation_type=k)[0] for k in ("auto", "bilinear")}
    np.testing.assert_array_equal(same["auto"], same["bilinear"])


def test_resize_bicubic_differs_from_bilinear():
    im = rgb_pattern(10, 10)
    a = dec.resize([im], (25, 25), interpolation_type="bicubic")[0]
    b = dec.resize([im], (25, 25), interpolation_type="bilinear")[0]
    assert not np.array_equal(a, b)


def test_resize_one_channel_images():
    g = np.arange(36, dtype=np.uint8).reshape(6, 6, 1)
    out, _, _ = dec.resize([g], (3, 3), channels=1)
    assert out.shape == (1, 3, 3, 1)


def test_resize_rejects_bad_arguments():
    im = rgb_pattern(4, 4)
    with pytest.raises(ValueError, match="interpolation_type"):
        dec.resize([im], (2, 2), interpolation_type="lanczos")
    with pytest.raises(ValueError, match="channels"):
        dec.resize([im], (2, 2), channels=1)
    with pytest.raises(ValueError, match="width, height"):
        dec.resize([im], 5)
    with pytest.raises(ValueError, match="uint8 or float32"):
        dec.resize([im], (2, 2), dtype=np.int32)
    with pytest.raises(ValueError, match="positive int"):
        dec.resize([im], (2, 2), keep_aspect_ratio=True)
    with pytest.raises(ValueError, match="resize_side"):
        dec.resize([im], 2, keep_aspect_ratio=True, resize_side="both")
    with pytest.raises(ValueError, match="min_size"):
        dec.resize([im], 2, keep_aspect_ratio=True, min_size=3)
    with pytest.raises(ValueError, match="max_size"):
        dec.resize([im], 5, keep_aspect_ratio=True, max_size=3)


def _keep(h, w, target, **kw):
    im = np.zeros((h, w, 3), np.uint8)
    out, scale, new_size = dec.resize([im], target, keep_aspect_ratio=True, **kw)
    return out[0], scale[0], tuple(int(v) for v in new_size[0])


def test_resize_keep_aspect_shorter_side():
    out, scale, size = _keep(100, 200, 50)
    assert size == (100, 50) and out.shape == (50, 100, 3)
    np.testing.assert_allclose(scale, [0.5, 0.5])
    assert _keep(300, 150, 60)[2] == (60, 120)


def test_resize_keep_aspect_longer_side():
    assert _keep(100, 200, 50, resize_side="longer")[2] == (50, 25)
    assert _keep(300, 150, 60, resize_side="longer")[2] == (30, 60)


def test_resize_keep_aspect_max_size_caps_longer_side():
    assert _keep(100, 300, 50, max_size=120)[2] == (120, 40)
    assert _keep(100, 300, 50, max_size=200)[2] == (150, 50)


def test_resize_keep_aspect_min_size_floors_shorter_side():
    assert _keep(100, 400, 100, resize_side="longer", min_size=40)[2] == (160, 40)
    assert _keep(100, 400, 100, resize_side="longer", min_size=20)[2] == (100, 25)


def test_resize_keep_aspect_rounds_half_to_even():
    assert _keep(10, 25, 5)[2] == (12, 5)     # 12.5 -> 12
    assert _keep(10, 25, 15)[2] == (38, 15)   # 37.5 -> 38
    assert _keep(25, 10, 5)[2] == (5, 12)


def test_resize_keep_aspect_outputs_list_int32_sizes_and_float32_scales():
    ims = [rgb_pattern(20, 40), rgb_pattern(30, 10)]
    out, scale, new_size = dec.resize(ims, 10, keep_aspect_ratio=True)
    assert isinstance(out, list) and [o.shape for o in out] == [(10, 20, 3), (30, 10, 3)]
    assert new_size.dtype == np.int32 and new_size.shape == (2, 2)
    assert scale.dtype == np.float32
    np.testing.assert_array_equal(new_size, [[20, 10], [10, 30]])
    np.testing.assert_allclose(scale, [[0.5, 0.5], [1.0, 1.0]])


def test_resize_keep_aspect_keeps_input_dtype_unless_asked():
    im = smooth_rgb(10, 20).astype(np.float32)
    out, _, _ = dec.resize([im], 5, keep_aspect_ratio=True)
    assert out[0].dtype == np.float32 and out[0].shape == (5, 10, 3)
    out, _, _ = dec.resize([im], 5, keep_aspect_ratio=True, dtype=np.uint8)
    assert out[0].dtype == np.uint8


def test_resize_keep_aspect_tiny_side_is_at_least_one_pixel():
    assert _keep(1, 1000, 10, resize_side="longer")[2] == (10, 1)


# --------------------------------------------------------------------------- crop mirror normalize


def reference_cmn(images, crop_h, crop_w, pos_y, pos_x, mean, std, mirror, layout):
    """Straight per-pixel loops following the OneFlow formula."""
    outs = []
    for i, im in enumerate(images):
        H, W, C = im.shape
        oh, ow = crop_h or H, crop_w or W
        y0 = int(np.float32(H - oh) * np.float32(pos_y))
        x0 = int(np.float32(W - ow) * np.float32(pos_x))
        m = np.broadcast_to(np.asarray(mean, np.float32), (C,))
        s = np.broadcast_to(np.asarray(std, np.float32), (C,))
        o = np.zeros((oh, ow, C), np.float32)
        for yy in range(oh):
            for xx in range(ow):
                sx = x0 + (ow - 1 - xx if mirror[i] else xx)
                for c in range(C):
                    o[yy, xx, c] = (np.float32(im[y0 + yy, sx, c]) - m[c]) / s[c]
        outs.append(o.transpose(2, 0, 1) if layout == "NCHW" else o)
    return np.stack(outs)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("pos", [(0.0, 0.0), (0.5, 0.5), (0.3, 0.7), (1.0, 1.0)])
def test_cmn_matches_reference_for_crops_mirror_and_per_channel_stats(layout, pos):
    batch = np.stack([rgb_pattern(11, 14, s) for s in range(4)])
    mirror = np.array([0, 1, 1, 0], np.int8)
    mean, std = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]
    out = dec.crop_mirror_normalize(batch, output_layout=layout, crop_h=6, crop_w=9,
                                    crop_pos_y=pos[0], crop_pos_x=pos[1], mean=mean, std=std, mirror=mirror)
    ref = reference_cmn(batch, 6, 9, pos[0], pos[1], mean, std, mirror, layout)
    assert out.dtype == np.float32 and out.flags.c_contiguous
    assert out.shape == ((4, 3, 6, 9) if layout == "NCHW" else (4, 6, 9, 3))
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_cmn_crop_offset_is_truncated_fraction_of_the_slack():
    im = np.arange(10, dtype=np.uint8)[None, :, None].repeat(3, axis=2)[None]  # (1, 1, 10, 3)
    for pos, first in ((0.0, 0), (0.5, 3), (0.99, 5), (1.0, 6)):
        out = dec.crop_mirror_normalize(im, crop_h=1, crop_w=4, crop_pos_x=pos, output_layout="NHWC")
        assert out[0, 0, 0, 0] == first


def test_cmn_mirror_flips_the_crop_not_the_image():
    im = np.arange(10, dtype=np.uint8)[None, :, None].repeat(3, axis=2)[None]
    out = dec.crop_mirror_normalize(im, crop_h=1, crop_w=4, crop_pos_x=0.0, mirror=[1], output_layout="NHWC")
    np.testing.assert_array_equal(out[0, 0, :, 0], [3, 2, 1, 0])


def test_cmn_scalar_mean_std_broadcast_and_no_crop_keeps_size():
    batch = np.stack([rgb_pattern(5, 6)])
    out = dec.crop_mirror_normalize(batch, mean=[10.0], std=[2.0])
    assert out.shape == (1, 3, 5, 6)
    np.testing.assert_allclose(out, (batch.astype(np.float32).transpose(0, 3, 1, 2) - 10) / 2, rtol=1e-6)


def test_cmn_mirror_scalar_applies_to_every_image():
    batch = np.stack([rgb_pattern(4, 5, s) for s in range(2)])
    out = dec.crop_mirror_normalize(batch, mirror=1, output_layout="NHWC")
    np.testing.assert_array_equal(out, batch[:, :, ::-1].astype(np.float32))


def test_cmn_list_input_needs_crop_and_handles_variable_sizes():
    ims = [rgb_pattern(10, 12), rgb_pattern(7, 9, 1)]
    with pytest.raises(ValueError, match="crop_h and crop_w"):
        dec.crop_mirror_normalize(ims)
    out = dec.crop_mirror_normalize(ims, crop_h=5, crop_w=6, mean=[1, 2, 3], std=[4], mirror=[0, 1])
    ref = reference_cmn(ims, 5, 6, 0.5, 0.5, [1, 2, 3], [4, 4, 4], [0, 1], "NCHW")
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_cmn_gray_uses_one_channel():
    batch = np.arange(2 * 4 * 4, dtype=np.uint8).reshape(2, 4, 4, 1)
    out = dec.crop_mirror_normalize(batch, color_space="GRAY", crop_h=2, crop_w=2)
    assert out.shape == (2, 1, 2, 2)
    with pytest.raises(ValueError, match="channels"):
        dec.crop_mirror_normalize(batch, color_space="RGB")


def test_cmn_rejects_bad_arguments():
    batch = np.zeros((1, 4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="does not fit"):
        dec.crop_mirror_normalize(batch, crop_h=5, crop_w=2)
    with pytest.raises(ValueError, match="mean"):
        dec.crop_mirror_normalize(batch, mean=[1, 2])
    with pytest.raises(ValueError, match="output_layout"):
        dec.crop_mirror_normalize(batch, output_layout="CHW")
    with pytest.raises(ValueError, match="crop_pos_x"):
        dec.crop_mirror_normalize(batch, crop_pos_x=1.5)
    with pytest.raises(ValueError, match="mirror"):
        dec.crop_mirror_normalize(batch, mirror=[0, 1])
    with pytest.raises(ValueError, match="uint8"):
        dec.crop_mirror_normalize(batch.astype(np.float32))


# --------------------------------------------------------------------------- coin flip / flip / align / normalize


def test_coin_flip_is_deterministic_int8_zero_one():
    a = dec.coin_flip(64, random_seed=5)
    b = dec.coin_flip(64, random_seed=5)
    assert a.dtype == np.int8 and a.shape == (64,)
    np.testing.assert_array_equal(a, b)
    assert set(np.unique(a)) <= {0, 1}
    assert not np.array_equal(a, dec.coin_flip(64, random_seed=6))


def test_coin_flip_follows_probability():
    assert dec.coin_flip(1000, 1, probability=0.0).sum() == 0
    assert dec.coin_flip(1000, 1, probability=1.0).sum() == 1000
    assert abs(dec.coin_flip(20000, 3, probability=0.3).mean() - 0.3) < 0.02
    assert dec.coin_flip(random_seed=0).shape == (1,)


def test_coin_flip_generator_advances_between_batches():
    g = np.random.default_rng(0)
    first, second = dec.coin_flip(32, g), dec.coin_flip(32, g)
    assert not np.array_equal(first, second)
    np.testing.assert_array_equal(first, dec.coin_flip(32, np.random.default_rng(0)))


def test_coin_flip_rejects_bad_probability():
    with pytest.raises(ValueError):
        dec.coin_flip(2, probability=1.5)


def test_coin_flip_drives_cmn_mirror():
    batch = np.stack([rgb_pattern(4, 6, s) for s in range(8)])
    m = dec.coin_flip(8, random_seed=2)
    out = dec.crop_mirror_normalize(batch, mirror=m, output_layout="NHWC")
    for i in range(8):
        src = batch[i, :, ::-1] if m[i] else batch[i]
        np.testing.assert_array_equal(out[i], src.astype(np.float32))


def test_flip_codes_on_lists_and_arrays():
    im = rgb_pattern(3, 4)
    outs = dec.flip([im] * 4, [0, 1, 2, 3])
    np.testing.assert_array_equal(outs[0], im)
    np.testing.assert_array_equal(outs[1], im[:, ::-1])
    np.testing.assert_array_equal(outs[2], im[::-1])
    np.testing.assert_array_equal(outs[3], im[::-1, ::-1])
    batch = np.stack([im] * 4)
    arr = dec.flip(batch, [0, 1, 2, 3])
    assert isinstance(arr, np.ndarray)
    for i in range(4):
        np.testing.assert_array_equal(arr[i], outs[i])
    np.testing.assert_array_equal(dec.flip(batch, 1)[2], im[:, ::-1])
    np.testing.assert_array_equal(batch[1], im)  # input untouched
    with pytest.raises(ValueError):
        dec.flip([im], 4)


def test_batch_align_zero_pads_to_aligned_max_size():
    ims = [np.full((5, 3, 3), 1, np.uint8), np.full((2, 7, 3), 2, np.uint8)]
    out = dec.batch_align(ims, alignment=4)
    assert out.shape == (2, 8, 8, 3) and out.dtype == np.uint8
    assert (out[0, :5, :3] == 1).all() and out[0].sum() == 5 * 3 * 3
    assert (out[1, :2, :7] == 2).all() and out[1].sum() == 2 * 2 * 7 * 3
    assert dec.batch_align(ims).shape == (2, 5, 7, 3)
    with pytest.raises(ValueError, match="channel"):
        dec.batch_align([np.zeros((2, 2, 3), np.uint8), np.zeros((2, 2, 1), np.uint8)])


def test_normalize_per_channel():
    im = rgb_pattern(3, 3)
    out = dec.normalize([im], std=[2.0, 4.0, 8.0], mean=[1.0, 2.0, 3.0])[0]
    np.testing.assert_allclose(out, (im.astype(np.float32) - [1, 2, 3]) / [2, 4, 8], rtol=1e-6)


# --------------------------------------------------------------------------- an ImageNet-style pipeline


def test_imagenet_style_train_pipeline_end_to_end():
    records = [{"encoded": byteses(encode(smooth_rgb(40 + 3 * i, 50), "JPEG")), "class/label": int32s(i)}
               for i in range(4)]
    labels = dec.raw_decode(records, "class/label", (), np.int32)
    images = dec.image_decode_random_crop(records, "encoded", "RGB", random_seed=0)
    resized, _, _ = dec.resize(images, (24, 24))
    mirror = dec.coin_flip(4, random_seed=0)
    out = dec.crop_mirror_normalize(resized, color_space="RGB", mean=[123.68, 116.779, 103.939],
                                    std=[58.393, 57.12, 57.375], mirror=mirror)
    assert labels.tolist() == [0, 1, 2, 3]
    assert out.shape == (4, 3, 24, 24) and out.dtype == np.float32 and np.isfinite(out).all()
