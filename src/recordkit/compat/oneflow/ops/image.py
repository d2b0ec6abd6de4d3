"""``recordkit.compat.oneflow.ops.image`` is :mod:`recordkit.images.codec` (decoding, crop windows,
resizing), under the name OneFlow's ops have always imported it by: the same module object, so
settings such as ``MAX_PIXELS`` are one setting whichever name sets them."""
import sys

from recordkit.images import codec

sys.modules[__name__] = codec
