#!/usr/bin/env python3
"""``recordkit.images.ImageStage`` vs a torch ``DataLoader`` doing the same augmentation with PIL.

    PYTHONPATH=src .venv/bin/python benchmarks/image_stage.py write bench-data/image_stage.tar
    PYTHONPATH=src .venv/bin/python benchmarks/image_stage.py run bench-data/image_stage.tar --rounds 5

512 JPEGs of 375x500 (the recipe of ``oneflow_images.py``) in one WebDataset shard; batches of 64 of
224x224 float32 NCHW, random-resized-crop (area 0.08..1, aspect 3/4..4/3), flip p=0.5, normalized:

* ``stage``: ``ImageStage(224, ...).batches(encoded_images(shard), 64)`` in this process (the batch
  on every core, the next one prepared ahead);
* ``source-wds`` / ``source-mds``: the same stage inside the engine, ``MinibatchSource(recordkit.open(
  PATH), images={"jpg": stage})`` in minibatches of 64, over the shard and over its MDS conversion
  (``recordkit convert --to mds``: a ``jpeg`` column of the same bytes), randomized;
* ``torch``: ``DataLoader(num_workers=2, batch_size=64, persistent_workers=True)`` over a map-style
  dataset of the JPEG bytes whose items do PIL decode + RandomResizedCrop(224) + horizontal flip +
  ToTensor + Normalize -- torchvision's transforms written out with PIL and torch ops (torchvision
  does not install beside this torch), as a torchvision user's loader would run them.

Rounds alternate (stage, source-wds, source-mds, torch, ...), one epoch of 512 images each after a
warm-up epoch; medians, the ratios to torch and the load average are printed, with the floor:
``cv2.imdecode`` of the same JPEGs alone on one thread (images/s per core), beside each contender's
images/s per core (its process CPU time, all threads; torch's workers counted).
"""
from __future__ import annotations

import argparse
import io
import json
import math
import os
import random
import statistics
import sys
import tarfile
import time

import numpy as np

N_IMAGES, BATCH, SIZE = 512, 64, 224
MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def write(path: str) -> None:
    from PIL import Image
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:375, 0:500]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with tarfile.open(path, "w") as tf:
        for i in range(N_IMAGES):
            img = np.stack([(x + i) % 256, (y * 2 + i) % 256, ((x + y) // 3 + 7 * i) % 256], axis=2).astype(np.uint8)
            img = np.clip(img.astype(np.int16) + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(img).save(buf, "JPEG", quality=90)
            for name, data in ((f"{i:06d}.jpg", buf.getvalue()), (f"{i:06d}.cls", b"%d" % (i % 1000))):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


class PilDataset:
    """torchvision's RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize, with PIL and torch."""

    def __init__(self, blobs):
        import torch
        self.blobs = blobs
        self.mean = torch.tensor(MEAN).view(3, 1, 1) / 255
        self.std = torch.tensor(STD).view(3, 1, 1) / 255

    def __len__(self):
        return len(self.blobs)

    @staticmethod
    def _params(w, h, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
        area = w * h
        log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
        for _ in range(10):
            target = area * random.uniform(*scale)
            ar = math.exp(random.uniform(*log_ratio))
            cw, ch = int(round(math.sqrt(target * ar))), int(round(math.sqrt(target / ar)))
            if 0 < cw <= w and 0 < ch <= h:
                return random.randint(0, w - cw), random.randint(0, h - ch), cw, ch
        cw, ch = min(w, h), min(w, h)
        return (w - cw) // 2, (h - ch) // 2, cw, ch

    def __getitem__(self, i):
        import torch
        from PIL import Image
        im = Image.open(io.BytesIO(self.blobs[i])).convert("RGB")
        x, y, w, h = self._params(*im.size)
        im = im.resize((SIZE, SIZE), Image.BILINEAR, box=(x, y, x + w, y + h))
        if random.random() < 0.5:
            im = im.transpose(Image.FLIP_LEFT_RIGHT)
        t = torch.from_numpy(np.asarray(im).copy()).permute(2, 0, 1).float().div_(255)
        return (t - self.mean) / self.std


def mds_copy(path: str) -> str:
    """The shard converted to MDS by recordkit (a ``jpeg`` column of the same bytes), made once."""
    import subprocess
    out = os.path.splitext(path)[0] + ".mds"
    if not os.path.exists(out):
        subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", path, out, "--to", "mds"], check=True)
    return out


def cpu_seconds(pids=()) -> float:
    """CPU time of this process (all threads) and of the processes ``pids`` (the DataLoader's workers)."""
    total = time.process_time()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def decode_floor(blobs) -> float:
    """``cv2.imdecode`` of every JPEG on one thread: images per second of CPU."""
    import cv2
    threads = cv2.getNumThreads()
    cv2.setNumThreads(1)
    try:
        t0 = time.process_time()
        for b in blobs:
            cv2.imdecode(np.frombuffer(b, np.uint8), cv2.IMREAD_COLOR)
        return len(blobs) / (time.process_time() - t0)
    finally:
        cv2.setNumThreads(threads)


def run(path: str, rounds: int) -> int:
    import torch
    from torch.utils.data import DataLoader

    import recordkit
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.webdataset.images import encoded_images
    from recordkit.images import ImageStage

    blobs = [b for b, _ in encoded_images(path)]
    mds = mds_copy(path)
    stage = ImageStage(SIZE, mean=MEAN, std=STD, seed=0)
    loader = DataLoader(PilDataset(blobs), batch_size=BATCH, num_workers=2, persistent_workers=True, shuffle=False)

    def stage_epoch():
        n = 0
        for b in stage.batches(encoded_images(path), BATCH):
            n += b.shape[0]
        return n

    def source_epoch(data):
        def epoch():
            n = 0
            with recordkit.open(data) as reader, MinibatchSource(
                    reader, randomize=True, max_sweeps=1, images={"jpg": ImageStage(SIZE, mean=MEAN, std=STD, seed=0)}
            ) as source:
                while (mb := source.next_minibatch(BATCH)) is not None:
                    n += mb["jpg"].data.shape[0]
            return n
        return epoch

    def torch_epoch():
        n = 0
        for b in loader:
            n += b.shape[0]
        return n

    contenders = (("stage", stage_epoch), ("source-wds", source_epoch(path)), ("source-mds", source_epoch(mds)),
                  ("torch", torch_epoch))
    load_before = os.getloadavg()
    times: dict = {name: [] for name, _ in contenders}
    cpus: dict = {name: [] for name, _ in contenders}
    for _ in range(rounds + 1):
        for name, fn in contenders:
            workers = [w.pid for w in getattr(getattr(loader, "_iterator", None), "_workers", [])] \
                if name == "torch" else []
            c0, t0 = cpu_seconds(workers), time.perf_counter()
            assert fn() == N_IMAGES
            times[name].append(time.perf_counter() - t0)
            workers = workers or [w.pid for w in getattr(getattr(loader, "_iterator", None), "_workers", [])] \
                if name == "torch" else workers
            cpus[name].append(cpu_seconds(workers) - c0)
    out = {"images": N_IMAGES, "batch": BATCH, "cores": os.cpu_count(), "rounds": rounds,
           "torch_threads": torch.get_num_threads(), "load_before": [round(v, 2) for v in load_before],
           "load_after": [round(v, 2) for v in os.getloadavg()],
           "floor/decode_images_per_core_s": round(decode_floor(blobs))}
    for name in times:
        out[f"{name}/images_per_s"] = round(N_IMAGES / statistics.median(times[name][1:]))
        out[f"{name}/images_per_core_s"] = round(N_IMAGES / statistics.median(cpus[name][1:]))
    for name in ("stage", "source-wds", "source-mds"):
        out[f"{name}/vs_torch"] = round(out[f"{name}/images_per_s"] / out["torch/images_per_s"], 2)
    print(json.dumps(out, indent=1))
    return 0


def breakdown(path: str, repeat: int) -> int:
    """Where one image's CPU goes in ``ImageStage``: each step alone over the shard's JPEGs with the
    windows, scales and flips the stage draws (thread CPU per image on this thread), the decode on
    every core at once (process CPU: what two busy cores cost each other), the whole per-image work
    ``_one`` on one thread, and ``batches()`` on one thread and on every core (process CPU: adds the
    batch arrays, the pool's hand-offs and the prefetch thread). Every round runs every row once, in
    turn; medians of ``repeat`` rounds (a loaded machine drifts: compare rows of one run)."""
    import threading

    import cv2

    from recordkit.formats.webdataset.images import encoded_images
    from recordkit.images import ImageStage, codec, pool
    from recordkit.images import _kernel

    blobs = [b for b, _ in encoded_images(path)]
    stage = ImageStage(SIZE, mean=MEAN, std=STD, seed=0)
    seeds = np.random.default_rng(0).integers(0, 1 << 63, size=len(blobs))
    plans = []  # (data, window, scale, mirror) as _one draws them
    for data, seed in zip(blobs, seeds):
        rng = np.random.default_rng(int(seed))
        _, w, h = codec.header_size(data)
        win = codec.random_crop_window(h, w, rng, random_area=stage.scale, random_aspect_ratio=stage.ratio)
        scale = codec.reduced_scale(win[2], win[3], (SIZE, SIZE))
        plans.append((data, win, scale, rng.random() < stage.flip))

    def flags(scale):
        return codec._imread_flags(cv2, "RGB", scale)[0]  # noqa: SLF001 - what the stage asks for

    def decode(p):
        return cv2.imdecode(np.frombuffer(p[0], np.uint8), flags(p[2]))

    def crop(p, im):
        y, x, h, w = p[1]
        s = p[2]
        return im[y // s:-(-(y + h) // s), x // s:-(-(x + w) // s)]

    def python_part(p):
        rng = np.random.default_rng(1)
        fmt, w, h = codec.header_size(p[0])
        codec._check_declared_size(fmt, w, h, p[0], codec.pixel_budget(None))  # noqa: SLF001
        codec.random_crop_window(h, w, rng, random_area=stage.scale, random_aspect_ratio=stage.ratio)
        codec.resample_filter("auto", (w, h), (SIZE, SIZE))
        return rng.random() < stage.flip

    views = [crop(p, decode(p)) for p in plans]
    filters = [codec.resample_filter("auto", v.shape[1::-1], (SIZE, SIZE)) for v in views]
    resized = [codec.resize_image(v, SIZE, SIZE, f) for v, f in zip(views, filters)]
    out = np.empty((3, SIZE, SIZE), np.float32)
    one = np.empty((1, 3, SIZE, SIZE), np.float32)
    area = [i for i, f in enumerate(filters) if f == "BOX"]
    grow = [i for i, f in enumerate(filters) if f != "BOX"]

    def each(fn, items):
        def run():
            t0 = time.thread_time()
            for it in items:
                fn(it)
            return (time.thread_time() - t0) / len(items)
        return run

    def decode_on_every_core():
        n = pool.cores()
        threads = [threading.Thread(target=lambda k=k: [decode(p) for p in plans[k::n]]) for k in range(n)]
        c0 = time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return (time.process_time() - c0) / len(plans)

    def batches(threads):
        def run():
            saved, pool.THREADS = pool.THREADS, threads
            try:
                c0 = time.process_time()
                for _b in stage.batches(iter(blobs), BATCH):
                    pass
                return (time.process_time() - c0) / len(blobs)
            finally:
                pool.THREADS = saved
        return run

    def read_shard():
        t0 = time.thread_time()
        n = sum(1 for _ in encoded_images(path))
        return (time.thread_time() - t0) / n

    steps = {
        "read the shard (encoded_images)": read_shard,
        "python: seed rng, header, checks, window, flip draw": each(python_part, plans),
        "decode (the stage's flags; reduced where the crop allows)": each(decode, plans),
        "decode full scale IMREAD_COLOR (the floor's call)": each(
            lambda p: cv2.imdecode(np.frombuffer(p[0], np.uint8), cv2.IMREAD_COLOR), plans),
        "decode, every core at once (process CPU)": decode_on_every_core,
        "crop copy (no longer made: resize reads the view)": each(lambda v: np.ascontiguousarray(v), views),
        f"resize, area down ({len(area)} images)": each(lambda i: codec.resize_image(views[i], SIZE, SIZE, "BOX"),
                                                        area),
        f"resize, bilinear up ({len(grow)} images)": each(lambda i: codec.resize_image(
            views[i], SIZE, SIZE, "BILINEAR"), grow),
        "flip + normalize + HWC->CHW into the slot (one pass)": each(lambda i: _kernel.normalize_lut(
            resized[i], stage.table, out, True, plans[i][3]), range(len(plans))),
        "ImageStage._one, one thread": each(
            lambda i: stage._one(blobs[i], seeds[i], one[0], "x"), range(len(plans))),  # noqa: SLF001
        "batches(), one thread (process CPU)": batches(1),
        f"batches(), {pool.cores()} threads (process CPU)": batches(pool.cores()),
    }
    samples: dict = {k: [] for k in steps}
    for _ in range(repeat):
        for k, fn in steps.items():
            samples[k].append(fn() * 1e3)
    ms = {k: statistics.median(v) for k, v in samples.items()}
    resize = (ms[f"resize, area down ({len(area)} images)"] * len(area)
              + ms[f"resize, bilinear up ({len(grow)} images)"] * len(grow)) / len(plans)
    ms["resize, per image of the shard"] = resize
    ms["sum of the steps of _one"] = (ms["python: seed rng, header, checks, window, flip draw"] + resize
                                      + ms["decode (the stage's flags; reduced where the crop allows)"]
                                      + ms["flip + normalize + HWC->CHW into the slot (one pass)"])
    ms["batches() on every core beyond the decode on every core"] = (
        ms[f"batches(), {pool.cores()} threads (process CPU)"] - ms["decode, every core at once (process CPU)"])
    print(json.dumps({"ms_per_image": {k: round(v, 3) for k, v in ms.items()},
                      "scales": {s: sum(p[2] == s for p in plans) for s in (1, 2, 4, 8)},
                      "flipped": int(sum(p[3] for p in plans)), "cv2_threads": cv2.getNumThreads(),
                      "load": [round(v, 2) for v in os.getloadavg()]}, indent=1))
    return 0


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    sub.add_parser("write").add_argument("path")
    r = sub.add_parser("run")
    r.add_argument("path")
    r.add_argument("--rounds", type=int, default=5)
    d = sub.add_parser("breakdown")
    d.add_argument("path")
    d.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    if a.action == "write":
        write(a.path)
        return 0
    if a.action == "breakdown":
        return breakdown(a.path, a.repeat)
    return run(a.path, a.rounds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
