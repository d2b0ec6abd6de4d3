#!/usr/bin/env python3
"""OneFlow 0.9's two image pipelines, under OneFlow and under ``recordkit.compat.oneflow``, side by side.

    PYTHONPATH=src .venv/bin/python benchmarks/oneflow_images.py write bench-data/oneflow_images
    PYTHONPATH=src .venv/bin/python benchmarks/oneflow_images.py run bench-data/oneflow_images --rounds 5

512 JPEGs of 375x500 (quality 90, a noisy pattern) in 4 OFRecord parts, batches of 64:

* ``decode``: ``OFRecordImageDecoder(RGB)`` + ``image.Resize((224, 224))`` + ``CropMirrorNormalize``
  (crop 192, mean/std, a ``CoinFlip`` mirror);
* ``random_crop``: ``OFRecordImageDecoderRandomCrop(RGB)`` + ``image.Resize((224, 224))`` +
  ``CropMirrorNormalize`` (mean/std, mirror).

``run`` starts one long-lived worker per implementation (OneFlow's through
``/work/shared/tools/oneflow-oracle python``, recordkit's in this interpreter) and asks them for rounds in
turn (OneFlow, recordkit, OneFlow, ...), so both see the same machine load; each round times 512
images in the worker, after a warm-up round. It prints the median images/s per pipeline and the
ratio, the CPU time (all threads) per image -- the figure a loaded machine disturbs least --, the load
average before and after, and the floor: ``cv2.imdecode`` of the same JPEGs on one
thread (libjpeg-turbo alone), in images/s per core. ``--reduced`` also runs recordkit's
``random_crop`` with ``cover=(224, 224)`` (JPEG decoded at 1/2..1/8 scale where the crop still
covers 224x224: it never does for 375x500 images). ``reduced`` measures that option where it applies:
64 JPEGs of 1200x1600 (``--size``), random crop + resize to 224x224, full-scale decode vs ``cover``:

    PYTHONPATH=src .venv/bin/python benchmarks/oneflow_images.py reduced --rounds 5
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import struct
import subprocess
import sys
import time

import numpy as np

N_IMAGES, BATCH = 512, 64
ORACLE = os.environ.get("ONEFLOW_ORACLE", "/work/shared/tools/oneflow-oracle")
MEAN, STD = [123.68, 116.779, 103.939], [58.393, 57.12, 57.375]


def write(out: str, size: str) -> None:
    """The data set: ``N_IMAGES`` JPEGs of ``size`` (HxW) in 4 OFRecord parts (OneFlow's recipe)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compat_oneflow_speed import write_image_parts
    h, w = (int(v) for v in size.split("x"))
    write_image_parts(out, N_IMAGES, h, w, np.random.default_rng(0))


def pipeline(flow, data: str, name: str):
    """A function running one round (``N_IMAGES`` images) of pipeline ``name``; returns the last output."""
    reader = flow.nn.OFRecordReader(data, batch_size=BATCH, data_part_num=4, part_name_suffix_length=5)
    resize = flow.nn.image.Resize(target_size=(224, 224))
    flip = flow.nn.CoinFlip(batch_size=BATCH, random_seed=0)
    if name == "decode":
        decode = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=192, crop_w=192, mean=MEAN, std=STD)
    else:
        extra = {"cover": (224, 224)} if name == "random_crop_reduced" else {}
        decode = flow.nn.OFRecordImageDecoderRandomCrop("encoded", color_space="RGB", random_seed=0, **extra)
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", mean=MEAN, std=STD)

    def one_round():
        for _ in range(N_IMAGES // BATCH):
            x = cmn(resize(decode(reader()))[0], flip()).numpy()
        return x
    return one_round


def worker(impl: str, data: str) -> int:
    """Answer each pipeline name read from stdin with one timed round as a JSON line."""
    if impl == "oneflow":
        saved, sys.stdout = sys.stdout, sys.stderr
        import oneflow as flow
        sys.stdout = saved
    else:
        import recordkit.compat.oneflow as flow
    rounds = {}
    for line in sys.stdin:
        name = line.strip()
        if name not in rounds:
            rounds[name] = pipeline(flow, data, name)
            rounds[name]()  # warm-up
        t0, c0 = time.perf_counter(), time.process_time()
        x = rounds[name]()
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"impl": impl, "pipeline": name, "seconds": dt, "cpu_seconds": cpu,
                          "shape": list(x.shape)}), flush=True)
    return 0


def floor(data: str) -> dict:
    """libjpeg-turbo alone: ``cv2.imdecode`` of every JPEG on one thread, images/s."""
    import cv2

    from recordkit.compat.oneflow import record_pb2 as pb
    blobs = []
    for k in range(4):
        with open(os.path.join(data, f"part-{k:05d}"), "rb") as f:
            raw = f.read()
        at = 0
        while at < len(raw):
            n = struct.unpack_from("q", raw, at)[0]
            rec = pb.OFRecord.FromString(raw[at + 8:at + 8 + n])
            blobs.append(np.frombuffer(rec.feature["encoded"].bytes_list.value[0], np.uint8))
            at += 8 + n
    cv2.setNumThreads(1)
    best, best_cpu = float("inf"), float("inf")
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        for b in blobs:
            cv2.imdecode(b, cv2.IMREAD_COLOR)
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return {"decode_images_per_s_per_core": round(len(blobs) / best),
            "decode_cpu_ms_per_image": round(best_cpu / len(blobs) * 1e3, 2)}


def reduced(size: str, rounds: int) -> int:
    """Random crop + resize to 224x224 of 64 larger JPEGs, full-scale decode vs ``cover=(224, 224)``
    (decoded at 1/2..1/8 scale where the crop still covers 224x224), interleaved, in this process."""
    from PIL import Image

    from recordkit.compat.oneflow import ops
    from recordkit.formats.ofrecord.codec import Feature

    h, w = (int(v) for v in size.split("x"))
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:h, 0:w]
    records = []
    for i in range(BATCH):
        img = np.stack([(x + i) % 256, (y * 2 + i) % 256, ((x + y) // 3 + 7 * i) % 256], axis=2).astype(np.uint8)
        img = np.clip(img.astype(np.int16) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, "JPEG", quality=90)
        records.append({"encoded": Feature("bytes_list", [buf.getvalue()])})
    gens = ops.random_crop_generators(0, BATCH)
    times: dict = {"full": [], "cover": []}
    cpu: dict = {"full": [], "cover": []}
    for _ in range(rounds + 1):
        for name, cover in (("full", None), ("cover", (224, 224))):
            t0, c0 = time.perf_counter(), time.process_time()
            crops = ops.image_decode_random_crop(records, "encoded", "RGB", random_seed=gens, cover=cover)
            ops.resize(crops, (224, 224))
            times[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
    out = {"size": size, "images": BATCH, "rounds": rounds, "load": [round(v, 2) for v in os.getloadavg()]}
    for name in times:
        out[f"{name}/images_per_s"] = round(BATCH / statistics.median(times[name][1:]))
        out[f"{name}/cpu_ms_per_image"] = round(statistics.median(cpu[name][1:]) / BATCH * 1e3, 2)
    out["speedup"] = round(out["cover/images_per_s"] / out["full/images_per_s"], 2)
    print(json.dumps(out))
    return 0


def run(data: str, rounds: int, reduced: bool) -> int:
    here = os.path.abspath(__file__)
    procs = {
        "oneflow": subprocess.Popen([ORACLE, "python", here, "worker", "--impl", "oneflow", data],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True),
        "recordkit": subprocess.Popen([sys.executable, here, "worker", "--impl", "recordkit", data],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True),
    }
    plan = [("decode", "oneflow"), ("decode", "recordkit"), ("random_crop", "oneflow"),
            ("random_crop", "recordkit")] + ([("random_crop_reduced", "recordkit")] if reduced else [])
    load_before = os.getloadavg()
    times: dict = {}
    cpu: dict = {}
    for _ in range(rounds + 1):  # the first answers include each pipeline's construction and warm-up
        for name, impl in plan:
            p = procs[impl]
            p.stdin.write(name + "\n")
            p.stdin.flush()
            r = json.loads(p.stdout.readline())
            times.setdefault((name, impl), []).append(r["seconds"])
            cpu.setdefault((name, impl), []).append(r["cpu_seconds"])
    for p in procs.values():
        p.stdin.close()
        p.wait()
    load_after = os.getloadavg()
    result = {"images": N_IMAGES, "batch": BATCH, "cores": os.cpu_count(), "rounds": rounds,
              "load_before": [round(v, 2) for v in load_before], "load_after": [round(v, 2) for v in load_after]}
    for (name, impl), ts in times.items():
        result[f"{name}/{impl}"] = round(N_IMAGES / statistics.median(ts[1:]))
        result[f"{name}/{impl}/cpu_ms_per_image"] = round(statistics.median(cpu[name, impl][1:]) / N_IMAGES * 1e3, 2)
    for name in ("decode", "random_crop", "random_crop_reduced"):
        if f"{name}/recordkit" in result:
            result[f"{name}/ratio"] = round(result[f"{name}/recordkit"] / result[
                f"{'random_crop' if name == 'random_crop_reduced' else name}/oneflow"], 2)
    result.update(floor(data))
    print(json.dumps(result))
    return 0


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    w = sub.add_parser("write")
    w.add_argument("data")
    w.add_argument("--size", default="375x500", help="HxW of the JPEGs")
    r = sub.add_parser("run")
    r.add_argument("data")
    r.add_argument("--rounds", type=int, default=5)
    r.add_argument("--reduced", action="store_true")
    d = sub.add_parser("reduced")
    d.add_argument("--size", default="1200x1600", help="HxW of the JPEGs")
    d.add_argument("--rounds", type=int, default=5)
    k = sub.add_parser("worker")
    k.add_argument("--impl", choices=("oneflow", "recordkit"), required=True)
    k.add_argument("data")
    a = ap.parse_args(argv)
    if a.action == "write":
        write(a.data, a.size)
        return 0
    if a.action == "worker":
        return worker(a.impl, a.data)
    if a.action == "reduced":
        return reduced(a.size, a.rounds)
    return run(a.data, a.rounds, a.reduced)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
