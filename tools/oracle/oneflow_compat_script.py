#!/usr/bin/env python3
"""One OneFlow 0.9 data script, run under OneFlow itself and under ``recordkit.compat.oneflow``.

    # the golden (once, or after changing the cases): writes the data sets and what OneFlow read
    /work/shared/tools/oneflow-oracle python tools/oracle/oneflow_compat_script.py --impl oneflow \
        write tests/data/oneflow_compat
    /work/shared/tools/oneflow-oracle python tools/oracle/oneflow_compat_script.py --impl oneflow \
        read tests/data/oneflow_compat tests/data/oneflow_compat/golden.npz
    # the same script on recordkit (tests/test_compat_oneflow_golden.py does this without OneFlow)
    PYTHONPATH=src python tools/oracle/oneflow_compat_script.py --impl recordkit read tests/data/oneflow_compat out.npz

``write`` uses only OneFlow's writing recipe (``record_pb2.OFRecord(feature={...}).SerializeToString()``
and ``struct.pack("q", len)``) to write two data sets: ``mixed`` (23 records in 3 parts named
``part-00000``..: float/double/int32/int64 lists, variable lengths, raw bytes, a JPEG and a PNG image
made with Pillow) and ``many_parts`` (29 small records in 7 parts ``part-0``..``part-6``).

``read`` is a OneFlow data script using every data module; its outputs (arrays, shapes, dtypes as
strings) go to one ``.npz``. Key prefixes say how the test compares a value:

* none: exactly (bit for bit, dtype and shape included);
* ``jpeg/``: JPEG decoding: exactly too, but in its own group because both sides delegate it to a
  libjpeg build (OneFlow's libjpeg-turbo, Pillow's), so a different Pillow build could move it;
* ``random/``: draws of OneFlow's random streams (coin flips, random crops), which
  recordkit does not reproduce: compared by their properties (see the test).

The imports are the only difference between the two runs (``--impl``).
"""
from __future__ import annotations

import argparse
import io
import os
import struct
import sys

import numpy as np

N_MIXED, N_MANY = 23, 29


def import_flow(impl: str):
    if impl == "oneflow":
        import oneflow as flow
        from oneflow.core.record import record_pb2
    else:
        import recordkit.compat.oneflow as flow
        from recordkit.compat.oneflow import record_pb2
    return flow, record_pb2


# ------------------------------------------------------------------------------------------------ data


def _image(i: int) -> np.ndarray:
    """A small RGB image with smooth gradients and some texture (deterministic)."""
    h, w = 12 + (i % 5) * 3, 16 + (i * 7) % 11
    y, x = np.mgrid[0:h, 0:w]
    r = (x * 255 // max(w - 1, 1)) & 0xFF
    g = (y * 255 // max(h - 1, 1)) & 0xFF
    b = ((x + y + 13 * i) * 9) & 0xFF
    return np.stack([r, g, b], axis=2).astype(np.uint8)


def _encode(arr: np.ndarray, fmt: str) -> bytes:
    from PIL import Image
    out = io.BytesIO()
    Image.fromarray(arr).save(out, fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return out.getvalue()


def write(record_pb2, out_dir: str) -> None:
    def feat(kind, values):
        lists = {"float": record_pb2.FloatList, "double": record_pb2.DoubleList, "int32": record_pb2.Int32List,
                 "int64": record_pb2.Int64List, "bytes": record_pb2.BytesList}
        return record_pb2.Feature(**{kind + "_list": lists[kind](value=values)})

    def write_parts(directory, names, records):
        os.makedirs(directory, exist_ok=True)
        per = np.array_split(np.arange(len(records)), len(names))
        for name, idx in zip(names, per):
            with open(os.path.join(directory, name), "wb") as f:
                for i in idx:
                    data = records[i].SerializeToString()
                    f.write(struct.pack("q", len(data)))
                    f.write(data)

    rng = np.random.default_rng(2026)
    mixed = []
    for i in range(N_MIXED):
        img = _image(i)
        mixed.append(record_pb2.OFRecord(feature={
            "label": feat("int64", [i]),
            "x": feat("float", rng.normal(size=4).astype(np.float32).tolist()),
            "weights": feat("double", (rng.normal(size=3) * 1e3).tolist()),
            "ids": feat("int32", list(range(i % 6))),                       # 0..5 values: truncate
            "raw": feat("bytes", [bytes((i * 37 + k) % 256 for k in range(6))]),
            "jpeg": feat("bytes", [_encode(img, "JPEG")]),
            "png": feat("bytes", [_encode(img, "PNG")]),
            "height": feat("int32", [img.shape[0]]),
            "width": feat("int32", [img.shape[1]]),
        }))
    write_parts(os.path.join(out_dir, "mixed"), [f"part-{k:05d}" for k in range(3)], mixed)
    many = [record_pb2.OFRecord(feature={"label": feat("int64", [i]), "v": feat("float", [i / 2, -i])})
            for i in range(N_MANY)]
    write_parts(os.path.join(out_dir, "many_parts"), [f"part-{k}" for k in range(7)], many)


# ------------------------------------------------------------------------------------------------ read


def read(flow, data_dir: str) -> dict:
    out = {}
    mixed = os.path.join(data_dir, "mixed")
    many = os.path.join(data_dir, "many_parts")

    def put(key, value):
        out[key] = np.asarray(value)

    def put_buffer(key, buf):
        items = buf.numpy()
        put(key + "/n", len(items))
        for i, a in enumerate(items):
            put(f"{key}/{i}", a)

    def describe(key, t):
        put("meta/" + key, f"{t.dtype} {t.shape!r}")

    # 0. the inputs (the test refuses a golden whose data set changed)
    import hashlib
    for sub in ("mixed", "many_parts"):
        for name in sorted(os.listdir(os.path.join(data_dir, sub))):
            with open(os.path.join(data_dir, sub, name), "rb") as f:
                put(f"files/{sub}/{name}", hashlib.sha256(f.read()).hexdigest())

    # 1. file order, batches of 5 over 23 records: ceil(23/5) + 2 batches run into the third epoch
    B, M = 5, 7
    reader = flow.nn.OFRecordReader(mixed, batch_size=B, data_part_num=3, part_name_suffix_length=5)
    raw = {
        "label_i32": flow.nn.OFRecordRawDecoder("label", (), flow.int32),
        "label_i64": flow.nn.OFRecordRawDecoder("label", (1,), flow.int64),
        "x_f32": flow.nn.OFRecordRawDecoder("x", (4,), flow.float32),
        "x_f64_2x2": flow.nn.OFRecordRawDecoder("x", (2, 2), flow.float64),
        "x_i8": flow.nn.OFRecordRawDecoder("x", (4,), flow.int8),
        "weights_f32": flow.nn.OFRecordRawDecoder("weights", (3,), flow.float),
        "weights_i64": flow.nn.OFRecordRawDecoder("weights", (3,), flow.int64),
        "weights_double": flow.nn.OFRecordRawDecoder("weights", (3,), flow.double),
        "ids_trunc3": flow.nn.OFRecordRawDecoder("ids", (3,), flow.int32, truncate=True),
        "ids_trunc8_f32": flow.nn.OFRecordRawDecoder("ids", (8,), flow.float32, truncate=True),
        "ids_varlen_trunc": flow.nn.OFRecordRawDecoder("ids", (5,), flow.int64, dim1_varying_length=True,
                                                       truncate=True),
        "raw_u8": flow.nn.OFRecordRawDecoder("raw", (6,), flow.uint8),
        "raw_i8": flow.nn.OFRecordRawDecoder("raw", (6,), flow.int8),
        "raw_i32": flow.nn.OFRecordRawDecoder("raw", (2, 3), flow.int32),
        "raw_f32": flow.nn.OFRecordRawDecoder("raw", (6,), flow.float32),
    }
    acc = {k: [] for k in raw}
    bytes_dec = flow.nn.OFRecordBytesDecoder("raw")
    jpeg_dec = flow.nn.OFRecordImageDecoder("jpeg", "RGB")
    for b in range(M):
        records = reader()
        if b == 0:
            describe("records", records)
        for k, mod in raw.items():
            t = mod(records)
            if b == 0:
                describe("raw/" + k, t)
            acc[k].append(t.numpy())
        buf = bytes_dec(records)
        if b == 0:
            describe("bytes", buf)
        put_buffer(f"bytes/b{b}", buf)
        if b < 2:
            put_buffer(f"jpeg/image_decoder_rgb/b{b}", jpeg_dec(records))
    for k, parts in acc.items():
        put("raw/" + k, np.concatenate(parts))

    # 2. image ops on losslessly decoded (PNG) images: exact in both
    reader = flow.nn.OFRecordReader(mixed, batch_size=6, data_part_num=3, part_name_suffix_length=5)
    png = flow.nn.OFRecordBytesDecoder("png")
    jpeg = flow.nn.OFRecordBytesDecoder("jpeg")
    for b in range(2):
        records = reader()
        encoded = png(records)
        rgb = flow.nn.image.decode(dtype=flow.uint8, color_space="RGB")(encoded)
        bgr = flow.nn.image.decode(color_space="BGR")(encoded)
        rgbf = flow.nn.image.decode(dtype=flow.float32, color_space="RGB")(encoded)
        if b == 0:
            describe("decode_rgb", rgb)
            describe("decode_f32", rgbf)
        put_buffer(f"img/decode_rgb/b{b}", rgb)
        put_buffer(f"img/decode_bgr/b{b}", bgr)
        put_buffer(f"img/decode_f32/b{b}", rgbf)
        gray = flow.nn.image.decode(dtype=flow.uint8, color_space="GRAY")(encoded)
        put_buffer(f"img/decode_gray/b{b}", gray)
        put_buffer(f"jpeg/decode_rgb/b{b}", flow.nn.image.decode(color_space="RGB")(jpeg(records)))
        put_buffer(f"jpeg/decode_bgr_f32/b{b}", flow.nn.image.decode(dtype=flow.float32)(jpeg(records)))
        put_buffer(f"jpeg/decode_gray/b{b}", flow.nn.image.decode(dtype=flow.uint8, color_space="GRAY")(jpeg(records)))
        codes = flow.tensor([0, 1, 2, 3, 1, 2], dtype=flow.int8)
        put_buffer(f"img/flip/b{b}", flow.nn.image.flip()(rgb, codes))
        put_buffer(f"img/normalize/b{b}",
                   flow.nn.image.normalize(std=[2.0, 0.5, 3.0], mean=[10.0, 127.5, 0.25])(rgbf))
        h = max(a.shape[0] for a in rgb.numpy())
        w = max(a.shape[1] for a in rgb.numpy())
        align = lambda v, a: -(-v // a) * a  # noqa: E731
        aligned = flow.nn.image.batch_align(shape=(align(h, 8), align(w, 8), 3), dtype=flow.uint8, alignment=8)(rgb)
        if b == 0:
            describe("batch_align", aligned)
        put(f"img/batch_align8/b{b}", aligned.numpy())
        put(f"img/batch_align1_f32/b{b}",
            flow.nn.image.batch_align(shape=(h, w, 3), dtype=flow.float32, alignment=1)(rgb).numpy())
        put(f"img/batch_align_bigger/b{b}",
            flow.nn.image.batch_align(shape=(h + 5, w + 3, 3), dtype=flow.uint8, alignment=1)(rgb).numpy())
        mirror = flow.tensor([1, 0, 1, 1, 0, 0], dtype=flow.int8)
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=10, crop_w=12, crop_pos_y=0.25, crop_pos_x=0.7,
                                          mean=[123.68, 116.78, 103.94], std=[58.393, 57.12, 57.375])
        t = cmn(rgb, mirror)
        if b == 0:
            describe("cmn_buffer", t)
        put(f"img/cmn_buffer_mirror/b{b}", t.numpy())
        put(f"img/cmn_buffer/b{b}", cmn(rgb).numpy())
        cmn_dense = flow.nn.CropMirrorNormalize(color_space="RGB", mean=[1.0, 2.0, 3.0], std=[4.0])
        put(f"img/cmn_dense_mirror/b{b}", cmn_dense(aligned, mirror).numpy())
        cmn_crop = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=8, crop_w=8, mean=[0.5], std=[255.0])
        put(f"img/cmn_dense_crop/b{b}", cmn_crop(aligned).numpy())
        # resize: OpenCV's arithmetic (bilinear, area, bicubic, nearest; uint8 and float32 images)
        fixed, scale, new_size = flow.nn.image.Resize(target_size=(20, 14))(rgb)
        if b == 0:
            describe("resize_fixed", fixed)
            describe("resize_scale", scale)
            put("meta/resize_fixed_new_size_is_none", new_size is None)
        put(f"img/resize_fixed/b{b}", fixed.numpy())
        put(f"img/resize_fixed_scale/b{b}", scale.numpy())
        fixed_f, scale_f, _ = flow.nn.image.Resize(target_size=(9, 7), dtype=flow.float32,
                                                   interpolation_type="bilinear")(rgb)
        put(f"img/resize_fixed_f32/b{b}", fixed_f.numpy())
        for interp in ("nearest_neighbor", "bicubic", "area", "bilinear"):
            for size in ((20, 14), (7, 9), (31, 5)):
                r, sc, _ = flow.nn.image.Resize(target_size=size, interpolation_type=interp)(rgb)
                put(f"img/resize_{interp}_{size[0]}x{size[1]}/b{b}", r.numpy())
        # float32 images (decoded as float): OpenCV's float kernels, then float32 or uint8 output
        for interp in ("bilinear", "area", "bicubic", "nearest_neighbor"):
            r, _, _ = flow.nn.image.Resize(target_size=(15, 11), dtype=flow.float32, interpolation_type=interp)(rgbf)
            put(f"img/resize_f32in_{interp}/b{b}", r.numpy())
        r, _, _ = flow.nn.image.Resize(target_size=(15, 11), dtype=flow.uint8)(rgbf)
        put(f"img/resize_f32in_to_u8/b{b}", r.numpy())
        kept, scale_k, size_k = flow.nn.image.Resize(target_size=7, keep_aspect_ratio=True,
                                                     interpolation_type="bicubic")(rgbf)
        put_buffer(f"img/resize_keep_f32/b{b}", kept)
        for kw in (dict(max_size=20), dict(resize_side="longer", min_size=12)):
            kept, scale_k, size_k = flow.nn.image.Resize(target_size=16, keep_aspect_ratio=True, **kw)(rgb)
            name = "_".join(f"{k}{v}" for k, v in kw.items())
            put(f"img/resize_keep_{name}_size/b{b}", size_k.numpy())
            put(f"img/resize_keep_{name}_scale/b{b}", scale_k.numpy())
            put_buffer(f"img/resize_keep_{name}/b{b}", kept)
        gray_dense, _, _ = flow.nn.image.Resize(target_size=(12, 10), channels=1)(gray)
        put(f"img/resize_gray/b{b}", gray_dense.numpy())
        put(f"img/cmn_gray/b{b}", flow.nn.CropMirrorNormalize(color_space="GRAY", crop_h=8, crop_w=8, mean=[100.0],
                                                               std=[50.0])(gray_dense, mirror).numpy())
        os.environ["ONEFLOW_ENABLE_NHWC"] = "1"
        cmn_nhwc = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=9, crop_w=7, crop_pos_y=1.0, crop_pos_x=0.0,
                                               mean=[1.0, 2.0, 3.0], std=[3.0, 2.0, 1.0])
        del os.environ["ONEFLOW_ENABLE_NHWC"]
        put(f"img/cmn_nhwc/b{b}", cmn_nhwc(rgb, mirror).numpy())
        put(f"img/resize_fixed_f32_scale/b{b}", scale_f.numpy())
        for side, target in (("shorter", 9), ("longer", 40)):
            kept, scale_k, size_k = flow.nn.image.Resize(target_size=target, keep_aspect_ratio=True,
                                                         resize_side=side)(rgb)
            if b == 0:
                describe(f"resize_keep_{side}", kept)
                describe(f"resize_keep_{side}_size", size_k)
            put(f"img/resize_keep_{side}_size/b{b}", size_k.numpy())
            put(f"img/resize_keep_{side}_scale/b{b}", scale_k.numpy())
            put_buffer(f"img/resize_keep_{side}/b{b}", kept)
        # the usual training pipeline: decode, resize to fixed, crop-mirror-normalize
        dense, _, _ = flow.nn.image.Resize(target_size=(16, 16))(rgb)
        put(f"img/pipeline_cmn/b{b}", flow.nn.CropMirrorNormalize(
            color_space="RGB", crop_h=12, crop_w=12, mean=[123.68, 116.78, 103.94],
            std=[58.393, 57.12, 57.375])(dense, mirror).numpy())

    # 3. shuffled: OneFlow's shuffle buffer with a seed, across several epochs
    for name, kwargs in (("shuffle_b7_s7", dict(shuffle_buffer_size=7, random_seed=7)),
                         ("shuffle_b30_s123", dict(shuffle_buffer_size=30, random_seed=123)),
                         ("shuffle_b1_s5", dict(shuffle_buffer_size=1, random_seed=5))):
        reader = flow.nn.OFRecordReader(mixed, batch_size=4, data_part_num=3, part_name_suffix_length=5,
                                        random_shuffle=True, **kwargs)
        label = flow.nn.OFRecordRawDecoder("label", (), flow.int64)
        put(f"order/{name}", np.concatenate([label(reader()).numpy() for _ in range(20)]))
    # shuffle_after_epoch: the part list reshuffled before every epoch after the first (7 parts)
    for name, kwargs in (("after_epoch", dict(shuffle_after_epoch=True)),
                         ("after_epoch_and_buffer", dict(shuffle_after_epoch=True, random_shuffle=True,
                                                         shuffle_buffer_size=5, random_seed=42))):
        reader = flow.nn.OFRecordReader(many, batch_size=3, data_part_num=7, **kwargs)
        label = flow.nn.OFRecordRawDecoder("label", (1,), flow.int64)
        put(f"order/{name}", np.concatenate([label(reader()).numpy().ravel() for _ in range(60)]))
    # fewer parts than present: data_part_num=4 reads part-0..part-3 only
    reader = flow.nn.OFRecordReader(many, batch_size=4, data_part_num=4)
    dec = flow.nn.OFRecordRawDecoder("v", (2,), flow.float32)
    put("order/data_part_num4_v", np.concatenate([dec(reader()).numpy() for _ in range(8)]))

    # 4. random ops: OneFlow's draws, compared by their properties
    coin = flow.nn.CoinFlip(batch_size=16, random_seed=3, probability=0.5)
    put("random/coin_p50", np.stack([coin().numpy() for _ in range(64)]))
    coin = flow.nn.CoinFlip(batch_size=8, random_seed=11, probability=0.2)
    t = coin()
    describe("coin", t)
    put("random/coin_p20", np.stack([t.numpy()] + [coin().numpy() for _ in range(127)]))
    reader = flow.nn.OFRecordReader(mixed, batch_size=6, data_part_num=3, part_name_suffix_length=5)
    crop = flow.nn.OFRecordImageDecoderRandomCrop("jpeg", color_space="RGB", random_seed=9)
    for b in range(4):
        records = reader()
        put_buffer(f"random/crop/b{b}", crop(records))
        put_buffer(f"random/crop_full/b{b}", jpeg_dec(records))
    return out


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=("oneflow", "recordkit"), required=True)
    ap.add_argument("action", choices=("write", "read"))
    ap.add_argument("data_dir")
    ap.add_argument("out", nargs="?")
    args = ap.parse_args(argv)
    flow, record_pb2 = import_flow(args.impl)
    if args.action == "write":
        write(record_pb2, args.data_dir)
        return 0
    result = read(flow, args.data_dir)
    result["meta/impl"] = np.asarray(args.impl)
    result["meta/version"] = np.asarray(str(getattr(flow, "__version__", "?")))
    np.savez_compressed(args.out, **result)
    print(f"{args.impl}: {len(result)} arrays -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
