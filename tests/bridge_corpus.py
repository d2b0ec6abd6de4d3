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
    """``recordkit ARGV`` in this process: (exit status, what it printed, what it warned)."""
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cat_records(capsys, *argv) -> list[dict]:
    code, out, err = cli(capsys, "cat", *argv)
    assert code == 0, err
    return [json.loads(line) for line in out.splitlines()]


def by_key(records) -> dict:
    return {r["key"]: r for r in records}


def npy_bytes(array) -> bytes:
    """``array`` as a ``.npy`` member."""
    import io
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def write_tar(path, members) -> None:
    """A tar shard of ``members`` ((name, bytes) pairs, in order), as WebDataset stores samples."""
    import io
    import tarfile
    with tarfile.open(path, "w") as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


def mds_ndarray(array, shape=None) -> bytes:
    """A dynamic-shape MDS ``ndarray`` column value: ``[ndim << 2 | shape dtype][shape][values]``;
    ``shape`` overrides the array's own (to store a damaged one)."""
    shape = tuple(np.shape(array) if shape is None else shape)
    code = next(c for c in range(4) if max(shape, default=0) < 1 << (8 << c))
    return bytes([len(shape) << 2 | code]) + np.array(shape, f"<u{1 << code}").tobytes() + np.asarray(array).tobytes()


def write_mds(directory, columns, samples, streams=None, hashes=None) -> str:
    """An MDS data set of one shard written independently of recordkit's writer: ``columns``
    (name, encoding) pairs, every column variable-size; ``samples`` a list of per-column encoded
    values (bytes); ``streams`` the ``recordkit`` stream declarations for ``index.json``;
    ``hashes`` the algorithms whose digests ``index.json`` records. Returns the shard's path."""
    import hashlib
    import os
    os.makedirs(directory, exist_ok=True)
    config = json.dumps({"version": 2, "format": "mds"}).encode()
    bodies = [np.array([len(v) for v in values], "<u4").tobytes() + b"".join(values) for values in samples]
    start = 4 + 4 * (len(samples) + 1) + len(config)
    offsets = np.concatenate([[0], np.cumsum([len(b) for b in bodies])]) + start
    shard = np.array([len(samples)], "<u4").tobytes() + offsets.astype("<u4").tobytes() + config + b"".join(bodies)
    with open(os.path.join(directory, "shard.00000.mds"), "wb") as f:
        f.write(shard)
    hashes = list(hashes or [])
    info = {"column_names": [c for c, _ in columns], "column_encodings": [e for _, e in columns],
            "column_sizes": [None] * len(columns), "compression": None, "format": "mds", "hashes": hashes,
            "raw_data": {"basename": "shard.00000.mds", "bytes": len(shard),
                         "hashes": {a: hashlib.new(a, shard).hexdigest() for a in hashes}},
            "samples": len(samples), "size_limit": 1 << 26, "version": 2, "zip_data": None}
    index = {"version": 2, "shards": [info]}
    if streams is not None:  # as recordkit's writer records it (one sample a sequence here)
        index["recordkit"] = {"format": "mds", "version": 1, "streams": streams, "sequences": len(samples),
                              "shards": [{"name": "shard.00000.mds", "sequences": len(samples),
                                          "samples": len(samples)}]}
    with open(os.path.join(directory, "index.json"), "w") as f:
        json.dump(index, f)
    return os.path.join(directory, "shard.00000.mds")
