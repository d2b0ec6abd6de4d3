#!/usr/bin/env python3
"""MosaicML Streaming reads the images recordkit writes to MDS as images, byte for byte.

    python tools/bridge/mds_images_check.py [--venv /tmp/rk-mds-venv | --python PY] [--work /tmp/rk-mds-images]

(with recordkit's interpreter; ``--python``: an interpreter that already has mosaicml-streaming,
else a venv is made as for mds_check.py). Stages:

* recordkit: an OFRecord data set (two parts) of JPEG and PNG image features, an int32 label and
  an int64 key, converted by ``recordkit convert --to mds --image-feature jpg --image-feature png``
  into several shards; the same samples as a WebDataset shard (``KEY.jpg``, ``KEY.png``, ``KEY.cls``,
  as ``webdataset.TarWriter`` writes them) converted by ``recordkit convert --to mds``; the expected
  bytes, in the order recordkit writes the records, saved;
* Streaming: ``StreamingDataset(local=DIR, shuffle=False)`` reads every sample of both: ``jpg`` must
  decode to a JPEG image and ``png`` to a PNG image (Streaming's ``jpeg``/``png`` encodings), each
  built from exactly the source's bytes (the decoder's buffer compared), with the same pixels as the
  source decoded by Pillow; ``key`` and the label compared.

Writes tools/bridge/results/mds_images_check.json. Not part of CI.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

RECORDS = 24


def _encoded(i: int, fmt: str) -> bytes:
    import io

    import numpy as np
    from PIL import Image
    rng = np.random.default_rng(i)
    pixels = rng.integers(0, 256, size=(8 + i, 6 + 2 * i, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return buf.getvalue()


def write_stage(work: str) -> None:
    """Runs with recordkit's interpreter: the OFRecord source, its MDS conversion, the expected samples."""
    import numpy as np
    sys.path.insert(0, os.path.join(_common.REPO, "src"))
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    from recordkit.images import open_images
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    src, out = os.path.join(work, "of"), os.path.join(work, "mds")
    records = [{"jpg": _encoded(i, "JPEG"), "png": _encoded(i, "PNG"), "label": np.array([i % 5], np.int32),
                "key": np.array([1000 + i])} for i in range(RECORDS)]
    with OFRecordWriter(src, 2) as w:  # round robin: part 0 holds the even records, part 1 the odd
        for r in records:
            w.write(r)
    _common.recordkit("convert", src, out, "--to", "mds", "--image-feature", "jpg", "--image-feature", "png",
                      "--shard-size", "4000")
    order = [i for i in range(RECORDS) if i % 2 == 0] + [i for i in range(RECORDS) if i % 2 == 1]
    import io
    import tarfile
    shard = os.path.join(work, "images.tar")
    with tarfile.open(shard, "w") as tf:  # the records in the same order, as webdataset.TarWriter writes them
        for i in order:
            for ext, data in (("jpg", records[i]["jpg"]), ("png", records[i]["png"]), ("cls", b"%d" % (i % 5))):
                info = tarfile.TarInfo(f"{1000 + i:06d}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    _common.recordkit("convert", shard, os.path.join(work, "mds_wds"), "--to", "mds", "--shard-size", "4000")
    want = [{"key": 1000 + i, "label": i % 5, "jpg": base64.b64encode(records[i]["jpg"]).decode(),
             "png": base64.b64encode(records[i]["png"]).decode()} for i in order]
    # recordkit reads its own output back byte for byte (the test suite checks this too)
    for directory in (out, os.path.join(work, "mds_wds")):
        for feature in ("jpg", "png"):
            if [b for b, _ in open_images(directory, feature)] != [records[i][feature] for i in order]:
                raise SystemExit(f"recordkit read back other {feature} bytes than it wrote to {directory}")
    with open(os.path.join(work, "expected.json"), "w") as f:
        json.dump(want, f)


def check_stage(work: str) -> dict:
    """Runs inside the mosaicml-streaming venv."""
    import streaming
    result = _read_with_streaming(os.path.join(work, "mds"), "label", work)
    result["from_webdataset"] = _read_with_streaming(os.path.join(work, "mds_wds"), "cls", work)
    return dict(result, library="mosaicml-streaming", version=streaming.__version__)


def _read_with_streaming(directory: str, label: str, work: str) -> dict:
    """Every sample of the MDS set in ``directory`` read by ``StreamingDataset`` and compared."""
    import io

    import numpy as np
    from PIL import Image
    from streaming import StreamingDataset
    want = json.load(open(os.path.join(work, "expected.json")))
    ds = StreamingDataset(local=directory, shuffle=False, batch_size=1)
    mismatches, images = [], 0
    for i in range(len(ds)):
        s, w = ds[i], want[i]
        problems = []
        for column, fmt in (("jpg", "JPEG"), ("png", "PNG")):
            img, raw = s[column], base64.b64decode(w[column])
            if not isinstance(img, Image.Image) or img.format != fmt:
                problems.append(f"{column}: {type(img).__name__} {getattr(img, 'format', None)}, not a {fmt} image")
                continue
            if img.fp.getvalue() != raw:  # the bytes Streaming's decoder opened
                problems.append(f"{column}: not the source's bytes")
            if not np.array_equal(np.asarray(img), np.asarray(Image.open(io.BytesIO(raw)))):
                problems.append(f"{column}: other pixels than the source's")
            images += 1
        if int(s["key"]) != w["key"] or np.asarray(s[label]).tolist() != [w["label"]]:
            problems.append(f"key/label {int(s['key'])}/{np.asarray(s[label]).tolist()}")
        if problems:
            mismatches.append({"sample": i, "problems": problems})
    if len(ds) != len(want):
        mismatches.append({"samples_read": len(ds), "expected": len(want)})
    shards = json.load(open(os.path.join(directory, "index.json")))["shards"]
    return {"samples_read": len(ds), "images_compared": images, "shards": len(shards),
            "column_encodings": dict(zip(shards[0]["column_names"], shards[0]["column_encodings"])),
            "mismatches": mismatches[:20], "mismatch_count": len(mismatches)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", default="/tmp/rk-mds-venv")
    ap.add_argument("--python", help="an interpreter with mosaicml-streaming (instead of --venv)")
    ap.add_argument("--work", default="/tmp/rk-mds-images")
    ap.add_argument("--stage", choices=["all", "check"], default="all")
    args = ap.parse_args()
    if args.stage == "check":
        print(json.dumps(check_stage(args.work)))
        return 0
    write_stage(args.work)
    python = args.python or _common.make_venv(args.venv, ["mosaicml-streaming", "torch"], stub_torchvision=True)
    p = subprocess.run([python, os.path.abspath(__file__), "--stage", "check", "--work", args.work],
                       capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"MosaicML stage failed:\n{p.stderr[-4000:]}")
    lib = json.loads(p.stdout.strip().splitlines()[-1])
    result = {"recordkit_to_mosaicml": lib,
              "ok": all(leg["mismatch_count"] == 0 and leg["samples_read"] == RECORDS
                        and leg["images_compared"] == 2 * RECORDS for leg in (lib, lib["from_webdataset"]))}
    print(_common.save("mds_images_check.json", result))
    print(json.dumps(result, indent=1))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
