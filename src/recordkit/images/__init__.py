"""Image work for every reader: a batch's images decoded, cropped, resized and normalized on every
core (:mod:`recordkit.images.pool`), with OpenCV, which releases the GIL while it works."""
