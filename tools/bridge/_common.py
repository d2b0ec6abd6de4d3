"""Shared steps of the peer-library checks (tf_check.py, mds_check.py).

Each check runs in three stages, because the peer libraries cannot share recordkit's venv
(TensorFlow is 1.3 GB; mosaicml-streaming pins numpy < 2.2):

1. ``write`` (recordkit's interpreter): a CTF corpus with dense and sparse streams, converted by
   ``recordkit convert``; ``recordkit cat`` of the corpus saved as the expected values;
2. ``check`` (the peer library's venv under /tmp): the library reads recordkit's output and
   compares every value; then it writes a data set of its own with known values;
3. ``readback`` (recordkit's interpreter): recordkit reads the library's data set and compares.

The result JSON (versions, counts, mismatches) is written to tools/bridge/results/.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
STREAMS = ["--stream", "feat=dense:4:F", "--stream", "lab=sparse:50:L"]


def make_venv(path: str, packages: list[str], *, stub_torchvision: bool = False) -> str:
    """A venv at ``path`` with ``packages`` (reused when it already has them); its python."""
    python = os.path.join(path, "bin", "python")
    marker = os.path.join(path, ".rk-ready")
    if not os.path.exists(marker):
        subprocess.run([sys.executable, "-m", "venv", path], check=True)
        subprocess.run([python, "-m", "pip", "install", "-q", *packages], check=True)
        if stub_torchvision:
            install_torchvision_stub(python)
        open(marker, "w").write(" ".join(packages))
    return python


def install_torchvision_stub(python: str) -> None:
    """An empty ``torchvision`` package: ``import streaming`` imports torchvision for its vision data
    sets only, and PyPI's torchvision does not load against the local CPU torch."""
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    pkg = os.path.join(site, "torchvision")
    os.makedirs(os.path.join(pkg, "datasets"), exist_ok=True)
    os.makedirs(os.path.join(pkg, "transforms"), exist_ok=True)
    open(os.path.join(pkg, "__init__.py"), "w").write("__version__ = '0.0.0-stub'\n")
    open(os.path.join(pkg, "datasets", "__init__.py"), "w").write(
        "class VisionDataset:\n    def __init__(self, *a, **k):\n        raise RuntimeError('torchvision stub')\n")
    open(os.path.join(pkg, "transforms", "__init__.py"), "w").write("")


def recordkit(*argv) -> str:
    """Run the recordkit CLI of this repository; its stdout."""
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    p = subprocess.run([sys.executable, "-m", "recordkit.cli.main", *map(str, argv)], capture_output=True,
                       text=True, env=env)
    if p.returncode:
        raise SystemExit(f"recordkit {' '.join(map(str, argv))} failed: {p.stderr}")
    return p.stdout


def write_stage(work: str, fmt: str, extra=()) -> None:
    sys.path.insert(0, os.path.join(REPO, "tests"))
    from bridge_corpus import make_ctf
    os.makedirs(work, exist_ok=True)
    corpus = make_ctf(os.path.join(work, "corpus.ctf"))
    out = os.path.join(work, fmt)
    if os.path.exists(out):
        import shutil
        shutil.rmtree(out)
    recordkit("convert", corpus, out, "--to", fmt, *STREAMS, *extra)
    with open(os.path.join(work, "expected.jsonl"), "w") as f:
        f.write(recordkit("cat", corpus, *STREAMS))


def expected(work: str) -> list[dict]:
    with open(os.path.join(work, "expected.jsonl")) as f:
        return [json.loads(line) for line in f]


def save(name: str, result: dict) -> str:
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", name)
    with open(path, "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
        f.write("\n")
    return path
