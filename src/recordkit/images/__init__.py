"""Image work for every reader: a batch's images decoded, cropped, resized and normalized on every
core, with OpenCV, which releases the GIL while it works.

* :class:`ImageStage` (:mod:`recordkit.images.stage`): ``decode -> random-resized-crop -> flip ->
  normalize`` of a batch of encoded images, seeded, with its random state in a checkpoint;
  :func:`open_images`: a data set's encoded images, whatever its format;
* :mod:`recordkit.images.codec`: decoding (pixel budget and truncation checks first), crop
  windows, resizing, normalizing;
* :mod:`recordkit.images.pool`: the thread pool a batch runs on;
* :mod:`recordkit.images.spares`: batches written again once nothing holds them any more.
"""
from recordkit._lazy import resolver

__all__ = ["ImageStage", "open_images"]
__getattr__ = resolver(__name__, {"ImageStage": "recordkit.images.stage", "open_images": "recordkit.images.stage"})
