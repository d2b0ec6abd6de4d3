"""``oneflow.nn``'s data modules over recordkit's OFRecord reader and decoders.

Each class takes OneFlow 0.9's constructor parameters (same names, order and defaults) and is
called like OneFlow's module: ``reader()`` returns the next batch of records (endless),
``decoder(records)`` a tensor. The work is done by :mod:`recordkit.formats.ofrecord`
(``reader.OFRecordReader``, ``batch.decode_frames``, ``decoders``); this layer maps names,
dtypes and OneFlow's stateful behaviour (a module keeps its random stream from call to call).
"""
from __future__ import annotations

import os
import warnings

import numpy as np

from recordkit.compat.oneflow import _tensor as T
from recordkit.compat.oneflow._module import Module
from recordkit.compat.oneflow.nn import image  # noqa: F401  (flow.nn.image.Resize, ...)
from recordkit.images.spares import Spares

__all__ = ["Module", "OFRecordReader", "OfrecordReader", "OFRecordRawDecoder", "OfrecordRawDecoder",
           "OFRecordBytesDecoder", "OFRecordImageDecoder", "OFRecordImageDecoderRandomCrop", "CoinFlip",
           "CropMirrorNormalize", "image"]


def _check_local(placement, sbp, what: str) -> None:
    if placement is not None or sbp is not None:
        raise NotImplementedError(f"{what}: placement/sbp (global tensors) are not supported; each process reads "
                                  "its own share (RANK/WORLD_SIZE environment, as oneflow.distributed.launch sets)")


def _seed(random_seed):
    """OneFlow's seed convention: None or -1 mean a fresh random seed."""
    if random_seed is None or int(random_seed) == -1:
        return int(np.random.SeedSequence().generate_state(1, dtype=np.uint32)[0])
    return int(random_seed)


def _env_rank():
    """(world_size, rank) from oneflow.distributed.launch's RANK/WORLD_SIZE, else torch.distributed, else (1, 0)."""
    if "WORLD_SIZE" in os.environ and "RANK" in os.environ:
        return int(os.environ["WORLD_SIZE"]), int(os.environ["RANK"])
    from recordkit.engine.environment import distributed_partition
    w, r = distributed_partition()
    return (1 if w is None else w), (0 if r is None else r)


class OFRecordReader(Module):
    """``flow.nn.OFRecordReader``: each call returns the next ``batch_size`` records, endlessly.

    As OneFlow: ``data_part_num`` part files named ``part_name_prefix`` + the part number
    zero-padded to ``part_name_suffix_length`` are read (the default 1 reads only ``part-0``);
    ranks (``RANK``/``WORLD_SIZE``) read contiguous balanced runs of parts; the stream wraps
    around epochs, and batches run across epoch ends. ``random_shuffle`` is OneFlow's shuffle
    buffer with OneFlow's random stream: the same ``random_seed`` gives the same order as
    OneFlow 0.9 (``-1``: a fresh seed); ``shuffle_after_epoch`` reshuffles the part list before
    every later epoch exactly as OneFlow does. Errors are located ``FormatError``s (part file,
    byte offset, record index) instead of OneFlow's process aborts.
    """

    def __init__(self, ofrecord_dir: str, batch_size: int = 1, data_part_num: int = 1,
                 part_name_prefix: str = "part-", part_name_suffix_length: int = -1, random_shuffle: bool = False,
                 shuffle_buffer_size: int = 1024, shuffle_after_epoch: bool = False, random_seed: int = -1,
                 device=None, placement=None, sbp=None, name=None, *, storage_options=None, cache_dir=None):
        super().__init__()
        _check_local(placement, sbp, "OFRecordReader")
        from recordkit.compat.oneflow._reader import OneFlowOrderReader
        world_size, rank = _env_rank()
        self.ofrecord_dir = ofrecord_dir
        self.batch_size = int(batch_size)
        self.data_part_num = data_part_num
        self.part_name_prefix = part_name_prefix
        self.part_name_suffix_length = part_name_suffix_length
        self.random_shuffle = bool(random_shuffle)
        self.shuffle_buffer_size = int(shuffle_buffer_size)
        self.shuffle_after_epoch = bool(shuffle_after_epoch)
        self.seed = _seed(random_seed)
        self.device = T.device(device or "cpu")
        self._reader = OneFlowOrderReader(
            ofrecord_dir, batch_size=self.batch_size, data_part_num=data_part_num, part_name_prefix=part_name_prefix,
            part_name_suffix_length=part_name_suffix_length, random_shuffle=self.random_shuffle,
            shuffle_buffer_size=self.shuffle_buffer_size, shuffle_after_epoch=self.shuffle_after_epoch,
            random_seed=self.seed, rank=rank, world_size=world_size, epochs=None,
            storage_options=storage_options, cache_dir=cache_dir)
        self._batches = None
        self._peeked = None  # (batch, error): the next batch, read ahead by _peek

    def forward(self):
        peeked, self._peeked = self._peeked, None
        if peeked is None:
            return self._read()
        batch, error = peeked
        if error is not None:
            raise error
        return batch

    def _read(self):
        if self._batches is None:  # in read order: the frames stay in the blocks read (runs)
            self._batches = self._reader._batched(self._reader.frames()) if self.random_shuffle \
                else self._reader.batch_runs()
        try:
            batch = next(self._batches)
        except StopIteration:
            raise RuntimeError(f"{self.ofrecord_dir}: no readable records") from None
        if self.random_shuffle:
            return T.OFRecordBatch(batch, self._reader.budget, following=self._peek)
        return T.OFRecordBatch(budget=self._reader.budget, runs=batch, following=self._peek)

    def _peek(self):
        """The batch the next call returns, read now, so that an image decoder can prepare it while
        the caller uses this one; None when reading it failed (the next call raises that error)."""
        if self._peeked is None:
            try:
                self._peeked = (self._read(), None)
            except Exception as exc:  # raised by the next call, where it belongs
                self._peeked = (None, exc)
        return self._peeked[0]


OfrecordReader = OFRecordReader


def _records_input(input, what: str) -> T.OFRecordBatch:
    if not isinstance(input, T.OFRecordBatch):
        raise TypeError(f"{what} decodes the output of flow.nn.OFRecordReader, not {type(input).__name__}")
    return input


class OFRecordRawDecoder(Module):
    """``flow.nn.OFRecordRawDecoder(blob_name, shape, dtype, dim1_varying_length=False, truncate=False)``:
    a dense ``(N, *shape)`` tensor of feature ``blob_name`` (the compiled wire-format decoder;
    rules in ``recordkit.formats.ofrecord.decoders.raw_decode``)."""

    def __init__(self, blob_name: str, shape, dtype, dim1_varying_length: bool = False, truncate: bool = False,
                 auto_zero_padding: bool = False, name=None):
        super().__init__()
        if auto_zero_padding:
            warnings.warn("auto_zero_padding is deprecated, use truncate=True instead", DeprecationWarning,
                          stacklevel=2)
        from recordkit.formats.ofrecord.batch import normalize_spec
        self.blob_name = blob_name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = T.as_dtype(dtype)
        if self.dtype.np is None:
            raise ValueError(f"OFRecordRawDecoder cannot decode into {self.dtype}")
        self.dim1_varying_length = bool(dim1_varying_length)
        self.truncate = bool(truncate or auto_zero_padding)
        self._spec = normalize_spec({blob_name: {"shape": self.shape, "dtype": self.dtype.np,
                                                 "truncate": self.truncate,
                                                 "dim1_varying_length": self.dim1_varying_length}})

    def forward(self, input):
        from recordkit.formats.ofrecord.batch import decode_frames, decode_runs
        batch = _records_input(input, "OFRecordRawDecoder")
        if batch.runs is not None:
            return T.Tensor(decode_runs(batch.runs, self._spec)[self.blob_name])
        return T.Tensor(decode_frames(batch.frames(), self._spec)[self.blob_name])


OfrecordRawDecoder = OFRecordRawDecoder


class OFRecordBytesDecoder(Module):
    """``flow.nn.OFRecordBytesDecoder(blob_name)``: a tensor buffer of the single bytes value of each
    record as a 1-D uint8 array (``.numpy()[i]``, as in OneFlow)."""

    def __init__(self, blob_name: str, name=None):
        super().__init__()
        self.blob_name = blob_name

    def forward(self, input):
        from recordkit.compat.oneflow import ops as decoders
        batch = _records_input(input, "OFRecordBytesDecoder")
        return T.TensorBuffer(decoders.bytes_decode(batch.records(), self.blob_name, where=batch.where()))


class _DecodesAhead(Module):
    """An image decoder that, given a batch from ``OFRecordReader``, also starts decoding the batch the
    reader returns next, on a background thread (:func:`recordkit.images.pool.ahead`), so that it is
    ready -- or nearly -- when asked for, while the caller worked on this one. The result is what a
    call without preparing ahead would give: a prepared batch is used only if it is exactly the
    batch asked for (otherwise it is dropped and its random draws undone), and its errors are raised
    by that call. ``prefetch=False`` turns this off."""

    _ahead = None  # (batch, future, undo)

    def _decode_batch(self, batch):
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] is batch:
            out = ahead[1].result()
        else:
            if ahead is not None:
                self._drop(ahead)
            out = self._job(batch)[0]()
        if self.prefetch:
            nxt = batch.following()
            if nxt is not None:
                job, undo = self._job(nxt)
                from recordkit.images.pool import ahead as run_ahead
                self._ahead = (nxt, run_ahead(job), undo)
        return out

    @staticmethod
    def _drop(ahead) -> None:
        try:
            ahead[1].result()
        except Exception:  # noqa: BLE001 - a batch nobody asked for: its error is nobody's
            pass
        ahead[2]()

    def _job(self, batch):
        """``(decode, undo)``: a function decoding ``batch`` and one undoing its random draws."""
        raise NotImplementedError


class OFRecordImageDecoder(_DecodesAhead):
    """``flow.nn.OFRecordImageDecoder(blob_name, color_space="BGR")``: a tensor buffer of HWC uint8
    images (OpenCV; RGB, BGR or GRAY). ``max_pixels`` (recordkit's): the most pixels an image may
    declare (default Pillow's ``Image.MAX_IMAGE_PIXELS``); more, or truncated data, is a
    ``FormatError`` naming the file and the record. The reader's next batch is decoded while the
    caller uses this one (``prefetch=False``: not)."""

    def __init__(self, blob_name: str, color_space: str = "BGR", *, max_pixels=None, prefetch: bool = True):
        super().__init__()
        from recordkit.compat.oneflow.ops import image as _img
        _img.channels_of(color_space)
        self.blob_name = blob_name
        self.color_space = color_space
        self.max_pixels = None if max_pixels is None else _img.pixel_budget(max_pixels)
        self.prefetch = bool(prefetch)

    def forward(self, input):
        return T.TensorBuffer(self._decode_batch(_records_input(input, "OFRecordImageDecoder")))

    def _job(self, batch):
        from recordkit.compat.oneflow import ops as decoders

        def decode():
            return decoders.image_decode(batch.records(), self.blob_name, self.color_space, where=batch.where(),
                                         max_pixels=self.max_pixels)
        return decode, lambda: None


class OFRecordImageDecoderRandomCrop(_DecodesAhead):
    """``flow.nn.OFRecordImageDecoderRandomCrop``: decode with an Inception-style random crop.

    As OneFlow's kernel, each batch slot has its own random stream, seeded from ``random_seed``
    and advancing from call to call (NumPy generators: the crop algorithm is OneFlow's, the
    draws are not its ``std::mt19937``'s). ``max_pixels`` as for ``OFRecordImageDecoder``.
    ``cover=(h, w)`` (recordkit's, off by default): decode a JPEG at 1/2, 1/4 or 1/8 scale where its
    crop still has ``h`` x ``w`` pixels there, and return the crop at that scale -- less decoding for a
    pipeline that resizes to ``h`` x ``w`` next, with pixels that are no longer OneFlow's. The
    reader's next batch is decoded (its windows drawn) while the caller uses this one
    (``prefetch=False``: not); the windows are the same either way.
    """

    def __init__(self, blob_name: str, color_space: str = "BGR", num_attempts: int = 10, random_seed=None,
                 random_area=(0.08, 1.0), random_aspect_ratio=(0.75, 1.333333), *, max_pixels=None, cover=None,
                 prefetch: bool = True):
        super().__init__()
        from recordkit.compat.oneflow.ops import image as _img
        _img.channels_of(color_space)
        _img.validate_crop_ranges(num_attempts, random_area, random_aspect_ratio)
        self.blob_name = blob_name
        self.color_space = color_space
        self.num_attempts = int(num_attempts)
        self.random_area = tuple(random_area)
        self.random_aspect_ratio = tuple(random_aspect_ratio)
        self.seed = _seed(random_seed)
        self._seq = np.random.SeedSequence(self.seed)
        self._gens = []
        self.max_pixels = None if max_pixels is None else _img.pixel_budget(max_pixels)
        self.cover = None if cover is None else _img.cover_size(cover)
        self.prefetch = bool(prefetch)

    def forward(self, input):
        return T.TensorBuffer(self._decode_batch(_records_input(input, "OFRecordImageDecoderRandomCrop")))

    def _job(self, batch):
        from recordkit.compat.oneflow import ops as decoders
        n = len(batch)
        if len(self._gens) < n:
            self._gens += [np.random.default_rng(s) for s in self._seq.spawn(n - len(self._gens))]
        gens = self._gens[:n]
        states = [g.bit_generator.state for g in gens]

        def decode():
            return decoders.image_decode_random_crop(
                batch.records(), self.blob_name, self.color_space, num_attempts=self.num_attempts,
                random_seed=gens, random_area=self.random_area, random_aspect_ratio=self.random_aspect_ratio,
                where=batch.where(), max_pixels=self.max_pixels, cover=self.cover)

        def undo():
            for g, st in zip(gens, states):
                g.bit_generator.state = st
        return decode, undo


class CoinFlip(Module):
    """``flow.nn.CoinFlip(batch_size=1, random_seed=None, probability=0.5)``: ``(batch_size,)`` int8
    Bernoulli draws per call, from one stream that advances from call to call (NumPy's, not OneFlow's)."""

    def __init__(self, batch_size: int = 1, random_seed=None, probability: float = 0.5, device=None,
                 placement=None, sbp=None):
        super().__init__()
        _check_local(placement, sbp, "CoinFlip")
        if not 0.0 <= float(probability) <= 1.0:
            raise ValueError(f"probability must be in [0, 1], not {probability}")
        self.batch_size = int(batch_size)
        self.probability = float(probability)
        self.seed = _seed(random_seed)
        self._rng = np.random.default_rng(self.seed)

    def forward(self):
        from recordkit.compat.oneflow import ops as decoders
        return T.Tensor(decoders.coin_flip(self.batch_size, self._rng, self.probability))


class CropMirrorNormalize(Module):
    """``flow.nn.CropMirrorNormalize``: crop, mirror where ``mirror[i]`` is non-zero, ``(x - mean) / std``.

    Takes a dense uint8 NHWC tensor or a tensor buffer of HWC uint8 images (then a crop size is
    needed), as OneFlow. Like OneFlow 0.9 the layout is NCHW unless the environment sets
    ``ONEFLOW_ENABLE_NHWC=1`` (the ``output_layout`` argument is deprecated there and ignored,
    with a warning when not "NCHW"). An output the caller no longer holds (no tensor, array or view
    of it is left anywhere) is written again by a later call instead of a new one: a batch of
    float32 images is larger than the allocator keeps for reuse, and fresh memory costs the kernel
    zeroing it page by page.
    """


    def __init__(self, color_space: str = "BGR", output_layout: str = "NCHW", crop_h: int = 0, crop_w: int = 0,
                 crop_pos_y: float = 0.5, crop_pos_x: float = 0.5, mean=(0.0,), std=(1.0,), output_dtype=None):
        super().__init__()
        if output_layout != "NCHW":
            warnings.warn("output_layout is deprecated in OneFlow 0.9 (set ONEFLOW_ENABLE_NHWC=1 for NHWC); ignored",
                          DeprecationWarning, stacklevel=2)
        self.output_layout = "NHWC" if os.getenv("ONEFLOW_ENABLE_NHWC") == "1" else "NCHW"
        self.color_space = color_space
        self.crop_h, self.crop_w = int(crop_h), int(crop_w)
        self.crop_pos_y, self.crop_pos_x = float(crop_pos_y), float(crop_pos_x)
        self.mean, self.std = list(np.atleast_1d(mean)), list(np.atleast_1d(std))
        self.output_dtype = T.float32 if output_dtype is None else T.as_dtype(output_dtype)
        if not self.output_dtype.is_floating_point:
            raise ValueError(f"CropMirrorNormalize output_dtype must be a float type, not {self.output_dtype}")
        self._spares = Spares(2)  # outputs kept for reuse once nobody else holds them

    def forward(self, input, mirror=None):
        from recordkit.compat.oneflow import ops as decoders
        if isinstance(input, T.TensorBuffer):
            images = input.numpy()
        elif isinstance(input, T.Tensor) or isinstance(input, np.ndarray):
            images = T.as_array(input, "CropMirrorNormalize")
            if images.dtype != np.uint8:
                raise TypeError(f"CropMirrorNormalize needs uint8 images or a tensor buffer, not "
                                f"{T.from_numpy_dtype(images.dtype)}")
        else:
            raise TypeError(f"CropMirrorNormalize needs a tensor, not {type(input).__name__}")
        flags = None if mirror is None else T.as_array(mirror, "mirror")
        out = decoders.crop_mirror_normalize(
            images, color_space=self.color_space, output_layout=self.output_layout, crop_h=self.crop_h,
            crop_w=self.crop_w, crop_pos_y=self.crop_pos_y, crop_pos_x=self.crop_pos_x, mean=self.mean,
            std=self.std, mirror=flags, out=self._spares.take())
        self._spares.give(out)
        return T.Tensor(out.astype(self.output_dtype.np, copy=False))

