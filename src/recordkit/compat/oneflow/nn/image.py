"""``oneflow.nn.image``: ``Resize``, ``flip``, ``normalize``, ``batch_align``, ``decode`` (module classes, as in
OneFlow 0.9: ``flow.nn.image.flip()(images, flip_code)``), over ``recordkit.formats.ofrecord.decoders``."""
from __future__ import annotations

import warnings

import numpy as np

from recordkit.compat.oneflow import _tensor as T
from recordkit.compat.oneflow._module import Module

__all__ = ["Resize", "flip", "normalize", "batch_align", "decode"]


def _buffer_images(input, what: str) -> list:
    images = T.as_images(input, what)
    return list(images) if isinstance(images, np.ndarray) else images


class Resize(Module):
    """``flow.nn.image.Resize``: returns ``(images, scale, new_size)`` as OneFlow does.

    ``keep_aspect_ratio=False``: ``target_size=(width, height)``; images become one dense
    ``(N, height, width, channels)`` tensor of ``dtype`` (default uint8), ``scale`` an ``(N, 2)``
    float32 tensor of (w, h) factors, ``new_size`` None. ``keep_aspect_ratio=True``: ``target_size``
    is the shorter (or longer, ``resize_side``) side; images stay a tensor buffer, ``new_size`` an
    ``(N, 2)`` int32 tensor of (w, h). OneFlow's deprecated ``color_space``/``interp_type``/
    ``resize_shorter``/``resize_x``/``resize_y`` are mapped the way OneFlow maps them. The pixels are
    OpenCV's (``cv2.resize``, as in OneFlow).
    """

    def __init__(self, target_size=None, min_size=None, max_size=None, keep_aspect_ratio: bool = False,
                 resize_side: str = "shorter", channels: int = 3, dtype=None, interpolation_type: str = "auto",
                 name=None, color_space=None, interp_type=None, resize_shorter: int = 0, resize_x: int = 0,
                 resize_y: int = 0):
        if color_space is not None:
            warnings.warn("color_space is deprecated, use channels", DeprecationWarning, stacklevel=2)
            cs = str(color_space).upper()
            if cs not in ("RGB", "BGR", "GRAY"):
                raise ValueError("invalid color_space")
            channels = 1 if cs == "GRAY" else 3
        if interp_type is not None:
            warnings.warn("interp_type is deprecated, use interpolation_type", DeprecationWarning, stacklevel=2)
            mapping = {"Linear": "bilinear", "NN": "nearest_neighbor", "Cubic": "bicubic"}
            if interp_type not in mapping:
                raise ValueError("invalid interp_type")
            interpolation_type = mapping[interp_type]
        if resize_x > 0 and resize_y > 0:
            warnings.warn("resize_x/resize_y are deprecated, use target_size", DeprecationWarning, stacklevel=2)
            target_size, keep_aspect_ratio = (resize_x, resize_y), False
        if resize_shorter > 0:
            warnings.warn("resize_shorter is deprecated, use target_size", DeprecationWarning, stacklevel=2)
            target_size, keep_aspect_ratio, resize_side = resize_shorter, True, "shorter"
        self.channels = int(channels)
        self.interpolation_type = interpolation_type
        self.keep_aspect_ratio = bool(keep_aspect_ratio)
        if self.keep_aspect_ratio:
            if not isinstance(target_size, int):
                raise ValueError("target_size must be an int when keep_aspect_ratio is True")
            if resize_side not in ("shorter", "longer"):
                raise ValueError('resize_side must be "shorter" or "longer"')
            self.min_size = int(min_size or 0)
            self.max_size = int(max_size or 0)
            self.resize_side = resize_side
            self.dtype = None
        else:
            if (not isinstance(target_size, (list, tuple)) or len(target_size) != 2
                    or not all(isinstance(s, int) for s in target_size)):
                raise ValueError("target_size must be a form like (width, height) when keep_aspect_ratio is False")
            self.dtype = T.uint8 if dtype is None else T.as_dtype(dtype)
        self.target_size = target_size

    def forward(self, input):
        from recordkit.compat.oneflow import ops as decoders
        images = _buffer_images(input, "image.Resize")
        if self.keep_aspect_ratio:
            out, scale, new_size = decoders.resize(
                images, self.target_size, keep_aspect_ratio=True, resize_side=self.resize_side,
                min_size=self.min_size, max_size=self.max_size, interpolation_type=self.interpolation_type)
            return T.TensorBuffer(out), T.Tensor(scale), T.Tensor(new_size)
        out, scale, _ = decoders.resize(images, tuple(self.target_size), keep_aspect_ratio=False,
                                        channels=self.channels, dtype=self.dtype.np,
                                        interpolation_type=self.interpolation_type)
        return T.Tensor(out), T.Tensor(scale), None


class flip(Module):
    """``flow.nn.image.flip()(images, flip_code)``: 0 none, 1 horizontal, 2 vertical, 3 both, per image.

    A tensor buffer stays a tensor buffer; a dense NHWC tensor stays dense."""

    def forward(self, images, flip_code):
        from recordkit.compat.oneflow import ops as decoders
        codes = flip_code.numpy() if isinstance(flip_code, T.Tensor) else flip_code
        if isinstance(images, T.TensorBuffer):
            return T.TensorBuffer(decoders.flip(images.numpy(), codes))
        return T.Tensor(decoders.flip(T.as_images(images, "image.flip"), codes))


class normalize(Module):
    """``flow.nn.image.normalize(std, mean)(images)``: ``(x - mean[c]) / std[c]`` per HWC float image.

    OneFlow's kernel takes float32 images only (it aborts on uint8); uint8 ones are refused here."""

    def __init__(self, std, mean):
        self.std = list(np.atleast_1d(std))
        self.mean = list(np.atleast_1d(mean))

    def forward(self, input):
        from recordkit.compat.oneflow import ops as decoders
        images = _buffer_images(input, "image.normalize")
        for i, im in enumerate(images):
            if im.dtype != np.float32:
                raise TypeError(f"image.normalize needs float32 images (flow.nn.image.decode(dtype=flow.float32)); "
                                f"image {i} is {im.dtype}")
        return T.TensorBuffer(decoders.normalize(images, self.std, self.mean))


class batch_align(Module):
    """``flow.nn.image.batch_align(shape, dtype, alignment)(images)``: a dense ``(N, *shape)`` tensor.

    As OneFlow 0.9 (eager, ``dynamic_out=False``): the images are placed at the top left of
    ``(N, H, W, C)`` where H and W are the batch's largest height and width rounded up to
    ``alignment``, zero-filled, converted with ``static_cast``, and that block is laid into the
    zeroed output of static shape ``(N, *shape)``. When ``shape`` is exactly ``(H, W, C)`` this is the
    plain aligned batch; a larger ``shape`` gives OneFlow's layout (rows of stride W read as rows
    of ``shape[1]``), and a smaller one, where OneFlow writes out of bounds, is an error.
    """

    def __init__(self, shape, dtype, alignment: int):
        self.shape = tuple(int(s) for s in shape)
        if len(self.shape) != 3:
            raise ValueError(f"batch_align shape must be (height, width, channels), not {self.shape}")
        self.dtype = T.as_dtype(dtype)
        if self.dtype not in (T.uint8, T.float32):
            raise ValueError(f"batch_align dtype must be flow.uint8 or flow.float32, not {self.dtype}")
        self.alignment = int(alignment)

    def forward(self, input):
        from recordkit.compat.oneflow import ops as decoders
        images = _buffer_images(input, "image.batch_align")
        if not images:
            raise ValueError("image.batch_align of an empty batch")
        for i, im in enumerate(images):
            if im.ndim != 3 or im.shape[2] != self.shape[2]:
                raise ValueError(f"image.batch_align: image {i} has shape {im.shape}, channels must be "
                                 f"{self.shape[2]}")
        with np.errstate(invalid="ignore", over="ignore"):
            block = decoders.batch_align(images, self.alignment, dtype=self.dtype.np)
        out = np.zeros((len(images),) + self.shape, dtype=self.dtype.np)
        if block.shape == out.shape:
            return T.Tensor(block)
        if block.size > out.size or block.shape[1] > self.shape[0] or block.shape[2] > self.shape[1]:
            raise ValueError(f"image.batch_align: the images need {block.shape[1:]} (aligned to {self.alignment}), "
                             f"more than shape {self.shape}")
        out.reshape(-1)[:block.size] = block.reshape(-1)
        return T.Tensor(out)


class decode(Module):
    """``flow.nn.image.decode(dtype=flow.uint8, color_space="BGR")(bytes)``: encoded images (a tensor
    buffer of bytes, e.g. ``OFRecordBytesDecoder``'s output) to a tensor buffer of HWC images of
    ``dtype`` (uint8 or float32). ``max_pixels`` as for ``OFRecordImageDecoder``."""

    def __init__(self, dtype=None, color_space: str = "BGR", *, max_pixels=None):
        from recordkit.compat.oneflow.ops import image as _img
        _img.channels_of(color_space)
        self.max_pixels = None if max_pixels is None else _img.pixel_budget(max_pixels)
        self.dtype = T.uint8 if dtype is None else T.as_dtype(dtype)
        if self.dtype not in (T.uint8, T.float32):
            raise ValueError(f"image.decode dtype must be flow.uint8 or flow.float32, not {self.dtype}")
        self.color_space = color_space

    def forward(self, input):
        from recordkit.compat.oneflow.ops import image as _img
        if not isinstance(input, T.TensorBuffer):
            raise TypeError("image.decode takes a tensor buffer of encoded images (flow.nn.OFRecordBytesDecoder)")
        out = []
        for i, data in enumerate(input.numpy()):
            try:
                im = _img.decode_image(np.asarray(data, dtype=np.uint8).tobytes(), self.color_space,
                                       max_pixels=self.max_pixels)
            except _img.ImageDecodeError as exc:
                raise ValueError(f"image.decode: image {i}: {exc}") from exc
            out.append(im if self.dtype is T.uint8 else im.astype(np.float32))
        return T.TensorBuffer(out)
