"""TFRecord: a directory of ``part-NNNNN.tfrecord`` files of ``tf.train.SequenceExample`` (see writer.py).

The names resolve on first use: the registry's probes import this package without the reader,
writer or their libraries (a TFRecord open pays for no pyarrow)."""
from recordkit._lazy import resolver

_SOURCES = {"TFRecordReader": "recordkit.formats.tfrecord.reader", "looks_like": "recordkit.formats.tfrecord.reader", "TFRecordWriter": "recordkit.formats.tfrecord.writer"}
__all__ = ["TFRecordReader", "looks_like", "TFRecordWriter"]
__getattr__ = resolver(__name__, _SOURCES)
