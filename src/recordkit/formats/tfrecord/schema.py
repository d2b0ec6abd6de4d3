"""TensorFlow's ``tf.train`` example messages as classes of the official ``protobuf`` package.

Built from descriptors at import time in a private descriptor pool (as
``formats/ofrecord/schema.py`` does for OneFlow), so neither TensorFlow nor a protoc step is
needed and a ``tensorflow.Example`` registered by another package cannot clash with ours.
The fields and numbers are those of tensorflow/core/example/feature.proto and example.proto
(proto3: repeated scalars are packed).
"""
from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

F = descriptor_pb2.FieldDescriptorProto


def _file() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="recordkit/tfrecord/example.proto", package="tensorflow",
                                             syntax="proto3")
    for name, etype in (("BytesList", F.TYPE_BYTES), ("FloatList", F.TYPE_FLOAT), ("Int64List", F.TYPE_INT64)):
        msg = fdp.message_type.add(name=name)
        msg.field.add(name="value", number=1, type=etype, label=F.LABEL_REPEATED)
    feature = fdp.message_type.add(name="Feature")
    feature.oneof_decl.add(name="kind")
    for number, (kind, name) in enumerate((("bytes_list", "BytesList"), ("float_list", "FloatList"),
                                           ("int64_list", "Int64List")), start=1):
        feature.field.add(name=kind, number=number, type=F.TYPE_MESSAGE, type_name=f".tensorflow.{name}",
                          label=F.LABEL_OPTIONAL, oneof_index=0)

    def map_message(name: str, field: str, value_type: str):
        msg = fdp.message_type.add(name=name)
        entry = msg.nested_type.add(name=field[0].upper() + field[1:].replace("_l", "L") + "Entry")
        entry.options.map_entry = True
        entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
        entry.field.add(name="value", number=2, type=F.TYPE_MESSAGE, type_name=f".tensorflow.{value_type}",
                        label=F.LABEL_OPTIONAL)
        msg.field.add(name=field, number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=f".tensorflow.{name}.{entry.name}")

    map_message("Features", "feature", "Feature")
    flist = fdp.message_type.add(name="FeatureList")
    flist.field.add(name="feature", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.Feature",
                    label=F.LABEL_REPEATED)
    map_message("FeatureLists", "feature_list", "FeatureList")
    example = fdp.message_type.add(name="Example")
    example.field.add(name="features", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.Features",
                      label=F.LABEL_OPTIONAL)
    seq = fdp.message_type.add(name="SequenceExample")
    seq.field.add(name="context", number=1, type=F.TYPE_MESSAGE, type_name=".tensorflow.Features",
                  label=F.LABEL_OPTIONAL)
    seq.field.add(name="feature_lists", number=2, type=F.TYPE_MESSAGE, type_name=".tensorflow.FeatureLists",
                  label=F.LABEL_OPTIONAL)
    return fdp


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_file())
_classes = {name: message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"tensorflow.{name}"))
            for name in ("BytesList", "FloatList", "Int64List", "Feature", "Features", "FeatureList",
                         "FeatureLists", "Example", "SequenceExample")}

BytesList = _classes["BytesList"]
FloatList = _classes["FloatList"]
Int64List = _classes["Int64List"]
Feature = _classes["Feature"]
Features = _classes["Features"]
FeatureList = _classes["FeatureList"]
FeatureLists = _classes["FeatureLists"]
Example = _classes["Example"]
SequenceExample = _classes["SequenceExample"]
