"""OneFlow 0.9's data API on recordkit: ``import recordkit.compat.oneflow as flow``.

A OneFlow data script runs with only its import changed::

    # import oneflow as flow
    import recordkit.compat.oneflow as flow

    reader = flow.nn.OFRecordReader("data/train", batch_size=32, data_part_num=4, part_name_suffix_length=5,
                                    random_shuffle=True, shuffle_after_epoch=True, random_seed=0)
    image_decoder = flow.nn.OFRecordImageDecoderRandomCrop("encoded", color_space="RGB")
    label_decoder = flow.nn.OFRecordRawDecoder("class/label", shape=(), dtype=flow.int32)
    flip = flow.nn.CoinFlip(batch_size=32)
    cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=224, crop_w=224, mean=[123.68, 116.78, 103.94],
                                      std=[58.4, 57.12, 57.38])
    records = reader()                                    # the next 32 records, endlessly
    images = cmn(flow.nn.image.Resize(target_size=(256, 256))(image_decoder(records))[0], flip())
    images.shape, images.dtype, images.numpy()            # oneflow.Size([32, 3, 224, 224]) oneflow.float32 ndarray

What is here: ``flow.nn.OFRecordReader``, ``OFRecordRawDecoder``, ``OFRecordBytesDecoder``,
``OFRecordImageDecoder``, ``OFRecordImageDecoderRandomCrop``, ``CoinFlip``, ``CropMirrorNormalize``,
``flow.nn.image.{Resize, flip, normalize, batch_align, decode}``, ``flow.nn.Module``, the dtypes,
``flow.Size``, ``flow.device``, ``flow.tensor``, ``flow.tensor_buffer_to_list_of_tensors``,
``flow.tensor_buffer_to_tensor``, ``flow.tensor_to_tensor_buffer`` and ``record_pb2``.

Results are ``flow.Tensor`` objects wrapping NumPy arrays (see ``_tensor``): ``.numpy()``,
``.shape`` (``flow.Size``), ``.dtype`` (``flow.float32`` ...) behave as OneFlow's; models are
not part of this layer (hand ``t.numpy()`` to your framework).
"""
from recordkit.compat.oneflow._tensor import (Size, Tensor, device, float16, float32, float64, int8, int32,  # noqa: F401
                                              int64, of_record, tensor, tensor_buffer, tensor_buffer_to_list_of_tensors,
                                              tensor_buffer_to_tensor, tensor_to_tensor_buffer, uint8, char)
from recordkit.compat.oneflow._tensor import bool_ as bool  # noqa: F401,A001
from recordkit.compat.oneflow._tensor import dtype  # noqa: F401
from recordkit.compat.oneflow import nn  # noqa: F401

float = float32  # noqa: A001  (flow.float is flow.float32, as in OneFlow)
double = float64
half = float16
long = int64
int = int32  # noqa: A001

__version__ = "0.9.0"  # the OneFlow API this layer follows

__all__ = ["nn", "Tensor", "Size", "device", "dtype", "tensor", "float", "float32", "double", "float64", "half",
           "float16", "int8", "uint8", "int32", "int", "int64", "long", "bool", "char", "tensor_buffer", "of_record",
           "tensor_buffer_to_list_of_tensors", "tensor_buffer_to_tensor", "tensor_to_tensor_buffer"]
