#!/usr/bin/env python3
"""Writes the MDS data sets under this folder with MosaicML Streaming's own ``MDSWriter``.

    /tmp/rk-world-mds-venv/bin/python tests/data/world/make_mds.py

(a venv with ``mosaicml-streaming``: its numpy < 2.2 pin keeps it out of recordkit's venv, as for
tools/bridge/). Each data set is written next to an ``expected.json`` holding the values the
writer was given, which tests/test_world_mds.py compares with what recordkit reads:

* ``numbers``: every scalar encoding (int, int8..int64, uint8..uint64, float16/32/64) and
  ndarrays with and without a dtype or a fixed shape, over two shards;
* ``mixed``: an int label next to str, bytes, json, png, jpeg, pil and pkl columns;
* ``changing``: a 1-D ndarray of 3 values in the first shard, of 4 in the last sample.
"""
import io
import json
import os
import shutil

import numpy as np
from PIL import Image
from streaming import MDSWriter

HERE = os.path.dirname(os.path.abspath(__file__))
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOATS = ["float16", "float32", "float64"]


def fresh(name):
    out = os.path.join(HERE, name)
    shutil.rmtree(out, ignore_errors=True)
    return out


def numbers(n=10):
    columns = {"int": "int", **{t: t for t in INTS + FLOATS}, "vec": "ndarray:float32:4", "grid": "ndarray:int16:2,3",
               "seq": "ndarray:float64", "any": "ndarray", "emb": "ndarray"}
    rng = np.random.default_rng(0)
    rows = []
    with MDSWriter(out=fresh("numbers"), columns=columns, size_limit=1000) as w:
        for i in range(n):
            row = {"int": -3 * i, **{t: np.array(i * 7 % 100).astype(t).item() for t in INTS},
                   **{t: float(np.array(i / 4 - 1, dtype=t)) for t in FLOATS},
                   "vec": rng.normal(size=4).astype(np.float32), "grid": np.arange(6, dtype=np.int16).reshape(2, 3) + i,
                   "seq": np.arange(i % 3 + 1, dtype=np.float64) / 3, "any": np.full((i % 2 + 1, 2), i, dtype=np.uint8),
                   "emb": rng.normal(size=5).astype(np.float32)}
            w.write(row)
            rows.append({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in row.items()})
    return rows


def image(i, fmt):
    img = Image.new("RGB", (4, 4), (i, 2 * i, 3 * i))
    if fmt is None:
        return img
    buf = io.BytesIO()
    img.save(buf, format=fmt)
    return Image.open(io.BytesIO(buf.getvalue()))


def mixed(n=4):
    columns = {"label": "int", "text": "str", "blob": "bytes", "meta": "json", "png": "png", "jpg": "jpeg",
               "pil": "pil", "obj": "pkl"}
    rows = []
    with MDSWriter(out=fresh("mixed"), columns=columns) as w:
        for i in range(n):
            w.write({"label": i % 3, "text": f"t{i}", "blob": bytes([i]), "meta": {"i": i}, "png": image(i, "PNG"),
                     "jpg": image(i, "JPEG"), "pil": image(i, None), "obj": {"i": i}})
            rows.append({"label": i % 3})
    return rows


def changing(n=12):
    rows = []
    with MDSWriter(out=fresh("changing"), columns={"v": "ndarray:float32"}, size_limit=300) as w:
        for i in range(n):
            v = np.arange(4 if i == n - 1 else 3, dtype=np.float32) + i
            w.write({"v": v})
            rows.append({"v": v.tolist()})
    return rows


if __name__ == "__main__":
    import streaming
    for name, make in [("numbers", numbers), ("mixed", mixed), ("changing", changing)]:
        rows = make()
        with open(os.path.join(HERE, name, "expected.json"), "w") as f:
            json.dump({"writer": f"mosaicml-streaming {streaming.__version__}", "rows": rows}, f)
        print(name, len(rows), sorted(os.listdir(os.path.join(HERE, name))))
