"""SINGA's record messages as classes of the official ``protobuf`` package.

SINGA 0.x stored every image as a ``RecordProto`` (named ``SingleLabelImageRecord``
before SINGA-85, same fields and numbers) from ``src/proto/common.proto`` (package
``singa``, proto2); SINGA 0.1 shard values wrapped it in a ``Record`` message (field 5).
SINGA 1.x replaced it with ``ImageRecord`` (``src/proto/io.proto``), whose ``pixel`` holds
a JPEG and whose ``label`` is repeated.

The schemas are built from descriptors at import time in a private descriptor pool (as
``recordkit.formats.ofrecord.schema`` does), so no protoc step is needed and a real
``singa`` installation's generated modules cannot clash with ours. proto2 semantics matter
for byte compatibility: ``shape`` is *unpacked* (one ``0x08`` tag per element), ``data``
is *packed*, and ``label`` is emitted whenever it is set, even to 0. The Python runtime
serializes fields in number order, exactly like the C++ runtime SINGA used, so the bytes
we write equal those of SINGA's ``create_data`` programs.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory

from recordkit.errors import FormatError

F = descriptor_pb2.FieldDescriptorProto

__all__ = [
    "RecordProto", "SingleLabelImageRecord", "Record", "ImageRecord",
    "encode_record", "encode_image_record", "encode_mean_record", "decode_record",
    "wrap_v01_record", "unwrap_v01_record",
    "encode_image_record_v1", "decode_image_record_v1",
]


def _record_fields(msg) -> None:
    """The four RecordProto fields (shared by the 0.1 and 0.2+ names of the message)."""
    msg.field.add(name="shape", number=1, type=F.TYPE_INT32, label=F.LABEL_REPEATED)  # unpacked (proto2)
    msg.field.add(name="label", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    msg.field.add(name="pixel", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    data = msg.field.add(name="data", number=4, type=F.TYPE_FLOAT, label=F.LABEL_REPEATED)
    data.options.packed = True


def _common_file() -> descriptor_pb2.FileDescriptorProto:
    """The parts of SINGA 0.x ``common.proto`` that describe stored records."""
    fdp = descriptor_pb2.FileDescriptorProto(name="recordkit/singa/common.proto", package="singa",
                                             syntax="proto2")
    _record_fields(fdp.message_type.add(name="RecordProto"))
    _record_fields(fdp.message_type.add(name="SingleLabelImageRecord"))
    record = fdp.message_type.add(name="Record")
    kind = record.enum_type.add(name="Type")
    kind.value.add(name="kSingleLabelImage", number=0)
    field = record.field.add(name="type", number=1, type=F.TYPE_ENUM, type_name=".singa.Record.Type",
                             label=F.LABEL_OPTIONAL)
    field.default_value = "kSingleLabelImage"
    record.field.add(name="user_type", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    record.field.add(name="image", number=5, type=F.TYPE_MESSAGE, type_name=".singa.RecordProto",
                     label=F.LABEL_OPTIONAL)
    record.extension_range.add(start=101, end=201)
    return fdp


def _io_file() -> descriptor_pb2.FileDescriptorProto:
    """``ImageRecord`` from SINGA 1.x ``io.proto`` (proto2: ``shape`` and ``label`` unpacked)."""
    fdp = descriptor_pb2.FileDescriptorProto(name="recordkit/singa/io.proto", package="singa", syntax="proto2")
    msg = fdp.message_type.add(name="ImageRecord")
    msg.field.add(name="shape", number=1, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    msg.field.add(name="label", number=2, type=F.TYPE_INT32, label=F.LABEL_REPEATED)
    msg.field.add(name="pixel", number=3, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    return fdp


_pool = descriptor_pool.DescriptorPool()
_pool.Add(_common_file())
_pool.Add(_io_file())


def _cls(name: str):
    return message_factory.GetMessageClass(_pool.FindMessageTypeByName(f"singa.{name}"))


RecordProto = _cls("RecordProto")
SingleLabelImageRecord = _cls("SingleLabelImageRecord")
Record = _cls("Record")
ImageRecord = _cls("ImageRecord")


def encode_record(*, shape: Sequence[int] = (), label: int | None = None, pixel: bytes | None = None,
                  data: Iterable[float] | None = None) -> bytes:
    """Serialize a RecordProto field by field, setting only what the caller gives.

    Unset fields are absent from the bytes (proto2 has-bits), which is what separates e.g.
    the CIFAR mean record (no label) from an image record with label 0.
    """
    rec = RecordProto()
    rec.shape.extend(int(d) for d in shape)
    if label is not None:
        rec.label = int(label)
    if pixel is not None:
        rec.pixel = bytes(pixel)
    if data is not None:
        rec.data.extend(np.asarray(data, dtype=np.float32).ravel().tolist())
    return rec.SerializeToString()


def encode_image_record(label: int, pixels, shape: Sequence[int] | None = None) -> bytes:
    """The value SINGA's cifar10/mnist ``create_data`` wrote for one image.

    ``pixels`` is a uint8 array (CHW for CIFAR, HW for MNIST); its shape becomes the
    record's ``shape`` unless ``shape`` is given. Fields: shape, label, raw pixel bytes;
    never ``data``.
    """
    arr = np.asarray(pixels)
    if arr.dtype != np.uint8:
        raise ValueError(f"pixels must be uint8, not {arr.dtype}")
    dims = tuple(arr.shape) if shape is None else tuple(int(d) for d in shape)
    if int(np.prod(dims, dtype=np.int64)) != arr.size:
        raise ValueError(f"shape {dims} does not hold {arr.size} pixels")
    return encode_record(shape=dims, label=label, pixel=np.ascontiguousarray(arr).tobytes())


def encode_mean_record(mean, shape: Sequence[int] | None = None) -> bytes:
    """The ``image_mean.bin`` value: shape plus float32 ``data``, no label, no pixel."""
    arr = np.asarray(mean, dtype=np.float32)
    dims = tuple(arr.shape) if shape is None else tuple(int(d) for d in shape)
    return encode_record(shape=dims, data=arr)


def _parse(cls, value: bytes, path, offset, record):
    msg = cls()
    try:
        msg.ParseFromString(bytes(value))
    except message.DecodeError as exc:
        raise FormatError(path, f"not a serialized {cls.DESCRIPTOR.name}: {exc}", offset=offset,
                          record=record) from None
    return msg


def _reshape(arr: np.ndarray, shape: tuple, what: str, path, offset, record) -> np.ndarray:
    """Give a flat field the record's own shape; records without a shape stay flat."""
    if not shape:
        return arr
    if any(int(d) < 0 for d in shape):
        raise FormatError(path, f"the record's shape {list(shape)} has a negative dimension", offset=offset,
                          record=record)
    needed = 1
    extent = 1  # NumPy refuses a shape whose nonzero dimensions overflow, even with a zero among them
    for d in shape:  # Python ints: no int64 wrap-around for absurd shapes
        needed *= int(d)
        extent *= max(int(d), 1)
    if extent >= 2**63:
        raise FormatError(path, f"the record's shape {list(shape)} is too large for any array", offset=offset,
                          record=record)
    if needed != arr.size:
        raise FormatError(path, f"{what} has {arr.size} values but the record's shape {list(shape)} "
                          f"needs {needed}", offset=offset, record=record)
    return arr.reshape(tuple(int(d) for d in shape))


def decode_record(value: bytes, *, path="<record>", offset: int | None = None, record=None) -> dict:
    """Parse a RecordProto / SingleLabelImageRecord value into plain Python and NumPy.

    Returns ``{"shape": [..], "label": int | None, "pixel": uint8 array | None,
    "data": float32 array | None}``; ``pixel``/``data`` take the record's shape when it
    has one (CHW for CIFAR) and stay flat otherwise (RecordOutputLayer wrote no shape).
    ``path``/``offset``/``record`` only locate errors.
    """
    msg = _parse(RecordProto, value, path, offset, record)
    shape = tuple(msg.shape)
    out = {"shape": list(shape), "label": msg.label if msg.HasField("label") else None,
           "pixel": None, "data": None}
    if msg.HasField("pixel"):
        out["pixel"] = _reshape(np.frombuffer(msg.pixel, dtype=np.uint8), shape, "pixel", path, offset, record)
    if len(msg.data):
        out["data"] = _reshape(np.array(msg.data, dtype=np.float32), shape, "data", path, offset, record)
    return out


def wrap_v01_record(record_value: bytes) -> bytes:
    """SINGA 0.1 shard value: the image record inside a ``Record`` wrapper (field 5, tag 0x2A)."""
    wrapper = Record()
    wrapper.image.ParseFromString(bytes(record_value))
    return wrapper.SerializeToString()


def unwrap_v01_record(value: bytes, *, path="<record>", offset: int | None = None, record=None) -> bytes:
    """The serialized image record inside a SINGA 0.1 ``Record`` wrapper."""
    wrapper = _parse(Record, value, path, offset, record)
    if not wrapper.HasField("image"):
        raise FormatError(path, "Record wrapper has no image (field 5)", offset=offset, record=record)
    return wrapper.image.SerializeToString()


def encode_image_record_v1(shape: Sequence[int], label, pixel: bytes) -> bytes:
    """A SINGA 1.x ``ImageRecord``: shape, label(s), and ``pixel`` = the *encoded* (JPEG) image.

    SINGA's encoder used OpenCV ``imencode`` (quality 100); we take the encoded bytes as
    given because no other JPEG encoder reproduces OpenCV's output byte for byte.
    """
    rec = ImageRecord()
    rec.shape.extend(int(d) for d in shape)
    labels = [label] if isinstance(label, (int, np.integer)) else list(label)
    rec.label.extend(int(v) for v in labels)
    rec.pixel = bytes(pixel)
    return rec.SerializeToString()


def decode_image_record_v1(value: bytes, *, path="<record>", offset: int | None = None, record=None) -> dict:
    """Parse a 1.x ``ImageRecord``: ``{"shape": [..], "label": [..], "pixel": bytes (JPEG)}``."""
    msg = _parse(ImageRecord, value, path, offset, record)
    return {"shape": list(msg.shape), "label": list(msg.label), "pixel": bytes(msg.pixel)}


def decoder_for(store: str):
    """The record decoder of a store kind: BinFile holds SINGA 1.x ``ImageRecord``s, the other stores
    0.x ``Record``s."""
    return decode_image_record_v1 if store == "binfile" else decode_record


def holds_image_records(store: str) -> bool:
    """Whether a store kind holds SINGA 1.x ``ImageRecord``s (BinFile) rather than 0.x ``Record``s."""
    return decoder_for(store) is decode_image_record_v1
