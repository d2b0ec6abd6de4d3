#!/usr/bin/env python3
"""One OneFlow data script, timed under OneFlow 0.9.0 and under ``recordkit.compat.oneflow``.

    python benchmarks/compat_oneflow_speed.py write bench-data/compat_oneflow      # the data sets, once
    /work/shared/tools/oneflow-oracle python benchmarks/compat_oneflow_speed.py --impl oneflow read bench-data/compat_oneflow
    PYTHONPATH=src .venv/bin/python benchmarks/compat_oneflow_speed.py --impl recordkit read bench-data/compat_oneflow

Two pipelines, each timed from constructing the modules to the last ``.numpy()`` (best of --repeat):

* ``numeric``: 60,000 records (784 float32 ``images`` + int64 ``labels``, 4 parts), batches of 256:
  ``OFRecordReader`` + two ``OFRecordRawDecoder``s, ceil(60000 / 256) batches;
* ``images``: 2,048 JPEGs of 375x500 (quality 90, 4 parts), batches of 64: ``OFRecordReader`` +
  ``OFRecordImageDecoder(RGB)`` + ``image.Resize((224, 224))`` + ``CropMirrorNormalize`` (crop 192,
  mean/std, a ``CoinFlip`` mirror) + a raw label decoder, 32 batches.

Prints one JSON object per pipeline.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import struct
import sys
import time

import numpy as np

N_NUMERIC, N_IMAGES = 60000, 2048


def write(out: str) -> None:
    from recordkit.compat.oneflow import record_pb2 as pb

    rng = np.random.default_rng(0)
    d = os.path.join(out, "numeric")
    os.makedirs(d, exist_ok=True)
    files = [open(os.path.join(d, f"part-{k:05d}"), "wb") for k in range(4)]
    for i in range(N_NUMERIC):
        rec = pb.OFRecord(feature={"images": pb.Feature(float_list=pb.FloatList(value=rng.random(784, np.float32))),
                                   "labels": pb.Feature(int64_list=pb.Int64List(value=[i % 10]))})
        data = rec.SerializeToString()
        files[i % 4].write(struct.pack("q", len(data)) + data)
    for f in files:
        f.close()
    write_image_parts(os.path.join(out, "images"), N_IMAGES, 375, 500, rng)


def write_image_parts(d: str, n: int, h: int, w: int, rng) -> None:
    """``n`` JPEGs of ``h`` x ``w`` (gradients plus noise, quality 90) with an int32 label, in 4
    OFRecord parts written with OneFlow's recipe (``record_pb2`` + an 8-byte length)."""
    from PIL import Image

    from recordkit.compat.oneflow import record_pb2 as pb
    os.makedirs(d, exist_ok=True)
    files = [open(os.path.join(d, f"part-{k:05d}"), "wb") for k in range(4)]
    y, x = np.mgrid[0:h, 0:w]
    for i in range(n):
        img = np.stack([(x + i) % 256, (y * 2 + i) % 256, ((x + y) // 3 + 7 * i) % 256], axis=2).astype(np.uint8)
        img = np.clip(img.astype(np.int16) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=90)
        rec = pb.OFRecord(feature={"encoded": pb.Feature(bytes_list=pb.BytesList(value=[buf.getvalue()])),
                                   "class/label": pb.Feature(int32_list=pb.Int32List(value=[i % 1000]))})
        data = rec.SerializeToString()
        files[i % 4].write(struct.pack("q", len(data)) + data)
    for f in files:
        f.close()


def read(flow, data: str, repeat: int) -> list:
    results = []
    nb = math.ceil(N_NUMERIC / 256)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        reader = flow.nn.OFRecordReader(os.path.join(data, "numeric"), batch_size=256, data_part_num=4,
                                        part_name_suffix_length=5)
        img = flow.nn.OFRecordRawDecoder("images", (784,), flow.float32)
        lab = flow.nn.OFRecordRawDecoder("labels", (), flow.int64)
        for _ in range(nb):
            rec = reader()
            img(rec).numpy()
            lab(rec).numpy()
        times.append(time.perf_counter() - t0)
    results.append({"pipeline": "numeric", "seconds": min(times), "per_repeat": times,
                    "records_per_s": round(nb * 256 / min(times))})
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        reader = flow.nn.OFRecordReader(os.path.join(data, "images"), batch_size=64, data_part_num=4,
                                        part_name_suffix_length=5)
        decode = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")
        resize = flow.nn.image.Resize(target_size=(224, 224))
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=192, crop_w=192,
                                          mean=[123.68, 116.779, 103.939], std=[58.393, 57.12, 57.375])
        flip = flow.nn.CoinFlip(batch_size=64, random_seed=0)
        label = flow.nn.OFRecordRawDecoder("class/label", (), flow.int32)
        for _ in range(N_IMAGES // 64):
            rec = reader()
            x = cmn(resize(decode(rec))[0], flip()).numpy()
            label(rec).numpy()
        times.append(time.perf_counter() - t0)
    results.append({"pipeline": "images", "seconds": min(times), "per_repeat": times,
                    "images_per_s": round(N_IMAGES / min(times)), "out_shape": list(x.shape)})
    return results


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--impl", choices=("oneflow", "recordkit"), default="recordkit")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("action", choices=("write", "read"))
    ap.add_argument("data")
    a = ap.parse_args(argv)
    if a.action == "write":
        write(a.data)
        return 0
    if a.impl == "oneflow":
        saved, sys.stdout = sys.stdout, sys.stderr
        import oneflow as flow
        sys.stdout = saved
    else:
        import recordkit.compat.oneflow as flow
    for r in read(flow, a.data, a.repeat):
        print(json.dumps(dict(r, impl=a.impl, threads=os.cpu_count())))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
