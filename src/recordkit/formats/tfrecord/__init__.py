"""TFRecord: a directory of ``part-NNNNN.tfrecord`` files of ``tf.train.SequenceExample`` (see writer.py)."""
from recordkit.formats.tfrecord.reader import TFRecordReader, looks_like
from recordkit.formats.tfrecord.writer import TFRecordWriter

__all__ = ["TFRecordReader", "TFRecordWriter", "looks_like"]
