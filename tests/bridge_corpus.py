"""A small CTF corpus for the bridge-format tests (WebDataset, TFRecord, MDS).

Sequences of 1..5 samples with ids (some large), a dense stream with a CTF alias that differs
from its name, a sparse stream with repeated indices, sequences without any sample of the
sparse stream, samples with no entries, and values that need all of float32's digits.
"""
from __future__ import annotations

import json

import numpy as np

from recordkit.cli.main import main

STREAMS = ["--stream", "feat=dense:4:F", "--stream", "lab=sparse:50:L"]


def make_ctf(path, n: int = 120, seed: int = 7) -> str:
    rng = np.random.default_rng(seed)
    lines = []
    key = 3
    for i in range(n):
        key += int(rng.integers(1, 4))
        if i == n - 1:
            key = 2**63 + 11  # a key beyond int64
        for s in range(int(rng.integers(1, 6))):
            vals = " ".join(repr(float(np.float32(v))) for v in rng.normal(size=4) * 10.0 ** rng.integers(-3, 4))
            line = f"{key} |F {vals}"
            if i % 7 != 3 and rng.random() < 0.8:
                k = int(rng.integers(0, 4))
                idx = rng.integers(0, 50, size=k)
                if k >= 2:
                    idx[1] = idx[0]  # a repeated index: kept, in file order
                line += " |L " + " ".join(f"{j}:{float(np.float32(rng.normal())):.9g}" for j in idx)
            lines.append(line)
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    return str(path)


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cat_records(capsys, *argv) -> list[dict]:
    code, out, err = cli(capsys, "cat", *argv)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def by_key(records) -> dict:
    return {r["key"]: r for r in records}
