"""``oneflow.core.record.record_pb2`` at OneFlow's own module path (the same classes as
``recordkit.compat.oneflow.record_pb2``)."""
from recordkit.compat.oneflow.record_pb2 import (BytesList, DoubleList, Feature, FloatList, Int32List,  # noqa: F401
                                                 Int64List, OFRecord)

__all__ = ["OFRecord", "Feature", "BytesList", "FloatList", "DoubleList", "Int32List", "Int64List"]
