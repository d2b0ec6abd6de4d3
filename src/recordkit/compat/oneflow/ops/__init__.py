"""OneFlow's image decoders and preprocessing ops (``flow.nn``, ``flow.nn.image``) on OpenCV and NumPy:
``image_ops`` (the ops), ``image`` (decoding, crop windows, resize helpers: ``recordkit.images.codec``); the
codec's feature decoders ``raw_decode``/``bytes_decode`` are re-exported, so
one module holds every decoder ``flow.nn`` has."""
from recordkit.formats.ofrecord.decoders import RAW_DTYPES, bytes_decode, raw_decode  # noqa: F401  (the codec's)
from recordkit.compat.oneflow.ops.image_ops import (batch_align, coin_flip, crop_mirror_normalize, flip,  # noqa: F401
                                                    image_decode, image_decode_random_crop, normalize,
                                                    random_crop_generators, resize)

__all__ = ["RAW_DTYPES", "bytes_decode", "raw_decode", "batch_align", "coin_flip", "crop_mirror_normalize", "flip", "image_decode", "image_decode_random_crop",
           "normalize", "random_crop_generators", "resize"]
