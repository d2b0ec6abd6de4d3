"""OneFlow's ``record.proto`` as message classes of the official ``protobuf`` package.

The schema (``record.proto`` beside this file) is built from descriptors at import time in
a private descriptor pool, so no protoc step is needed and another package's
``oneflow.OFRecord`` cannot clash with ours.
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto

LISTS = [  # (kind, message name, element type, packed)
    ("bytes_list", "BytesList", F.TYPE_BYTES, False),
    ("float_list", "FloatList", F.TYPE_FLOAT, True),
    ("double_list", "DoubleList", F.TYPE_DOUBLE, True),
    ("int32_list", "Int32List", F.TYPE_INT32, True),
    ("int64_list", "Int64List", F.TYPE_INT64, True),
]
KINDS = tuple(kind for kind, *_ in LISTS)


def _file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="recordkit/ofrecord/record.proto", package="oneflow",
                                             syntax="proto2")
    for _, name, etype, packed in LISTS:
        msg = fdp.message_type.add(name=name)
        field = msg.field.add(name="value", number=1, type=etype, label=F.LABEL_REPEATED)
        if packed:
            field.options.packed = True
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (kind, name, _, _) in enumerate(LISTS, start=1):
        feature.field.add(name=kind, number=number, type=F.TYPE_MESSAGE, type_name=f".oneflow.{name}",
                          label=F.LABEL_OPTIONAL, oneof_index=0)
    record = fdp.message_type.add(name="OFRecord")
    entry = record.nested_type.add(name="FeatureEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=".oneflow.Feature",
                    label=F.LABEL_OPTIONAL)
    record.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, type_name=".oneflow.OFRecord.FeatureEntry",
                     label=F.LABEL_REPEATED)
    return fdp


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
_classes = {name: message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"oneflow.{name}"))
            for name in ("OFRecord", "Feature", "BytesList", "FloatList", "DoubleList", "Int32List", "Int64List")}

OFRecord = _classes["OFRecord"]
Feature = _classes["Feature"]
BytesList = _classes["BytesList"]
FloatList = _classes["FloatList"]
DoubleList = _classes["DoubleList"]
Int32List = _classes["Int32List"]
Int64List = _classes["Int64List"]
