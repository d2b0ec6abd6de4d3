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

``breakdown`` says where recordkit's CPU time per image goes, in this process: each stage of both
pipelines through recordkit's own functions on one thread (``recordkit.images.pool.THREADS = 1``),
next to the bare OpenCV/NumPy call it wraps (the difference is Python and checks), then the whole
pipeline through ``flow.nn`` on one thread and on every core (the difference is thread hand-offs
and preparing ahead), and last each module of both pipelines alone (reader, decoder, ``Resize``,
``CropMirrorNormalize``) under OneFlow and under recordkit, each in a worker process with every
core. CPU ms per image, best of ``--rounds``:

    PYTHONPATH=src .venv/bin/python benchmarks/oneflow_images.py breakdown bench-data/oneflow_images
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


def stages(flow, data: str, name: str, rounds: int, impl: str) -> dict:
    """CPU ms per image of each module of pipeline ``name`` alone (reader, decoder, Resize,
    CropMirrorNormalize + ``.numpy()``), best of ``rounds``, on batches read beforehand; recordkit's
    decoder without preparing ahead (the batches are not the reader's next)."""
    extra = {"prefetch": False} if impl == "recordkit" else {}
    reader = flow.nn.OFRecordReader(data, batch_size=BATCH, data_part_num=4, part_name_suffix_length=5)
    resize = flow.nn.image.Resize(target_size=(224, 224))
    flip = flow.nn.CoinFlip(batch_size=BATCH, random_seed=0)
    if name == "decode":
        decode = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB", **extra)
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=192, crop_w=192, mean=MEAN, std=STD)
    else:
        decode = flow.nn.OFRecordImageDecoderRandomCrop("encoded", color_space="RGB", random_seed=0, **extra)
        cmn = flow.nn.CropMirrorNormalize(color_space="RGB", mean=MEAN, std=STD)
    # OneFlow's eager ops are asynchronous (its VM runs them): wait for each stage to finish
    sync = flow._oneflow_internal.eager.Sync if impl == "oneflow" else (lambda: None)

    def done(fn):
        def run():
            fn()
            sync()
        return run
    batches = [reader() for _ in range(N_IMAGES // BATCH)]
    decoded = [decode(b) for b in batches]
    resized = [resize(d)[0] for d in decoded]
    flips = [flip() for _ in batches]
    sync()
    return {"read": _cpu_ms(done(lambda: _drain(reader() for _ in batches)), rounds),
            "decode": _cpu_ms(done(lambda: _drain(decode(b) for b in batches)), rounds),
            "resize": _cpu_ms(done(lambda: _drain(resize(d)[0] for d in decoded)), rounds),
            "cmn": _cpu_ms(done(lambda: _drain(cmn(r, f).numpy() for r, f in zip(resized, flips))), rounds)}


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
        if name.startswith("stages:"):
            _, what, n = name.split(":")
            print(json.dumps(stages(flow, data, what, int(n), impl)), flush=True)
            continue
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


def _drain(results) -> None:
    """Run a generator to its end keeping nothing: a stage's outputs are freed as they come, as in a
    pipeline (keeping 512 decoded images would time fresh memory's page faults instead)."""
    for _ in results:
        pass


def _cpu_ms(fn, rounds: int) -> float:
    """Best CPU ms per image (all threads) of ``fn()``, which handles ``N_IMAGES`` images."""
    best = float("inf")
    for _ in range(rounds):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return round(best / N_IMAGES * 1e3, 3)


def breakdown(data: str, rounds: int) -> int:
    """CPU ms per image of each stage of both pipelines (see the module docstring)."""
    import cv2

    import recordkit.compat.oneflow as flow
    from recordkit.compat.oneflow import ops
    from recordkit.compat.oneflow.ops import image as img
    from recordkit.images import pool

    out: dict = {"images": N_IMAGES, "cores": os.cpu_count(), "rounds": rounds,
                 "load_before": [round(v, 2) for v in os.getloadavg()], "cv2_threads": cv2.getNumThreads()}
    reader = flow.nn.OFRecordReader(data, batch_size=BATCH, data_part_num=4, part_name_suffix_length=5)
    batches = [reader() for _ in range(N_IMAGES // BATCH)]
    out["read"] = _cpu_ms(lambda: _drain(reader() for _ in range(N_IMAGES // BATCH)), rounds)
    out["parse"] = _cpu_ms(lambda: _drain(flow._tensor.OFRecordBatch(b.frames()).records() for b in batches), rounds)
    records = [r for b in batches for r in b.records()]
    blobs = [r["encoded"].value[0] for r in records]
    arrays = [np.frombuffer(b, np.uint8) for b in blobs]
    flag = getattr(cv2, "IMREAD_COLOR_RGB", cv2.IMREAD_COLOR) | cv2.IMREAD_IGNORE_ORIENTATION
    cv2_threads = cv2.getNumThreads()
    saved, pool.THREADS = pool.THREADS, 1
    try:
        cv2.setNumThreads(1)
        out["imdecode_bare"] = _cpu_ms(lambda: _drain(cv2.imdecode(a, flag) for a in arrays), rounds)
        out["imdecode_bgr_bare"] = _cpu_ms(lambda: _drain(cv2.imdecode(a, cv2.IMREAD_COLOR) for a in arrays), rounds)
        out["decode_image"] = _cpu_ms(lambda: _drain(img.decode_image(b, "RGB") for b in blobs), rounds)
        out["image_decode_op"] = _cpu_ms(lambda: _drain(ops.image_decode(records[k:k + BATCH], "encoded", "RGB")
                                                  for k in range(0, N_IMAGES, BATCH)), rounds)
        full = [img.decode_image(b, "RGB") for b in blobs]
        cv2.ipp.setUseIPP(False)
        out["resize_bare"] = _cpu_ms(lambda: _drain(cv2.resize(a, (224, 224), interpolation=cv2.INTER_AREA)
                                              for a in full), rounds)
        cv2.ipp.setUseIPP(True)
        out["resize_op"] = _cpu_ms(lambda: _drain(ops.resize(full[k:k + BATCH], (224, 224))
                                            for k in range(0, N_IMAGES, BATCH)), rounds)
        dense = [ops.resize(full[k:k + BATCH], (224, 224))[0] for k in range(0, N_IMAGES, BATCH)]
        flips = [ops.coin_flip(BATCH, k) for k in range(len(dense))]
        mean, inv = np.float32(MEAN), np.float32(1) / np.float32(STD)
        out["normalize_bare"] = _cpu_ms(lambda: _drain(((d[:, 16:208, 16:208].astype(np.float32) - mean) * inv)
                                                 for d in dense), rounds)
        out["cmn_op_crop192"] = _cpu_ms(lambda: _drain(ops.crop_mirror_normalize(
            d, color_space="RGB", crop_h=192, crop_w=192, mean=MEAN, std=STD, mirror=f)
            for d, f in zip(dense, flips)), rounds)
        out["cmn_op_224"] = _cpu_ms(lambda: _drain(ops.crop_mirror_normalize(
            d, color_space="RGB", mean=MEAN, std=STD, mirror=f) for d, f in zip(dense, flips)), rounds)
        gens = ops.random_crop_generators(0, N_IMAGES)
        heads = [img.header_size(b) for b in blobs]
        out["crop_windows"] = _cpu_ms(lambda: _drain(img.random_crop_window(h, w, g)
                                                     for (_, w, h), g in zip(heads, gens)),
                                      rounds)
        out["decode_random_crop_op"] = _cpu_ms(lambda: _drain(ops.image_decode_random_crop(
            records[k:k + BATCH], "encoded", "RGB", random_seed=gens[k:k + BATCH])
            for k in range(0, N_IMAGES, BATCH)), rounds)
        crops = [c for k in range(0, N_IMAGES, BATCH) for c in ops.image_decode_random_crop(
            records[k:k + BATCH], "encoded", "RGB", random_seed=gens[k:k + BATCH])]
        out["crop_px_per_image"] = round(sum(c.shape[0] * c.shape[1] for c in crops) / N_IMAGES)
        out["resize_crops_op"] = _cpu_ms(lambda: _drain(ops.resize(crops[k:k + BATCH], (224, 224))
                                                  for k in range(0, N_IMAGES, BATCH)), rounds)
        for name in ("decode", "random_crop"):
            one_round = pipeline(flow, data, name)
            one_round()
            out[f"{name}_pipeline_1thread"] = _cpu_ms(one_round, rounds)
    finally:
        pool.THREADS = saved
        cv2.setNumThreads(cv2_threads)
    for name in ("decode", "random_crop"):
        one_round = pipeline(flow, data, name)
        one_round()
        out[f"{name}_pipeline_threads"] = _cpu_ms(one_round, rounds)
    here = os.path.abspath(__file__)
    for impl, cmd in (("oneflow", [ORACLE, "python", here, "worker", "--impl", "oneflow", data]),
                      ("recordkit", [sys.executable, here, "worker", "--impl", "recordkit", data])):
        if impl == "oneflow" and not os.path.exists(ORACLE):
            continue
        ask = "".join(f"stages:{name}:{rounds}\n" for name in ("decode", "random_crop"))
        answer = subprocess.run(cmd, input=ask, stdout=subprocess.PIPE, text=True, check=True).stdout.split("\n")
        for name, line in zip(("decode", "random_crop"), answer):
            for stage, ms in json.loads(line).items():
                out[f"{name}/{impl}/{stage}"] = ms
    out["load_after"] = [round(v, 2) for v in os.getloadavg()]
    for k, v in out.items():
        print(f"{k:32s} {v}")
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
    b = sub.add_parser("breakdown")
    b.add_argument("data")
    b.add_argument("--rounds", type=int, default=3)
    k = sub.add_parser("worker")
    k.add_argument("--impl", choices=("oneflow", "recordkit"), required=True)
    k.add_argument("data")
    a = ap.parse_args(argv)
    if a.action == "write":
        write(a.data, a.size)
        return 0
    if a.action == "worker":
        return worker(a.impl, a.data)
    if a.action == "breakdown":
        return breakdown(a.data, a.rounds)
    if a.action == "reduced":
        return reduced(a.size, a.rounds)
    return run(a.data, a.rounds, a.reduced)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
