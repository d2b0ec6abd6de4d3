"""``cv::resize`` as OneFlow 0.9 runs it, in NumPy: the same pixels, bit for bit, for uint8 images.

OneFlow's ``image.Resize`` (and so ``flow.nn.image.Resize``) calls OpenCV's ``cv::resize``. To give
a OneFlow user the same pixels, its arithmetic is reproduced here rather than approximated with
another library's filters (Pillow antialiases when shrinking, OpenCV does not; that alone moved
pixels by up to 160 levels at sharp edges):

* ``bilinear`` (``INTER_LINEAR``): source position ``(d + 0.5) * scale - 0.5`` in float32, edge
  pixels clamped, weights ``round(w * 2048)`` as int16; the horizontal pass in int32, the vertical
  one as OpenCV's SIMD kernel computes it: ``(hi16((r0 >> 4) * b0) + hi16((r1 >> 4) * b1) + 2) >> 2``.
  An exact 2x reduction in both axes is OpenCV's area average, as in OpenCV.
* ``area`` (``INTER_AREA``): shrinking in both axes by integer factors is the block mean (2x2:
  ``(a + b + c + d + 2) >> 2``); other shrinking uses the exact-coverage weight tables
  (``computeResizeAreaTab``) accumulated in float32 in OpenCV's order, then rounded half to even;
  when an axis grows, OpenCV's "area-mode" bilinear weights.
* ``bicubic`` (``INTER_CUBIC``, A = -0.75): float32 coefficients, int16 fixed point and replicated
  borders horizontally; vertically OpenCV's SIMD pass in float32 (``round(sum(row_k * beta_k / 2048^2))``,
  ties to even) over 8-value blocks of a row and its fixed-point scalar tail (ties up) for the rest: the
  block width is that of OpenCV's AVX2 kernels, which OneFlow's OpenCV runs on CPUs with AVX2 (on an
  older CPU OneFlow's own output would differ in the tails' ties).
* ``nearest`` (``INTER_NEAREST``): source index ``floor(d * src / dst)``, clamped.

Checked against OneFlow 0.9.0's ``Resize`` on random uint8 images (96 size/method combinations,
every pixel equal; ``tests/test_compat_oneflow_golden.py`` keeps a set of them). float32 images use
the same tables with float32 arithmetic (OpenCV's float kernels), equal to OneFlow's within a few
float32 ulps (operation order and fused multiply-adds differ).
"""
from __future__ import annotations

import numpy as np

METHODS = ("bilinear", "nearest", "bicubic", "area")
_COEF = 2048  # INTER_RESIZE_COEF_SCALE
_F32 = np.float32


def _positions(src: int, dst: int, area_mode: bool = False):
    """(index, fraction) per destination pixel, as resizeGeneric's tables (float32 fractions)."""
    inv_scale = np.float64(dst) / np.float64(src)
    scale = 1.0 / inv_scale
    d = np.arange(dst, dtype=np.float64)
    if not area_mode:
        f = ((d + 0.5) * scale - 0.5).astype(_F32)
        s = np.floor(f).astype(np.int64)
        f = (f - s.astype(_F32)).astype(_F32)
    else:
        s = np.floor(d * scale).astype(np.int64)
        f = ((d + 1) - (s + 1) * inv_scale).astype(_F32)
        f = np.where(f <= 0, _F32(0), f - np.floor(f)).astype(_F32)
    return s, f


def _fixed(w: np.ndarray) -> np.ndarray:
    """``saturate_cast<short>(w * INTER_RESIZE_COEF_SCALE)`` (round half to even)."""
    return np.rint(w.astype(_F32) * _F32(_COEF)).astype(np.int64)


def _cols(S: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``S[:, index]`` for an (H, W, C) array, gathered as whole (W * C) rows (about 2x faster for C = 3)."""
    H, W, C = S.shape
    flat = (index[:, None] * C + np.arange(C)).ravel()
    return S.reshape(H, W * C)[:, flat].reshape(H, len(index), C)


def _linear_tables(src: int, dst: int, area_mode: bool, clamp_fraction: bool):
    s, f = _positions(src, dst, area_mode)
    if clamp_fraction:  # the x axis: positions outside the image use the edge pixel alone
        low, high = s < 0, s >= src - 1
        f = np.where(low | high, _F32(0), f)
        s = np.where(low, 0, np.where(high, src - 1, s))
    return s, f


def _linear(image: np.ndarray, width: int, height: int, area_mode: bool = False) -> np.ndarray:
    H, W, _ = image.shape
    sx, fx = _linear_tables(W, width, area_mode, clamp_fraction=True)
    sy, fy = _linear_tables(H, height, area_mode, clamp_fraction=False)
    x0, x1 = sx, np.minimum(sx + 1, W - 1)
    y0, y1 = np.clip(sy, 0, H - 1), np.clip(sy + 1, 0, H - 1)
    if image.dtype == np.uint8:
        a0, a1 = _fixed(_F32(1) - fx).astype(np.int32), _fixed(fx).astype(np.int32)
        b0 = _fixed(_F32(1) - fy).astype(np.int32)[:, None, None]
        b1 = _fixed(fy).astype(np.int32)[:, None, None]
        S = image.astype(np.int32)
        rows = _cols(S, x0) * a0[None, :, None] + _cols(S, x1) * a1[None, :, None]
        r0 = np.clip(rows[y0] >> 4, -32768, 32767)
        r1 = np.clip(rows[y1] >> 4, -32768, 32767)
        out = (((r0 * b0) >> 16) + ((r1 * b1) >> 16) + 2) >> 2
        return np.clip(out, 0, 255).astype(np.uint8)
    S = image.astype(_F32)
    a0, a1 = (_F32(1) - fx)[None, :, None], fx[None, :, None]
    rows = _cols(S, x0) * a0 + _cols(S, x1) * a1
    b0, b1 = (_F32(1) - fy)[:, None, None], fy[:, None, None]
    return (rows[y0] * b0 + rows[y1] * b1).astype(_F32)


def _cubic_coefficients(f: np.ndarray):
    A = _F32(-0.75)
    x = f.astype(_F32)
    one, two, three = _F32(1), _F32(2), _F32(3)
    c0 = ((A * (x + one) - _F32(5) * A) * (x + one) + _F32(8) * A) * (x + one) - _F32(4) * A
    c1 = ((A + two) * x - (A + three)) * x * x + one
    c2 = ((A + two) * (one - x) - (A + three)) * (one - x) * (one - x) + one
    c3 = one - c0 - c1 - c2
    return [c.astype(_F32) for c in (c0, c1, c2, c3)]


def _cubic(image: np.ndarray, width: int, height: int) -> np.ndarray:
    H, W, C = image.shape
    sx, fx = _positions(W, width)
    sy, fy = _positions(H, height)
    cx, cy = _cubic_coefficients(fx), _cubic_coefficients(fy)
    xs = [np.clip(sx - 1 + k, 0, W - 1) for k in range(4)]
    ys = [np.clip(sy - 1 + k, 0, H - 1) for k in range(4)]
    if image.dtype == np.uint8:
        S = image.astype(np.int64)
        rows = sum(_cols(S, xs[k]) * _fixed(cx[k])[None, :, None] for k in range(4))
        by = [_fixed(cy[k])[:, None, None] for k in range(4)]
        # the vertical pass: OpenCV's SIMD loop (8 float32 lanes) in float32 with beta / 2048^2 folded in,
        # rounding half to even; the row's last (width * C) % 8 values in the scalar fixed-point tail,
        # rounding half up
        scale = _F32(1.0 / (_COEF * _COEF))
        rows32 = rows.astype(_F32)
        vec = rows32[ys[0]] * (by[0].astype(_F32) * scale)
        for k in range(1, 4):
            vec = vec + rows32[ys[k]] * (by[k].astype(_F32) * scale)
        vec = np.rint(vec)
        tail = (sum(rows[ys[k]] * by[k] for k in range(4)) + (1 << 21)) >> 22
        flat = np.arange(width * C).reshape(width, C)
        out = np.where((flat >= (width * C) // 8 * 8)[None], tail, vec)
        return np.clip(out, 0, 255).astype(np.uint8)
    S = image.astype(_F32)
    rows = sum(_cols(S, xs[k]) * cx[k][None, :, None] for k in range(4))
    return sum(rows[ys[k]] * cy[k][:, None, None] for k in range(4)).astype(_F32)


def _nearest(image: np.ndarray, width: int, height: int) -> np.ndarray:
    H, W, _ = image.shape
    sx = np.minimum(np.floor(np.arange(width) * (1.0 / (width / W))).astype(np.int64), W - 1)
    sy = np.minimum(np.floor(np.arange(height) * (1.0 / (height / H))).astype(np.int64), H - 1)
    return np.ascontiguousarray(image[sy][:, sx])


def _area_table(src: int, dst: int) -> list:
    """computeResizeAreaTab: (destination, source, weight) with exact coverage weights, in OpenCV's order."""
    scale = src / dst
    table = []
    for d in range(dst):
        f1 = d * scale
        f2 = f1 + scale
        cell = min(scale, src - f1)
        s1, s2 = int(np.ceil(f1)), int(np.floor(f2))
        s2 = min(s2, src - 1)
        s1 = min(s1, s2)
        if s1 - f1 > 1e-3:
            table.append((d, s1 - 1, _F32((s1 - f1) / cell)))
        for s in range(s1, s2):
            table.append((d, s, _F32(1.0 / cell)))
        if f2 - s2 > 1e-3:
            table.append((d, s2, _F32(min(min(f2 - s2, 1.0), cell) / cell)))
    return table


def _area_columns(src: int, dst: int):
    """The area table as k-th (source, weight) of every destination, ``(K, dst)`` arrays padded with
    weight 0: summing column k = 0, 1, ... adds each destination's terms in OpenCV's order, for all
    destinations at once (adding ``x * 0`` leaves a float32 sum unchanged)."""
    per = [[] for _ in range(dst)]
    for d, s, w in _area_table(src, dst):
        per[d].append((s, w))
    K = max(len(p) for p in per)
    index = np.zeros((K, dst), dtype=np.int64)
    weight = np.zeros((K, dst), dtype=_F32)
    for d, terms in enumerate(per):
        for k, (s, w) in enumerate(terms):
            index[k, d], weight[k, d] = s, w
    return index, weight


def _area(image: np.ndarray, width: int, height: int) -> np.ndarray:
    H, W, C = image.shape
    if width > W or height > H:  # OpenCV: area only when shrinking both axes, else area-mode bilinear
        return _linear(image, width, height, area_mode=True)
    sx, sy = W / width, H / height
    ix, iy = int(round(sx)), int(round(sy))
    u8 = image.dtype == np.uint8
    if abs(sx - ix) < np.finfo(np.float64).eps and abs(sy - iy) < np.finfo(np.float64).eps:
        if u8:
            S = image.astype(np.int64)[:height * iy, :width * ix]
            if ix == 2 and iy == 2:
                s = S[0::2, 0::2] + S[0::2, 1::2] + S[1::2, 0::2] + S[1::2, 1::2]
                return ((s + 2) >> 2).astype(np.uint8)
            s = S.reshape(height, iy, width, ix, C).sum(axis=(1, 3))
            return np.clip(np.rint(s.astype(_F32) * _F32(1.0 / (ix * iy))), 0, 255).astype(np.uint8)
        S = image.astype(_F32)[:height * iy, :width * ix]
        return (S.reshape(height, iy, width, ix, C).sum(axis=(1, 3), dtype=_F32) * _F32(1.0 / (ix * iy))).astype(_F32)
    S = image.astype(_F32)
    xi, xw = _area_columns(W, width)
    rows = _cols(S, xi[0]) * xw[0][None, :, None]
    for k in range(1, len(xi)):
        rows += _cols(S, xi[k]) * xw[k][None, :, None]
    yi, yw = _area_columns(H, height)
    out = yw[0][:, None, None] * rows[yi[0]]
    for k in range(1, len(yi)):
        out += yw[k][:, None, None] * rows[yi[k]]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8) if u8 else out


def resize(image: np.ndarray, width: int, height: int, method: str) -> np.ndarray:
    """``cv::resize(image, (width, height), interpolation=method)`` for an HWC uint8 or float32 image."""
    if method not in METHODS:
        raise ValueError(f"resize method must be one of {', '.join(METHODS)}, not {method!r}")
    if image.ndim != 3:
        raise ValueError(f"resize needs an (H, W, C) image, not shape {image.shape}")
    if image.dtype != np.uint8:
        image = image.astype(_F32, copy=False)
    width, height = int(width), int(height)
    H, W = image.shape[:2]
    if (width, height) == (W, H):
        return image.copy()
    if method == "bilinear" and W == 2 * width and H == 2 * height:
        method = "area"  # OpenCV: an exact halving by INTER_LINEAR is INTER_AREA's block mean
    if method == "bilinear":
        return _linear(image, width, height)
    if method == "area":
        return _area(image, width, height)
    if method == "bicubic":
        return _cubic(image, width, height)
    return _nearest(image, width, height)
