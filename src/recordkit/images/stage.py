"""One image stage for every format: ``decode -> random-resized-crop -> flip -> normalize`` of a batch
of encoded images (JPEG, PNG, ... bytes from whichever reader holds them), on every core.

:class:`ImageStage` turns a list of encoded images into one preallocated ``(N, C, size, size)``
(or NHWC) ``float32`` or ``uint8`` batch. Each image is decoded by OpenCV (the header checked against
the pixel budget first, truncated data refused), an Inception-style crop window is drawn (area and
aspect ratio ranges, as torchvision's ``RandomResizedCrop`` and OneFlow's random-crop decoder),
resized to ``size`` x ``size`` (area filter when shrinking, bilinear when growing: OneFlow's "auto"),
flipped left-right with probability ``flip``, and normalized ``(x - mean[c]) / std[c]`` in float32,
``mean``/``std`` in pixel units (0..255). JPEGs are decoded at 1/2..1/8 scale whenever the window
still covers the output size there (``reduced=True``, the default: no exactness with another library
is promised here, and it saves most of the decoding of large photos).

Randomness is seeded and reproducible whatever the thread timing: the stage's generator draws one
seed per image, in order, on the calling thread, and each image's window and flip come from its
own seed. :meth:`ImageStage.state_dict` / :meth:`ImageStage.load_state_dict` carry the generator
through a checkpoint; :meth:`ImageStage.batches` prepares the next batch while the caller uses this
one and keeps the checkpointed state at the first batch not yet handed out.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np

from recordkit.errors import FormatError
from recordkit.images import codec
from recordkit.images.pool import ahead, parallel_for
from recordkit.images.spares import Spares

_STATE_KEYS = {"bit_generator", "state", "has_uint32", "uinteger"}


class ImageStage:
    """``decode -> random-resized-crop -> flip -> normalize`` for batches of encoded images.

    ``size``: output side; ``scale``: the crop's area fraction range; ``ratio``: its width/height
    range; ``flip``: probability of a left-right flip; ``crop=False``: the whole image, resized, no
    flip (evaluation); ``mean``/``std``: per channel (or one value), pixel units; ``dtype``:
    ``"float32"`` (normalized) or ``"uint8"`` (pixels, ``mean``/``std`` unused); ``layout``:
    ``"NCHW"`` or ``"NHWC"``; ``color_space``: ``"RGB"``, ``"BGR"`` or ``"GRAY"``; ``seed``: int,
    a NumPy ``SeedSequence`` or None (fresh entropy); ``reduced``: JPEG decoding at reduced scale
    where the crop allows it; ``max_pixels``: the most pixels an image may declare (default
    Pillow's threshold).
    """

    def __init__(self, size: int = 224, *, scale: Sequence[float] = (0.08, 1.0),
                 ratio: Sequence[float] = (3 / 4, 4 / 3), flip: float = 0.5, crop: bool = True,
                 mean: Sequence[float] = (0.0,), std: Sequence[float] = (1.0,), dtype: str = "float32",
                 layout: str = "NCHW", color_space: str = "RGB", seed=None,
                 reduced: bool = True, max_pixels: int | None = None):
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
            raise ValueError(f"size must be a positive int, not {size!r}")
        codec.validate_crop_ranges(10, scale, ratio)
        if not 0.0 <= float(flip) <= 1.0:
            raise ValueError(f"flip must be a probability in [0, 1], not {flip!r}")
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be 'NCHW' or 'NHWC', not {layout!r}")
        if str(dtype) not in ("float32", "uint8"):
            raise ValueError(f"dtype must be 'float32' or 'uint8', not {dtype!r}")
        self.channels = codec.channels_of(color_space)
        self.size, self.scale, self.ratio = int(size), tuple(scale), tuple(ratio)
        self.flip, self.crop, self.layout, self.color_space = float(flip), bool(crop), layout, color_space
        self.dtype = np.dtype(str(dtype))
        self.mean = codec.per_channel(mean, self.channels, "mean")
        std_v = codec.per_channel(std, self.channels, "std")
        if not np.all(std_v != 0):
            raise ValueError("std must not be 0")
        self.inv_std = np.float32(1.0) / std_v
        self.table = codec.normalize_table(self.mean, self.inv_std)
        self.reduced = bool(reduced)
        self.max_pixels = None if max_pixels is None else codec.pixel_budget(max_pixels)
        self._rng = np.random.default_rng(seed)
        self._undelivered = None  # the generator's state before the first batch prepared but not handed out
        # the last batches made: the one being made, the one prepared ahead, the caller's (_batch_array)
        self._spares = Spares(3)

    # ------------------------------------------------------------------ checkpoints

    def state_dict(self) -> dict:
        """The random state to resume from: before the first batch not yet handed out."""
        state = self._undelivered if self._undelivered is not None else self._rng.bit_generator.state
        return {"rng": _copy_state(state)}

    def load_state_dict(self, state: dict) -> None:
        """Resume the random stream from :meth:`state_dict`'s output (checked: it is untrusted input)."""
        rng = state.get("rng") if isinstance(state, dict) else None
        if not isinstance(rng, dict) or set(rng) != _STATE_KEYS or rng.get("bit_generator") != "PCG64":
            raise ValueError("image stage state must be {'rng': a PCG64 bit generator state} as state_dict() "
                             f"returns, not {state!r:.200}")
        inner = rng["state"]
        if (not isinstance(inner, dict) or set(inner) != {"state", "inc"}
                or not all(isinstance(v, int) and 0 <= v < 1 << 128 for v in inner.values())
                or not isinstance(rng["uinteger"], int) or not 0 <= rng["uinteger"] < 1 << 32
                or not isinstance(rng["has_uint32"], int)):
            raise ValueError(f"image stage state has a malformed PCG64 state: {rng!r:.200}")
        self._rng.bit_generator.state = _copy_state(rng)
        self._undelivered = None

    # ------------------------------------------------------------------ batches

    def __call__(self, images: Sequence, where: Sequence | None = None) -> np.ndarray:
        """One batch: ``images`` is a sequence of encoded images (bytes-like); ``where`` optionally names
        each one's place for errors -- a string, or ``(path, record)`` as the format sources give
        (``recordkit.formats.ofrecord.images``, ``recordkit.formats.webdataset.images``) --, else
        ``"image i of the batch"``."""
        return self._prepare(images, where)()

    def batches(self, images: Iterable, batch_size: int, *, drop_last: bool = False, prefetch: bool = True,
                select=None) -> Iterator[np.ndarray]:
        """Batches of ``batch_size`` from an iterable of encoded images, or of ``(image, where)`` pairs
        as the format sources yield them; with ``prefetch`` the next batch is prepared on a background
        thread while the caller uses this one (the same batches either way). ``select(k)``: make only
        the batches ``k`` (0, 1, ...) it accepts -- the others' random draws are still taken, so
        workers sharing a seed and splitting the batches make the batches one stage would."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, not {batch_size!r}")
        self._undelivered = None
        pending = None  # (state before its draws, future)
        for k, (chunk, names) in enumerate(_chunks(images, batch_size, drop_last)):
            if select is not None and not select(k):
                self._rng.integers(0, 1 << 63, size=len(chunk))  # another worker's batch: its draws
                continue
            state = self._rng.bit_generator.state
            job = self._prepare(chunk, names)
            if not prefetch:
                yield job()
                continue
            future = ahead(job)
            if pending is not None:
                out = pending[1].result()
                self._undelivered = state
                yield out
            pending = (state, future)
        if pending is not None:
            out = pending[1].result()
            self._undelivered = None
            yield out

    def _prepare(self, images: Sequence, where):
        """Draw the batch's per-image seeds now (calling thread, in order); the returned job does the work."""
        n = len(images)
        seeds = self._rng.integers(0, 1 << 63, size=n)
        shape = (n, self.channels, self.size, self.size) if self.layout == "NCHW" else \
            (n, self.size, self.size, self.channels)
        names = list(where) if where is not None else [None] * n

        def job() -> np.ndarray:
            out = self._batch_array(shape)
            parallel_for(n, lambda i: self._one(images[i], seeds[i], out[i],
                                                names[i] or f"image {i} of the batch"))
            return out
        return job

    def _batch_array(self, shape: tuple) -> np.ndarray:
        """The array of a new batch: one of the last batches made when nothing else holds it any more
        (every image of the new batch overwrites it), else a new one. A reused batch's pages are
        mapped already: a new 64 x 3 x 224 x 224 float32 array makes the kernel map and zero 38 MB."""
        out = self._spares.take(shape, self.dtype)
        if out is None:
            out = np.empty(shape, dtype=self.dtype)
        self._spares.give(out)
        return out

    def _one(self, data, seed, out: np.ndarray, name) -> None:
        rng = np.random.default_rng(int(seed))
        window = None
        if self.crop:
            def window(h, w):
                return codec.random_crop_window(h, w, rng, random_area=self.scale, random_aspect_ratio=self.ratio)
        try:
            im = codec.decode_image(data, self.color_space, window=window, max_pixels=self.max_pixels,
                                    cover=(self.size, self.size) if self.reduced else None, contiguous=False)
        except codec.ImageDecodeError as exc:
            if isinstance(name, tuple):
                raise FormatError(name[0], str(exc), record=name[1]) from exc
            raise FormatError(name, str(exc)) from exc
        filt = codec.resample_filter("auto", (im.shape[1], im.shape[0]), (self.size, self.size))
        im = codec.resize_image(im, self.size, self.size, filt)
        mirror = self.crop and rng.random() < self.flip
        chw = self.layout == "NCHW"
        if self.dtype == np.uint8:
            im = im[:, ::-1] if mirror else im
            out[...] = im.transpose(2, 0, 1) if chw else im
        else:
            codec.normalize_into(im, self.mean, self.inv_std, out, chw, mirror=mirror, table=self.table)


def open_images(path, field, *, storage_options=None, cache_dir=None):
    """The encoded images of ``field`` in the data set at ``path``, with where each came from --
    ``(image, (file, record))`` pairs for :meth:`ImageStage.batches`. The format is told from the
    path (as ``recordkit.open`` tells it); ``field`` is an OFRecord or TFRecord bytes feature, a
    Parquet binary or ``Image`` column, or WebDataset member extensions (``"jpg,png"``)."""
    from recordkit.formats import detect, registry
    fmt = registry.get(detect.sniff_format(path, storage_options))
    return fmt.open_images(path, field, storage_options=storage_options, cache_dir=cache_dir)


def _copy_state(state: dict) -> dict:
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in state.items()}


def _chunks(images: Iterable, batch_size: int, drop_last: bool):
    """``(images, names or None)`` per batch; items are encoded images or ``(image, where)`` pairs."""
    chunk, names = [], []
    for item in images:
        if isinstance(item, tuple):
            chunk.append(item[0])
            names.append(item[1])
        else:
            chunk.append(item)
            names.append(None)
        if len(chunk) == batch_size:
            yield chunk, names
            chunk, names = [], []
    if chunk and not drop_last:
        yield chunk, names
