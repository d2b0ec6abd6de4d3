"""OneFlow's image decoders and preprocessing ops, on OpenCV and NumPy (``flow.nn`` and ``flow.nn.image``).

They work on batches of OFRecord records (the feature decoders ``raw_decode``/``bytes_decode`` are
the codec's: :mod:`recordkit.formats.ofrecord.decoders`) and on OneFlow's "tensor buffers" (one
variable-shape image per sample), which are Python lists of NumPy arrays here; dense tensors are
NumPy arrays. What each function mirrors (OneFlow HEAD, ``oneflow/user/kernels/*``):

=============================  ====================================================
``image_decode``               ``flow.nn.OFRecordImageDecoder``
``image_decode_random_crop``   ``flow.nn.OFRecordImageDecoderRandomCrop``
``resize``                     ``flow.nn.image.Resize`` (fixed size / keep aspect ratio)
``crop_mirror_normalize``      ``flow.nn.CropMirrorNormalize`` (uint8 and tensor-buffer inputs)
``coin_flip``                  ``flow.nn.CoinFlip``
``flip``                       ``flow.nn.image.flip``
``normalize``                  ``flow.nn.image.normalize``
``batch_align``                ``flow.nn.image.batch_align``
=============================  ====================================================

Where we deliberately differ from OneFlow:
* Images are decoded with OpenCV's ``imdecode`` (JPEG, PNG; Pillow for other
  formats) and implement the documented intent: any JPEG/PNG/BMP/TIFF/WebP/...
  in RGB, BGR or GRAY. OneFlow HEAD fails on JPEGs with its default
  ``color_space="BGR"`` and with "GRAY" (its colour conversion only knows
  BGR->RGB) and exits the process on non-JPEG data in its libjpeg path. The
  pixels equal OneFlow's (both are libjpeg-turbo / libpng), and EXIF orientation
  is ignored, as OneFlow's libjpeg path does.
* Random streams are NumPy's ``Generator`` (PCG64), not ``std::mt19937``:
  the random-crop algorithm and the coin-flip distribution match OneFlow, the
  exact draws for a given seed do not. Each batch slot of the random crop has
  its own generator, spawned from the seed (as OneFlow seeds one per slot from
  ``std::seed_seq{seed}``). Because these functions are stateless, passing the
  same integer seed on every batch repeats the same windows; pass generators
  (``random_seed=[np.random.default_rng(...), ...]`` or one
  ``np.random.Generator`` for ``coin_flip``) to get OneFlow's stateful
  behaviour of a stream that advances from batch to batch.
* ``resize`` calls ``cv2.resize`` as OneFlow does: the same pixels as OneFlow 0.9 on
  every image it was compared on (float32 bicubic: within a few float32 ulps), sizes,
  scales and the "auto" rule (bilinear when the image does not shrink, area when it
  does) included. A keep-aspect side that would round to 0 is made 1.
* ``crop_mirror_normalize`` also accepts ``output_layout="NHWC"`` directly
  (OneFlow chooses it with ``ONEFLOW_ENABLE_NHWC=1``) and checks that the crop
  fits and ``crop_pos`` is in [0, 1] instead of reading out of bounds.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from recordkit.compat.oneflow.ops import image as _img
from recordkit.formats.ofrecord.decoders import _error, _feature, _locations, _single_bytes
from recordkit.images.pool import parallel_for

__all__ = ["image_decode", "image_decode_random_crop", "random_crop_generators", "resize", "crop_mirror_normalize",
           "coin_flip", "flip", "normalize", "batch_align"]


def image_decode(
    records: Sequence[dict], name: str, color_space: str = "BGR", where=None, *, max_pixels=None
) -> list[np.ndarray]:
    """Decode the encoded image in feature ``name`` -- ``OFRecordImageDecoder``.

    One HWC uint8 array per record, C=3 for "RGB"/"BGR" and C=1 for "GRAY".
    No resizing. Bytes that are not a decodable image, truncated pixel data and an
    image declaring more than ``max_pixels`` pixels (default: Pillow's
    ``Image.MAX_IMAGE_PIXELS``, see :data:`recordkit.images.codec.MAX_PIXELS`)
    raise FormatError naming the file and the record.
    """
    _img.channels_of(color_space)
    return _decode_all(records, name, where, lambda data, i: _img.decode_image(
        data, color_space, max_pixels=max_pixels))


def _decode_all(records: Sequence[dict], name: str, where, decode, workers=None) -> list[np.ndarray]:
    """``decode(bytes, i)`` of feature ``name`` of every record, on every core (or ``workers`` threads:
    :func:`recordkit.images.pool.parallel_for`); the first failing record's located error."""
    locs = _locations(records, where)
    out: list = [None] * len(records)

    def one(i: int) -> None:
        loc = locs[i]
        data = _single_bytes(_feature(records[i], name, loc), name, loc, "image decoder")
        try:
            out[i] = decode(data, i)
        except _img.ImageDecodeError as exc:
            raise _error(loc, f"feature {name!r}: {exc}") from exc

    parallel_for(len(records), one, workers=workers)
    return out


def random_crop_generators(random_seed, n: int) -> list[np.random.Generator]:
    """``n`` independent per-slot generators spawned from ``random_seed`` (None: fresh entropy).

    Keep the list and pass it as ``random_seed`` on every batch to get a
    stream that advances like OneFlow's per-slot kernel state.
    """
    seq = random_seed if isinstance(random_seed, np.random.SeedSequence) else np.random.SeedSequence(random_seed)
    return [np.random.default_rng(child) for child in seq.spawn(n)]


def image_decode_random_crop(
    records: Sequence[dict],
    name: str,
    color_space: str = "BGR",
    num_attempts: int = 10,
    random_seed=None,
    random_area: Sequence[float] = (0.08, 1.0),
    random_aspect_ratio: Sequence[float] = (0.75, 1.333333),
    where=None,
    *,
    max_pixels=None,
    cover=None,
) -> list[np.ndarray]:
    """Decode with an Inception-style random crop -- ``OFRecordImageDecoderRandomCrop``.

    Per record, the crop window comes from the generator of its batch slot
    (see :func:`recordkit.images.codec.random_crop_window` for the
    algorithm). ``random_seed`` is an int or ``SeedSequence`` (deterministic:
    slot ``i`` always gets the same generator), ``None`` (fresh entropy), or a
    sequence of ``np.random.Generator`` with one per record, which are advanced
    in place so successive batches see new windows. Errors and ``max_pixels`` as
    :func:`image_decode`.

    ``cover=(h, w)`` (recordkit's, off by default): a JPEG whose window still has at least
    ``h`` x ``w`` pixels at 1/2, 1/4 or 1/8 scale is decoded at that scale (libjpeg's DCT
    scaling, several times less work) and its window returned at that scale -- for a pipeline
    that resizes the crop to ``h`` x ``w`` next. Its pixels are not OneFlow's (OneFlow always
    decodes at full scale), hence opt-in.
    """
    _img.channels_of(color_space)
    _img.validate_crop_ranges(num_attempts, random_area, random_aspect_ratio)
    n = len(records)
    if random_seed is not None and not isinstance(random_seed, (int, np.integer, np.random.SeedSequence)):
        gens = list(random_seed)
        if len(gens) < n or not all(isinstance(g, np.random.Generator) for g in gens):
            raise ValueError(
                f"random_seed must be an int, a SeedSequence, None or at least {n} numpy Generators"
            )
    else:
        gens = random_crop_generators(random_seed, n)

    def decode(data, i):
        def window(h, w):  # slot i's generator: only this image's task draws from it
            return _img.random_crop_window(
                h, w, gens[i], num_attempts=num_attempts,
                random_area=random_area, random_aspect_ratio=random_aspect_ratio,
            )
        return _img.decode_image(data, color_space, window=window, max_pixels=max_pixels, cover=cover)

    # one generator given for several slots is drawn from in record order, so on one thread
    shared = len({id(g) for g in gens[:n]}) < n
    return _decode_all(records, name, where, decode, workers=1 if shared else None)


def _image_list(images, what: str) -> list[np.ndarray]:
    """Images as a list of HWC arrays (accepts an NHWC array or an iterable of HWC arrays)."""
    if isinstance(images, np.ndarray):
        if images.ndim != 4:
            raise ValueError(f"{what} needs an (N, H, W, C) array or a list of (H, W, C) arrays, "
                             f"got an array of shape {images.shape}")
        return list(images)
    out = [np.asarray(im) for im in images]
    for i, im in enumerate(out):
        if im.ndim != 3:
            raise ValueError(f"{what}: image {i} has shape {im.shape}, expected (H, W, C)")
    return out


def resize(
    images,
    target_size,
    *,
    keep_aspect_ratio: bool = False,
    resize_side: str = "shorter",
    min_size: int = 0,
    max_size: int = 0,
    channels: int = 3,
    dtype=None,
    interpolation_type: str = "auto",
):
    """Resize a batch of HWC images -- ``flow.nn.image.Resize``; returns ``(images, scale, new_size)``.

    * ``keep_aspect_ratio=False``: ``target_size=(width, height)``; ``images``
      becomes one dense ``(N, height, width, channels)`` array of ``dtype``
      (uint8 or float32; None means uint8); every input must have ``channels``
      channels. ``scale`` is ``(N, 2)`` float32 ``(new_w/old_w, new_h/old_h)``;
      ``new_size`` is None.
    * ``keep_aspect_ratio=True``: ``target_size`` is an int for the shorter
      (``resize_side="shorter"``, the longer side capped by ``max_size`` when
      > 0) or longer side (floored on the shorter side by ``min_size`` when
      > 0); sizes round half to even. ``images`` is a list, ``new_size`` an
      ``(N, 2)`` int32 ``(w, h)`` array and ``scale`` ``(N, 2)`` float32.
      OneFlow ignores ``dtype`` here and keeps the input's; so do we unless
      ``dtype`` is given.

    ``interpolation_type``: "auto" (bilinear when not shrinking, area when
    shrinking), "bilinear", "nearest_neighbor"/"nn", "bicubic", "area".
    Inputs are uint8 or float32 HWC arrays (a list, or an NHWC array).
    """
    imgs = _image_list(images, "resize")
    if interpolation_type not in _img.INTERPOLATIONS:
        _img.resample_filter(interpolation_type, (1, 1), (1, 1))  # raises the ValueError
    n = len(imgs)
    scale = np.zeros((n, 2), dtype=np.float32)

    if not keep_aspect_ratio:
        if (
            not isinstance(target_size, (list, tuple))
            or len(target_size) != 2
            or not all(isinstance(s, (int, np.integer)) and s > 0 for s in target_size)
        ):
            raise ValueError("target_size must be (width, height) of positive ints when keep_aspect_ratio is False")
        out_dt = np.dtype(np.uint8) if dtype is None else np.dtype(dtype)
        if out_dt not in (np.dtype(np.uint8), np.dtype(np.float32)):
            raise ValueError(f"resize dtype must be uint8 or float32, not {out_dt}")
        tw, th = int(target_size[0]), int(target_size[1])
        out = np.empty((n, th, tw, channels), dtype=out_dt)
        for i, im in enumerate(imgs):
            if im.shape[2] != channels:
                raise ValueError(f"resize: image {i} has {im.shape[2]} channels, channels={channels}")

        def one(i: int) -> None:
            oh, ow = imgs[i].shape[:2]
            filt = _img.resample_filter(interpolation_type, (ow, oh), (tw, th))
            if imgs[i].dtype == out_dt:
                _img.resize_image(imgs[i], tw, th, filt, out=out[i])
            else:
                out[i] = _img.to_dtype(_img.resize_image(imgs[i], tw, th, filt), out_dt)
            scale[i] = (np.float32(tw) / np.float32(ow), np.float32(th) / np.float32(oh))

        parallel_for(n, one)
        return out, scale, None

    if isinstance(target_size, (list, tuple)) or int(target_size) <= 0:
        raise ValueError("target_size must be a positive int when keep_aspect_ratio is True")
    target = int(target_size)
    if resize_side not in ("shorter", "longer"):
        raise ValueError(f"resize_side must be 'shorter' or 'longer', not {resize_side!r}")
    if min_size > 0 and target < min_size:
        raise ValueError(f"target_size {target} is below min_size {min_size}")
    if max_size > 0 and target > max_size:
        raise ValueError(f"target_size {target} is above max_size {max_size}")
    out_dt = None if dtype is None else np.dtype(dtype)
    new_size = np.zeros((n, 2), dtype=np.int32)
    out_list: list = [None] * n

    def one(i: int) -> None:
        oh, ow = imgs[i].shape[:2]
        nw, nh = _img.keep_aspect_ratio_size(
            oh, ow, target, resize_longer=resize_side == "longer", min_size=min_size, max_size=max_size
        )
        filt = _img.resample_filter(interpolation_type, (ow, oh), (nw, nh))
        res = _img.resize_image(imgs[i], nw, nh, filt)
        out_list[i] = res if out_dt is None else _img.to_dtype(res, out_dt)
        new_size[i] = (nw, nh)
        scale[i] = (np.float32(nw) / np.float32(ow), np.float32(nh) / np.float32(oh))

    parallel_for(n, one)
    return out_list, scale, new_size


# --------------------------------------------------------------------------- crop / mirror / normalize


def _mirror_vector(mirror, n: int) -> np.ndarray:
    if mirror is None:
        return np.zeros(n, dtype=bool)
    m = np.asarray(mirror).reshape(-1)
    if m.size == 1 and n != 1:
        m = np.repeat(m, n)
    if m.size != n:
        raise ValueError(f"mirror has {m.size} entries for {n} images")
    return m != 0


def _crop_offset(in_len: int, out_len: int, pos: float) -> int:
    # OneFlow computes (in - out) * pos in float32 and truncates.
    return int(np.float32(in_len - out_len) * np.float32(pos))


def crop_mirror_normalize(
    images,
    *,
    color_space: str = "BGR",
    output_layout: str = "NCHW",
    crop_h: int = 0,
    crop_w: int = 0,
    crop_pos_y: float = 0.5,
    crop_pos_x: float = 0.5,
    mean=(0.0,),
    std=(1.0,),
    mirror=None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Crop, optionally mirror, and normalize to float32 -- ``flow.nn.CropMirrorNormalize``.

    ``images`` is an NHWC uint8 array (``crop_h``/``crop_w`` of 0 keep that
    axis whole) or a list of HWC uint8 arrays (a crop size is then required,
    as for OneFlow's tensor-buffer input). The crop starts at
    ``int((in - out) * crop_pos)`` on each axis; where ``mirror[i]`` is
    non-zero the crop is flipped horizontally. ``out = (in - mean[c]) / std[c]``
    in float32 (as OneFlow: times ``1/std``), ``mean``/``std`` broadcast from
    length 1. ``color_space`` only fixes C (3, or 1 for "GRAY"); it converts
    nothing. Output is ``(N, C, h, w)`` for "NCHW" or ``(N, h, w, C)`` for "NHWC" (written into
    ``out`` when it is a C-contiguous float32 array of that shape; otherwise a new array).
    """
    C = _img.channels_of(color_space)
    if output_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"output_layout must be 'NCHW' or 'NHWC', not {output_layout!r}")
    for what, pos in (("crop_pos_y", crop_pos_y), ("crop_pos_x", crop_pos_x)):
        if not 0.0 <= float(pos) <= 1.0:
            raise ValueError(f"{what} must be in [0, 1], not {pos}")
    if crop_h < 0 or crop_w < 0:
        raise ValueError("crop_h and crop_w must be >= 0")
    mean_v = _img.per_channel(mean, C, "mean")
    inv_std = np.float32(1.0) / _img.per_channel(std, C, "std")

    dense = isinstance(images, np.ndarray)
    if dense:
        if images.ndim != 4:
            raise ValueError(f"crop_mirror_normalize needs an (N, H, W, C) array, got shape {images.shape}")
        imgs = images
        n = images.shape[0]
    else:
        imgs = _image_list(images, "crop_mirror_normalize")
        n = len(imgs)
        if crop_h <= 0 or crop_w <= 0:
            raise ValueError("a list of images needs crop_h and crop_w > 0 (OneFlow's tensor-buffer input)")
    flips = _mirror_vector(mirror, n)

    def check(shape, i=None):
        H, W, c = shape
        who = "images" if i is None else f"image {i}"
        if c != C:
            raise ValueError(f"{who} have {c} channels, color_space {color_space!r} needs {C}")
        oh, ow = crop_h or H, crop_w or W
        if oh > H or ow > W:
            raise ValueError(f"crop {oh}x{ow} does not fit in {who} of size {H}x{W}")
        return oh, ow, _crop_offset(H, oh, crop_pos_y), _crop_offset(W, ow, crop_pos_x)

    if dense:
        if images.dtype != np.uint8:
            raise ValueError(f"crop_mirror_normalize needs uint8 images, not {images.dtype}")
        oh, ow, y0, x0 = check(images.shape[1:])
        origins = [(y0, x0)] * n
    else:
        oh, ow = crop_h, crop_w
        origins = []
        for i, im in enumerate(imgs):
            if im.dtype != np.uint8:
                raise ValueError(f"crop_mirror_normalize needs uint8 images, image {i} is {im.dtype}")
            origins.append(check(im.shape, i)[2:])
    nchw = output_layout == "NCHW"
    shape = (n, C, oh, ow) if nchw else (n, oh, ow, C)
    if out is None or out.shape != shape or out.dtype != np.float32 or not out.flags.c_contiguous:
        out = np.empty(shape, dtype=np.float32)
    table = _img.normalize_table(mean_v, inv_std)

    def one(i: int) -> None:
        y0, x0 = origins[i]
        _img.normalize_into(imgs[i][y0:y0 + oh, x0:x0 + ow, :], mean_v, inv_std, out[i], nchw, mirror=bool(flips[i]),
                            table=table)

    parallel_for(n, one)
    return out


def normalize(images, std, mean):
    """``(image - mean[c]) / std[c]`` in float32 per HWC image -- ``flow.nn.image.normalize``.

    Returns the same container kind it was given (NHWC array or list).
    """
    if isinstance(images, np.ndarray) and images.ndim == 4:
        C = images.shape[3]
        return (images.astype(np.float32) - _img.per_channel(mean, C, "mean")) / _img.per_channel(std, C, "std")
    out = []
    for im in _image_list(images, "normalize"):
        C = im.shape[2]
        out.append((im.astype(np.float32) - _img.per_channel(mean, C, "mean")) / _img.per_channel(std, C, "std"))
    return out


def coin_flip(batch_size: int = 1, random_seed=None, probability: float = 0.5) -> np.ndarray:
    """``(batch_size,)`` int8 Bernoulli(``probability``) 0/1 draws -- ``flow.nn.CoinFlip``.

    ``random_seed``: int (deterministic), None (fresh entropy) or an
    ``np.random.Generator`` that is advanced in place (OneFlow keeps one
    ``mt19937`` per op across batches; pass the same Generator to match that).
    """
    if not 0.0 <= float(probability) <= 1.0:
        raise ValueError(f"probability must be in [0, 1], not {probability}")
    if batch_size < 0:
        raise ValueError(f"batch_size must be >= 0, not {batch_size}")
    rng = random_seed if isinstance(random_seed, np.random.Generator) else np.random.default_rng(random_seed)
    return (rng.random(int(batch_size)) < float(probability)).astype(np.int8)


# --------------------------------------------------------------------------- flip / batch_align


def _flip_one(im: np.ndarray, code: int) -> np.ndarray:
    if code & 1:
        im = im[:, ::-1]
    if code & 2:
        im = im[::-1]
    return np.ascontiguousarray(im)


def flip(images, flip_code):
    """Flip HWC images -- ``flow.nn.image.flip``.

    ``flip_code`` (one int, or one per image): 0 none, 1 horizontal, 2
    vertical, 3 both. Returns an array for an NHWC array input, else a list.
    """
    dense = isinstance(images, np.ndarray) and images.ndim == 4
    imgs = images if dense else _image_list(images, "flip")
    n = len(imgs)
    codes = np.asarray(flip_code).reshape(-1)
    if codes.size == 1:
        codes = np.repeat(codes, n)
    if codes.size != n:
        raise ValueError(f"flip_code has {codes.size} entries for {n} images")
    codes = codes.astype(np.int64)
    if ((codes < 0) | (codes > 3)).any():
        raise ValueError("flip_code values must be 0 (none), 1 (horizontal), 2 (vertical) or 3 (both)")
    if dense:
        out = np.array(images, copy=True)
        h = (codes & 1).astype(bool)
        v = (codes & 2).astype(bool)
        out[h] = out[h][:, :, ::-1]
        out[v] = out[v][:, ::-1]
        return out
    return [_flip_one(im, int(c)) for im, c in zip(imgs, codes)]


def batch_align(images, alignment: int = 1, dtype=None) -> np.ndarray:
    """Zero-pad HWC images into one ``(N, H, W, C)`` batch -- ``flow.nn.image.batch_align``.

    H and W are the largest height and width in the batch, rounded up to a
    multiple of ``alignment``; each image sits at the top-left corner.
    """
    if int(alignment) < 1:
        raise ValueError(f"alignment must be >= 1, not {alignment}")
    imgs = _image_list(images, "batch_align")
    if not imgs:
        return np.zeros((0, 0, 0, 0), dtype=np.dtype(dtype) if dtype is not None else np.uint8)
    channels = {im.shape[2] for im in imgs}
    if len(channels) != 1:
        raise ValueError(f"batch_align needs images with one channel count, got {sorted(channels)}")
    a = int(alignment)
    H = -(-max(im.shape[0] for im in imgs) // a) * a
    W = -(-max(im.shape[1] for im in imgs) // a) * a
    out_dt = np.dtype(dtype) if dtype is not None else np.result_type(*[im.dtype for im in imgs])
    out = np.zeros((len(imgs), H, W, channels.pop()), dtype=out_dt)
    for i, im in enumerate(imgs):
        out[i, : im.shape[0], : im.shape[1]] = im
    return out
