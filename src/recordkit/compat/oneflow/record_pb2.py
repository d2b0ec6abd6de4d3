"""``oneflow.core.record.record_pb2`` under recordkit: OneFlow's record messages.

``from recordkit.compat.oneflow import record_pb2`` gives ``OFRecord``, ``Feature``, ``BytesList``,
``FloatList``, ``DoubleList``, ``Int32List`` and ``Int64List`` -- the classes of
``recordkit.formats.ofrecord.schema`` (``record.proto`` built in a private descriptor pool with the
official protobuf package), so OneFlow's writing recipe runs unchanged::

    record = record_pb2.OFRecord(feature={"label": record_pb2.Feature(int64_list=record_pb2.Int64List(value=[3]))})
    data = record.SerializeToString()
    f.write(struct.pack("q", len(data))); f.write(data)

Note: like OneFlow's own module, ``SerializeToString`` writes the feature map in protobuf's
per-process order; ``recordkit.formats.ofrecord.writer.OFRecordWriter`` writes reproducible bytes.
"""
from recordkit.formats.ofrecord.schema import (BytesList, DoubleList, Feature, FloatList, Int32List,  # noqa: F401
                                               Int64List, OFRecord)

__all__ = ["OFRecord", "Feature", "BytesList", "FloatList", "DoubleList", "Int32List", "Int64List"]
