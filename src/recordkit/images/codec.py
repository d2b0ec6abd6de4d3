"""Image decoding, crop windows and resizing, for OneFlow's image ops and recordkit's image stage.

OneFlow decodes and resizes with OpenCV (libjpeg-turbo / libpng under ``cv::imdecode``, then
``cv::resize``), and so does this module: ``cv2.imdecode`` and ``cv2.resize`` give OneFlow's
pixels by construction, and both release the GIL, so a thread pool can run them on every core.
Pillow only reads headers (the pixel budget and the truncation floor are checked before anything
is decoded) and decodes the formats outside :data:`CV_FORMATS`. Everything works on HWC ``uint8``
(or ``float32`` for resizing) NumPy arrays. The OneFlow-shaped API lives in
:mod:`recordkit.compat.oneflow.ops.image_ops`, the format-independent stage in
:mod:`recordkit.images.stage`; this module holds the pieces:

* :func:`decode_image` -- encoded bytes to an HWC array in RGB, BGR or GRAY, optionally only a
  window of it, optionally decoded at 1/2, 1/4 or 1/8 scale (JPEG's DCT scaling) while that
  window still covers a wanted size;
* :func:`random_crop_window` -- OneFlow's Inception-style crop window
  (``oneflow/user/image/random_crop_generator.cpp``), driven by a NumPy
  ``Generator`` instead of ``std::mt19937``;
* :func:`resize_image` / :func:`keep_aspect_ratio_size` /
  :func:`resample_filter` -- ``image_resize_kernels.cpp``'s sizes and ``cv2.resize``.

OpenCV and Pillow are imported lazily so that importing recordkit requires neither.
"""
from __future__ import annotations

import io
import math
from typing import Sequence

import numpy as np

#: Formats :func:`decode_image` lets Pillow try -- roughly what OpenCV's
#: ``imdecode`` reads. Deliberately a closed list: Pillow plugins such as EPS
#: would start external programs (Ghostscript) on untrusted record bytes.
IMAGE_FORMATS: tuple[str, ...] = (
    "JPEG", "MPO", "PNG", "BMP", "DIB", "PPM", "TIFF", "WEBP", "GIF", "SUN", "JPEG2000",
)

#: color space -> number of channels (OneFlow ``ImageUtil::IsColor``).
COLOR_SPACES = {"RGB": 3, "BGR": 3, "GRAY": 1}

#: OneFlow interpolation names -> filter names ("auto" is resolved per image).
INTERPOLATIONS = {
    "bilinear": "BILINEAR",
    "nearest_neighbor": "NEAREST",
    "nn": "NEAREST",
    "bicubic": "BICUBIC",
    "area": "BOX",
    "auto": None,
}
#: filter name -> ``cv2`` interpolation flag name.
_CV_METHODS = {"BILINEAR": "INTER_LINEAR", "NEAREST": "INTER_NEAREST", "BICUBIC": "INTER_CUBIC", "BOX": "INTER_AREA"}

#: Formats (Pillow's names for them) decoded by ``cv2.imdecode`` -- OneFlow's decoder -- whose
#: failures on truncated data were checked: OpenCV returns no image for a JPEG or PNG missing any
#: of its bytes. Other formats are decoded by Pillow, which raises on truncated data.
CV_FORMATS = frozenset(("JPEG", "MPO", "PNG"))

#: JPEG scale denominators ``cv2.imdecode`` can decode at (libjpeg's DCT scaling), largest first.
REDUCED_SCALES = (8, 4, 2)


def _cv2():
    try:
        import cv2
    except ImportError as exc:  # pragma: no cover - exercised only without OpenCV
        raise ImportError(
            "decoding and resizing images needs OpenCV: pip install 'recordkit[image]' (opencv-python-headless)"
        ) from exc
    return cv2


def _pil():
    try:
        from PIL import Image
    except ImportError as exc:  # pragma: no cover - exercised only without Pillow
        raise ImportError(
            "decoding and resizing OFRecord images needs Pillow: pip install pillow"
        ) from exc
    return Image


def channels_of(color_space: str) -> int:
    """3 for "RGB"/"BGR", 1 for "GRAY"; ValueError for anything else (OneFlow: UNIMPLEMENTED)."""
    try:
        return COLOR_SPACES[color_space]
    except (KeyError, TypeError):
        raise ValueError(
            f"color_space must be one of {', '.join(COLOR_SPACES)}, not {color_space!r}"
        ) from None


class ImageDecodeError(ValueError):
    """The bytes are not an image Pillow can decode (the caller adds file and record)."""


#: Pixels (width x height) an image may declare before it is refused, unread; None: Pillow's
#: ``Image.MAX_IMAGE_PIXELS`` (its decompression-bomb threshold, 89,478,485 unless changed), or
#: that default where Pillow's check is turned off. Pillow only warns between its threshold and
#: twice it, so a 429-byte PNG declaring 12000 x 12000 used to be decoded into 0.6 GB of
#: pixels. ``max_pixels=`` on the decoders overrides this per call (above Pillow's own threshold
#: its ``DecompressionBombWarning``/``Error`` still apply).
MAX_PIXELS: int | None = None
_PILLOW_DEFAULT_MAX_PIXELS = 1024 * 1024 * 1024 // 4 // 3

# Fewest bytes of encoded data per pixel of a declared size, where the format fixes one: a
# JPEG (Huffman coded, sequential or progressive) spends at least one bit on every 8 x 8 block
# of its full-resolution component, a PNG at least 1/1032 byte (deflate's largest ratio) per
# byte of its filtered rows of at least one bit per pixel. Data shorter than that cannot hold
# the image: its header lies (a forged size) or the rest is missing, and decoding it would only
# allocate the declared size to fill it with zeros. Arithmetic-coded JPEGs have no such floor.
_DEFLATE_MAX_RATIO = 1032
_JPEG_ARITHMETIC_SOF = frozenset((0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF))


def pixel_budget(limit=None) -> int:
    """The pixel budget in force: ``limit`` if given, else :data:`MAX_PIXELS`, else Pillow's."""
    if limit is None:
        limit = MAX_PIXELS
    if limit is None:
        limit = getattr(_pil(), "MAX_IMAGE_PIXELS", None) or _PILLOW_DEFAULT_MAX_PIXELS
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or limit <= 0:
        raise ValueError(f"max_pixels must be a positive integer, not {limit!r}")
    return int(limit)


def _check_declared_size(fmt: str, w: int, h: int, data, limit: int) -> None:
    """Refuse an image whose declared size exceeds the pixel budget, or which its bytes cannot
    hold, before any pixel is decoded (nothing the size of the declaration is allocated)."""
    if w * h > limit:
        raise ImageDecodeError(f"{fmt} image declares {w}x{h} = {w * h:,} pixels, more than the limit of "
                               f"{limit:,} (max_pixels): refused before decoding")
    need = _least_encoded_bytes(fmt, w, h, data)
    if need > len(data):
        raise ImageDecodeError(f"{fmt} image of {len(data)} bytes declares {w}x{h} pixels, which need at "
                               f"least {need:,} bytes of encoded data: truncated or a forged size")


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def header_size(data: bytes) -> tuple[str, int, int] | None:
    """``(format, width, height)`` read from a JPEG's first start-of-frame or a PNG's IHDR, without
    Pillow (the header of every image of a batch is read, so this is kept to a few dozen bytes
    of Python); None for anything else, or a header this does not understand (Pillow then reads it)."""
    if data[:8] == _PNG_SIGNATURE and data[12:16] == b"IHDR" and len(data) >= 24:
        w, h = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        return ("PNG", w, h) if w > 0 and h > 0 else None
    if data[:2] != b"\xff\xd8":
        return None
    at = _jpeg_sof_offset(data)
    if at is None or at + 9 > len(data):
        return None
    h, w = int.from_bytes(data[at + 5:at + 7], "big"), int.from_bytes(data[at + 7:at + 9], "big")
    return ("JPEG", w, h) if w > 0 and h > 0 else None


def _least_encoded_bytes(fmt, w: int, h: int, data) -> int:
    """Fewest bytes a ``fmt`` image of ``w`` x ``h`` pixels can be encoded in (0: no floor known)."""
    if fmt == "PNG":
        return h * (1 + (w + 7) // 8) // _DEFLATE_MAX_RATIO
    if fmt in ("JPEG", "MPO") and _jpeg_sof(data) not in _JPEG_ARITHMETIC_SOF:
        return ((w + 7) // 8) * ((h + 7) // 8) // 8
    return 0


def _jpeg_sof(data) -> int | None:
    """The second byte of a JPEG's first start-of-frame marker (0xC0..0xCF but DHT, JPG, DAC)."""
    at = _jpeg_sof_offset(data)
    return None if at is None else data[at + 1]


def _jpeg_sof_offset(data) -> int | None:
    """Offset of a JPEG's first start-of-frame marker, walking the segments from the start."""
    at, n = 2, len(data)
    while at + 4 <= n and data[at] == 0xFF:
        marker = data[at + 1]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return at
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        at += 2 + int.from_bytes(bytes(data[at + 2:at + 4]), "big")
    return None


def _refuse_truncated_loads() -> None:
    """Pillow's ``ImageFile.LOAD_TRUNCATED_IMAGES`` makes a truncated image decode with its missing
    rows zero-filled, silently; recordkit decodes only with it off."""
    from PIL import ImageFile
    if ImageFile.LOAD_TRUNCATED_IMAGES:
        raise ImageDecodeError("PIL.ImageFile.LOAD_TRUNCATED_IMAGES is set: truncated images would decode with "
                               "their missing rows as zeros; recordkit decodes images only with it False")


def _high_bit_depth_to_uint8(arr: np.ndarray) -> np.ndarray:
    """16-bit (or 32-bit integer / float) samples to 8 bits the way OpenCV's IMREAD_COLOR does."""
    if arr.dtype.kind == "f":
        return np.clip(np.rint(arr), 0, 255).astype(np.uint8)
    return (np.clip(arr.astype(np.int64), 0, 65535) >> 8).astype(np.uint8)


def _to_array(im, color_space: str) -> np.ndarray:
    """A loaded PIL image to an HWC uint8 array in ``color_space``."""
    mode = im.mode
    if mode.startswith("I") or mode == "F":
        # 16-bit grayscale PNG/TIFF (or 32-bit int/float): scale to 8 bits, then to channels.
        gray = _high_bit_depth_to_uint8(np.asarray(im))
        if gray.ndim == 3:  # multi-channel high-depth modes are not produced by Pillow; be safe
            gray = gray[..., 0]
        if color_space == "GRAY":
            return np.ascontiguousarray(gray[:, :, None])
        return np.ascontiguousarray(np.repeat(gray[:, :, None], 3, axis=2))
    if color_space == "GRAY":
        if mode == "L":  # a gray image, or a JPEG whose luma libjpeg delivered (see decode_image)
            arr = np.asarray(im)
        else:
            arr = _rgb_to_gray(np.asarray(im if mode == "RGB" else im.convert("RGB")), png=im.format == "PNG")
        return np.ascontiguousarray(arr[:, :, None])
    arr = np.asarray(im if mode == "RGB" else im.convert("RGB"))
    if color_space == "BGR":
        arr = arr[:, :, ::-1]
    return np.ascontiguousarray(arr)


def _rgb_to_gray(rgb: np.ndarray, *, png: bool) -> np.ndarray:
    """Gray from RGB as OpenCV's ``imdecode(IMREAD_GRAYSCALE)`` computes it.

    PNG: libpng's ``png_set_rgb_to_gray(0.299, 0.587)`` (15-bit weights 9797/19234/3737, truncated;
    gray pixels kept); other formats: ``cvtColor``'s ``(4899 R + 9617 G + 1868 B + 2^13) >> 14``.
    (JPEG never gets here: libjpeg decodes its luma directly.)
    """
    r, g, b = (rgb[..., k].astype(np.int32) for k in range(3))
    if png:
        gray = (9797 * r + 19234 * g + 3737 * b) >> 15
        gray = np.where((r == g) & (r == b), r, gray)
    else:
        gray = (4899 * r + 9617 * g + 1868 * b + (1 << 13)) >> 14
    return gray.astype(np.uint8)


_available_formats: tuple[str, ...] | None = None


def _formats(Image) -> tuple[str, ...]:
    """The :data:`IMAGE_FORMATS` this Pillow build registers (``Image.open`` rejects unknown names)."""
    global _available_formats
    if _available_formats is None:
        Image.init()
        _available_formats = tuple(f for f in IMAGE_FORMATS if f in Image.OPEN)
    return _available_formats


def open_image(data, *, max_pixels=None):
    """``PIL.Image`` for encoded bytes (lazy: header parsed, pixels not yet decoded); an image
    declaring more than ``max_pixels`` pixels (default :func:`pixel_budget`), or more than its
    bytes can hold, is an :class:`ImageDecodeError` here, before anything is decoded."""
    Image = _pil()
    limit = pixel_budget(max_pixels)
    data = bytes(data)
    try:
        im = Image.open(io.BytesIO(data), formats=_formats(Image))
    except Exception as exc:  # UnidentifiedImageError, SyntaxError, DecompressionBombError, ...
        why = (f"not an image in any format recordkit decodes ({', '.join(_formats(Image))})"
               if type(exc).__name__ == "UnidentifiedImageError" else str(exc))
        raise ImageDecodeError(f"cannot decode image ({len(data)} bytes): {why}") from exc
    try:
        _check_declared_size(im.format, im.size[0], im.size[1], data, limit)
    except BaseException:
        im.close()
        raise
    return im


def decode_image(data, color_space: str = "BGR", *, window=None, max_pixels=None, cover=None,
                 contiguous: bool = True) -> np.ndarray:
    """Decode encoded image bytes to an HWC uint8 array.

    ``color_space`` is "RGB", "BGR" (C=3) or "GRAY" (C=1). JPEG and PNG are
    decoded by ``cv2.imdecode`` (OneFlow's decoder: its pixels); other formats by
    Pillow, converted as OpenCV's ``IMREAD_COLOR``/``IMREAD_GRAYSCALE`` would
    (alpha dropped; palette, bilevel, CMYK and YCbCr converted; 16-bit samples
    keep their high byte). EXIF orientation is *not* applied (OneFlow's libjpeg
    path, which handles every JPEG, ignores it too). ``window`` is an optional
    crop ``(y, x, h, w)`` or a callable ``(height, width) -> (y, x, h, w)`` that
    is given the image size before the pixels are decoded.

    ``cover=(h, w)`` lets a JPEG be decoded at 1/8, 1/4 or 1/2 scale (libjpeg's
    DCT scaling: the decoder does a fraction of the work) -- the smallest scale
    at which the window still has at least ``h`` x ``w`` pixels; the window is
    then returned at that scale, so the array is smaller than the window. The
    pixels are not those of a full decode; None (the default) always decodes at
    full scale.

    Raises :class:`ImageDecodeError` for bytes that are not a decodable image,
    for an image declaring more than ``max_pixels`` pixels (default
    :data:`MAX_PIXELS`: Pillow's ``Image.MAX_IMAGE_PIXELS``) or more than its
    bytes can hold (both from the header, before anything is decoded), and for
    truncated pixel data (never zero-filled rows).

    ``contiguous=False`` lets a JPEG/PNG window come back as a view into the decoded image (rows
    apart by the image's stride) rather than a copy: for a caller that only reads it once, as
    :func:`resize_image` does.
    """
    channels_of(color_space)
    if cover is not None:
        cover = cover_size(cover)
    _refuse_truncated_loads()
    data = bytes(data)
    head = header_size(data)
    if head is None:
        im = open_image(data, max_pixels=max_pixels)
        if im.format not in CV_FORMATS:
            return _decode_pillow(im, data, color_space, window)
        fmt, (width, height) = im.format, im.size
        im.close()
    else:
        fmt, width, height = head
        _check_declared_size(fmt, width, height, data, pixel_budget(max_pixels))
    if callable(window):
        window = window(height, width)
    return _decode_cv(data, fmt, height, width, color_space, window, cover, contiguous)


def cover_size(cover) -> tuple[int, int]:
    """``cover`` checked: a ``(h, w)`` pair of positive ints."""
    try:
        h, w = cover
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v > 0 for v in (h, w))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"cover must be a (height, width) pair of positive ints, not {cover!r}")
    return int(h), int(w)


def reduced_scale(height: int, width: int, cover) -> int:
    """The largest of :data:`REDUCED_SCALES` (else 1) at which ``height`` x ``width`` pixels still
    cover ``cover=(h, w)`` (rounding down: a window at that scale has at least that many)."""
    ch, cw = (int(v) for v in cover)
    for s in REDUCED_SCALES:
        if height // s >= ch and width // s >= cw:
            return s
    return 1


def _imread_flags(cv2, color_space: str, scale: int) -> tuple[int, bool]:
    """``imdecode`` flags, and whether they give RGB (OpenCV >= 4.11's ``IMREAD_COLOR_RGB``: libjpeg
    writes RGB, no conversion pass) rather than BGR."""
    gray = color_space == "GRAY"
    rgb = color_space == "RGB" and scale == 1 and hasattr(cv2, "IMREAD_COLOR_RGB")
    if rgb:
        flag = cv2.IMREAD_COLOR_RGB
    elif scale == 1:
        flag = cv2.IMREAD_GRAYSCALE if gray else cv2.IMREAD_COLOR
    else:
        flag = getattr(cv2, f"IMREAD_REDUCED_{'GRAYSCALE' if gray else 'COLOR'}_{scale}")
    return flag | cv2.IMREAD_IGNORE_ORIENTATION, rgb


def _decode_cv(data: bytes, fmt: str, height: int, width: int, color_space: str, window, cover,
               contiguous: bool = True) -> np.ndarray:
    """``cv2.imdecode`` of a JPEG/PNG whose header said ``height`` x ``width``; ``window`` in full-scale
    pixels. OpenCV returns no image (never a partial one) for corrupt or truncated data."""
    cv2 = _cv2()
    scale = 1
    if cover is not None and fmt in ("JPEG", "MPO"):
        wh, ww = (height, width) if window is None else (int(window[2]), int(window[3]))
        scale = reduced_scale(wh, ww, cover)
    flags, rgb = _imread_flags(cv2, color_space, scale)
    arr = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    if arr is None:
        raise ImageDecodeError(f"cannot decode {fmt} image ({len(data)} bytes): corrupt or truncated data")
    hs, ws = -(-height // scale), -(-width // scale)  # libjpeg's scaled size rounds up
    if arr.shape[:2] != (hs, ws):
        raise ImageDecodeError(f"{fmt} image ({len(data)} bytes) declares {width}x{height} pixels but decodes to "
                               f"{arr.shape[1] * scale}x{arr.shape[0] * scale}")
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if window is not None:
        y, x, h, w = (int(v) for v in window)
        if scale == 1:
            arr = arr[y:y + h, x:x + w]
        else:
            arr = arr[y // scale:min(hs, -(-(y + h) // scale)), x // scale:min(ws, -(-(x + w) // scale))]
    if color_space == "RGB" and not rgb:
        return cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(arr) if contiguous else arr


def _decode_pillow(im, data: bytes, color_space: str, window) -> np.ndarray:
    """Decode an opened ``PIL.Image`` (a format outside :data:`CV_FORMATS`) as OpenCV would."""
    try:
        with im:
            if callable(window):
                window = window(im.height, im.width)
            try:
                im.load()
            except Exception as exc:  # truncated or corrupt pixel data
                raise ImageDecodeError(
                    f"cannot decode {im.format} image ({len(data)} bytes): {exc}"
                ) from exc
            arr = _to_array(im, color_space)
    except ImageDecodeError:
        raise
    except Exception as exc:  # conversion failures on exotic modes
        raise ImageDecodeError(f"cannot decode image ({len(data)} bytes): {exc}") from exc
    if window is not None:
        y, x, h, w = (int(v) for v in window)
        arr = np.ascontiguousarray(arr[y:y + h, x:x + w])
    return arr


# --------------------------------------------------------------------------- random crop


def _round_half_away(x: float) -> int:
    """``std::roundf`` for the non-negative values the crop generator feeds it."""
    return int(math.floor(x + 0.5))


def random_crop_window(
    height: int,
    width: int,
    rng: np.random.Generator,
    *,
    num_attempts: int = 10,
    random_area: Sequence[float] = (0.08, 1.0),
    random_aspect_ratio: Sequence[float] = (0.75, 1.333333),
) -> tuple[int, int, int, int]:
    """One Inception-style crop window ``(y, x, h, w)`` for an image of ``height`` x ``width``.

    Follows ``RandomCropGenerator::GenerateCropWindow``: if even a full-height
    (full-width) crop at the extreme aspect ratio is below the minimum area,
    that crop is taken; otherwise up to ``num_attempts`` tries draw an area
    fraction uniformly from ``random_area`` and a w/h ratio log-uniformly from
    ``random_aspect_ratio``, with ``w = round(sqrt(area*ratio))`` and
    ``h = round(sqrt(area/ratio))``, accepting the first that fits and whose
    rounded ratio stays in range. Otherwise the fallback is the whole image,
    clamped to the ratio range and shrunk to at most the maximum area. The
    anchor is uniform over all valid positions. The random stream is NumPy's,
    not ``std::mt19937``'s, so windows differ from OneFlow's for the same seed.
    """
    H, W = int(height), int(width)
    if H <= 0 or W <= 0:
        return 0, 0, max(H, 0), max(W, 0)
    area_lo, area_hi = (float(v) for v in random_area)
    ratio_lo, ratio_hi = (float(v) for v in random_aspect_ratio)
    log_lo, log_hi = math.log(ratio_lo), math.log(ratio_hi)
    max_hw_ratio = 1.0 / ratio_lo
    min_area = W * H * area_lo
    max_w = max(1, int(H * ratio_hi))
    max_h = max(1, int(W * max_hw_ratio))

    if H * max_w < min_area:
        h, w = H, max_w
    elif W * max_h < min_area:
        h, w = max_h, W
    else:
        accepted = False
        for _ in range(int(num_attempts)):
            target_area = rng.uniform(area_lo, area_hi) * (H * W)
            ratio = math.exp(rng.uniform(log_lo, log_hi))
            w = max(1, _round_half_away(math.sqrt(target_area * ratio)))
            h = max(1, _round_half_away(math.sqrt(target_area / ratio)))
            r = w / h
            if w <= W and h <= H and ratio_lo <= r <= ratio_hi:
                accepted = True
                break
        if not accepted:
            max_area = area_hi * W * H
            r = W / H
            if r > ratio_hi:
                h, w = H, max_w
            elif r < ratio_lo:
                h, w = max_h, W
            else:
                h, w = H, W
            scale = min(1.0, max_area / (h * w))
            h = max(1, int(h * math.sqrt(scale)))
            w = max(1, int(w * math.sqrt(scale)))
    # OneFlow CHECKs these; the clamp only matters for degenerate ranges.
    h, w = min(h, H), min(w, W)
    y = int(rng.integers(0, H - h + 1))
    x = int(rng.integers(0, W - w + 1))
    return y, x, h, w


def validate_crop_ranges(num_attempts, random_area, random_aspect_ratio) -> None:
    if int(num_attempts) < 0:
        raise ValueError(f"num_attempts must be >= 0, not {num_attempts}")
    if len(random_area) != 2 or len(random_aspect_ratio) != 2:
        raise ValueError("random_area and random_aspect_ratio must be (min, max) pairs")
    a_lo, a_hi = (float(v) for v in random_area)
    if not (0.0 < a_lo <= a_hi <= 1.0):
        raise ValueError(f"random_area must satisfy 0 < min <= max <= 1, not {tuple(random_area)}")
    r_lo, r_hi = (float(v) for v in random_aspect_ratio)
    if not (0.0 < r_lo <= r_hi) or not math.isfinite(r_hi):
        raise ValueError(
            f"random_aspect_ratio must satisfy 0 < min <= max, not {tuple(random_aspect_ratio)}"
        )


# --------------------------------------------------------------------------- resize


def resample_filter(interpolation_type: str, old_wh, new_wh) -> str:
    """Pillow filter name for a OneFlow interpolation name.

    "auto" is bilinear when the new image has at least as many pixels as the
    old one, area (``BOX``) otherwise -- ``GetCvInterpolationFlag``.
    """
    try:
        name = INTERPOLATIONS[interpolation_type]
    except (KeyError, TypeError):
        raise ValueError(
            f"interpolation_type must be one of {', '.join(INTERPOLATIONS)}, "
            f"not {interpolation_type!r}"
        ) from None
    if name is None:
        ow, oh = old_wh
        nw, nh = new_wh
        name = "BILINEAR" if nw * nh >= ow * oh else "BOX"
    return name


def resize_image(image: np.ndarray, width: int, height: int, filter_name: str, out: np.ndarray | None = None
                 ) -> np.ndarray:
    """Resize one HWC image (uint8 or float32, any C) to ``height`` x ``width``, same dtype (into
    ``out``, an HWC array of that shape and dtype, when given: a batch's slot; returned).

    ``filter_name`` is one of :data:`INTERPOLATIONS`' values; ``cv2.resize`` does the work, as in
    OneFlow's kernel, so the pixels are OneFlow's (float32 bicubic: within a few float32 ulps, the
    wheels' SIMD kernels fuse multiply-adds OneFlow's build does not). A uint8 image shrunk with
    "BOX" (OneFlow's "area", what "auto" picks to shrink) by a factor that is not whole goes through
    :func:`recordkit.images._kernel.resize_area` instead: ``cv2.resize``'s bytes, about twice as fast.
    """
    width, height = int(width), int(height)
    if filter_name == "BOX" and image.dtype == np.uint8 and image.ndim == 3 and _generic_area(
            image.shape[0], image.shape[1], height, width):
        from recordkit.images import _kernel
        if out is None or not out.flags.c_contiguous:
            res = np.empty((height, width, image.shape[2]), np.uint8)
            _kernel.resize_area(image, res)
            return res if out is None else _into(out, res)
        _kernel.resize_area(image, out)
        return out
    cv2 = _cv2()
    # Intel IPP's resize (on in the OpenCV wheels) rounds bicubic and float bilinear differently from
    # OneFlow's OpenCV build; the switch is per thread, so turning it off here touches no other code.
    ipp = cv2.ipp.useIPP()
    if ipp:
        cv2.ipp.setUseIPP(False)
    try:
        res = cv2.resize(image, (width, height), interpolation=getattr(cv2, _CV_METHODS[filter_name]))
    finally:
        if ipp:
            cv2.ipp.setUseIPP(True)
    res = res[:, :, None] if res.ndim == 2 else res
    return res if out is None else _into(out, res)


def _into(out: np.ndarray, res: np.ndarray) -> np.ndarray:
    out[...] = res
    return out


def _generic_area(src_h: int, src_w: int, dst_h: int, dst_w: int) -> bool:
    """Whether ``cv2.resize(INTER_AREA)`` takes OpenCV's generic area path (the one
    ``_kernel.resize_area`` reproduces): both sides shrink (scale = 1 / (dst / src) >= 1, computed as
    OpenCV does), and not both by a whole factor (OpenCV's ``is_area_fast``, within DBL_EPSILON of
    ``cvRound``)."""
    sx, sy = 1.0 / (dst_w / src_w), 1.0 / (dst_h / src_h)
    if sx < 1 or sy < 1:
        return False
    eps = np.finfo(np.float64).eps
    return not (abs(sx - round(sx)) < eps and abs(sy - round(sy)) < eps)


def keep_aspect_ratio_size(
    height: int, width: int, target_size: int, *, resize_longer: bool, min_size: int = 0, max_size: int = 0
) -> tuple[int, int]:
    """``(new_w, new_h)`` as ``GetTargetResizedSize4ImageBuffer`` computes them.

    The shorter (or longer) side becomes ``target_size``, the other keeps the
    aspect ratio with round-half-even; ``max_size`` caps the longer side when
    resizing the shorter one, ``min_size`` floors the shorter side when
    resizing the longer one. Sides are at least 1 (OneFlow would hand OpenCV a
    zero size for extreme aspect ratios).
    """
    org_min = float(min(height, width))
    org_max = float(max(height, width))
    aspect = org_min / org_max
    if resize_longer:
        res_max = float(target_size)
        res_min = float(np.rint(res_max * aspect))
        if min_size > 0 and res_min < min_size:
            res_min = float(min_size)
            res_max = float(np.rint(res_min / aspect))
    else:
        res_min = float(target_size)
        res_max = float(np.rint(res_min / aspect))
        if max_size > 0 and res_max > max_size:
            res_max = float(max_size)
            res_min = float(np.rint(res_max * aspect))
    res_min_i, res_max_i = max(1, int(res_min)), max(1, int(res_max))
    if width < height:
        return res_min_i, res_max_i
    return res_max_i, res_min_i


def to_dtype(image: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``cv::Mat::convertTo``: float to uint8 rounds half-even and saturates."""
    if image.dtype == dtype:
        return image
    if dtype == np.uint8:
        return np.clip(np.rint(image), 0, 255).astype(np.uint8)
    return image.astype(dtype)


# --------------------------------------------------------------------------- normalize


def per_channel(values, C: int, what: str) -> np.ndarray:
    """``values`` as ``C`` float32 values (one value is repeated)."""
    arr = np.asarray(values, dtype=np.float32).reshape(-1)
    if arr.size == 1:
        return np.full(C, arr[0], dtype=np.float32)
    if arr.size != C:
        raise ValueError(f"{what} must have 1 or {C} values, not {arr.size}")
    return arr


def normalize_table(mean: np.ndarray, inv_std: np.ndarray) -> np.ndarray:
    """``(C, 256)`` float32: ``(v - mean[c]) * inv_std[c]`` for every byte ``v``, computed as NumPy
    computes it on an image (float32 subtract, then float32 multiply) -- the values
    :func:`normalize_into` writes, looked up instead of computed per pixel."""
    v = np.arange(256, dtype=np.uint8)
    table = np.empty((len(mean), 256), np.float32)
    for c in range(len(mean)):
        np.subtract(v, mean[c], out=table[c], dtype=np.float32)
        np.multiply(table[c], inv_std[c], out=table[c])
    return table


def normalize_into(image: np.ndarray, mean: np.ndarray, inv_std: np.ndarray, out: np.ndarray, chw: bool,
                   mirror: bool = False, table: np.ndarray | None = None) -> None:
    """``(image - mean[c]) * inv_std[c]`` in float32 (OneFlow's arithmetic) of a uint8 HWC ``image``
    (flipped left-right first if ``mirror``), written into ``out``: ``(C, h, w)`` when ``chw`` else
    ``(h, w, C)``; one pass (compiled, without the GIL) through :func:`normalize_table` (``table``,
    made here when not given: pass it when normalizing many images)."""
    from recordkit.images import _kernel
    if table is None:
        table = normalize_table(mean, inv_std)
    _kernel.normalize_lut(image, table, out, chw, mirror)
