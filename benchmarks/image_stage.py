#!/usr/bin/env python3
"""``recordkit.images.ImageStage`` vs a torch ``DataLoader`` doing the same augmentation with PIL.

    PYTHONPATH=src .venv/bin/python benchmarks/image_stage.py write bench-data/image_stage.tar
    PYTHONPATH=src .venv/bin/python benchmarks/image_stage.py run bench-data/image_stage.tar --rounds 5

512 JPEGs of 375x500 (the recipe of ``oneflow_images.py``) in one WebDataset shard; batches of 64 of
224x224 float32 NCHW, random-resized-crop (area 0.08..1, aspect 3/4..4/3), flip p=0.5, normalized:

* ``stage``: ``ImageStage(224, ...).batches(encoded_images(shard), 64)`` in this process (the batch
  on every core, the next one prepared ahead);
* ``torch``: ``DataLoader(num_workers=2, batch_size=64, persistent_workers=True)`` over a map-style
  dataset of the JPEG bytes whose items do PIL decode + RandomResizedCrop(224) + horizontal flip +
  ToTensor + Normalize -- torchvision's transforms written out with PIL and torch ops (torchvision
  does not install beside this torch), as a torchvision user's loader would run them.

Rounds alternate (stage, torch, stage, ...), one epoch of 512 images each after a warm-up epoch;
medians, the ratio and the load average are printed.
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


def run(path: str, rounds: int) -> int:
    import torch
    from torch.utils.data import DataLoader

    from recordkit.formats.webdataset.images import encoded_images
    from recordkit.images import ImageStage

    blobs = [b for b, _ in encoded_images(path)]
    stage = ImageStage(SIZE, mean=MEAN, std=STD, seed=0)
    loader = DataLoader(PilDataset(blobs), batch_size=BATCH, num_workers=2, persistent_workers=True, shuffle=False)

    def stage_epoch():
        n = 0
        for b in stage.batches(encoded_images(path), BATCH):
            n += b.shape[0]
        return n

    def torch_epoch():
        n = 0
        for b in loader:
            n += b.shape[0]
        return n

    load_before = os.getloadavg()
    times = {"stage": [], "torch": []}
    for _ in range(rounds + 1):
        for name, fn in (("stage", stage_epoch), ("torch", torch_epoch)):
            t0 = time.perf_counter()
            assert fn() == N_IMAGES
            times[name].append(time.perf_counter() - t0)
    out = {"images": N_IMAGES, "batch": BATCH, "cores": os.cpu_count(), "rounds": rounds,
           "torch_threads": torch.get_num_threads(), "load_before": [round(v, 2) for v in load_before],
           "load_after": [round(v, 2) for v in os.getloadavg()]}
    for name, ts in times.items():
        out[f"{name}/images_per_s"] = round(N_IMAGES / statistics.median(ts[1:]))
    out["ratio"] = round(out["stage/images_per_s"] / out["torch/images_per_s"], 2)
    print(json.dumps(out))
    return 0


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    sub.add_parser("write").add_argument("path")
    r = sub.add_parser("run")
    r.add_argument("path")
    r.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    if a.action == "write":
        write(a.path)
        return 0
    return run(a.path, a.rounds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
