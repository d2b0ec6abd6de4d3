"""Fault injection: SIGKILL a writer at a random moment, the target stays whole.

A child process writes a data set slowly with each writer (CTF, CBF, OFRecord parts,
SINGA KVFile create and append, WebDataset / TFRecord / MDS shard directories); the parent kills it after a random short delay. The
final path must then hold exactly the previous content or exactly the complete new
content (byte for byte), a SINGA append must never damage the tuples already there, and
no file other than the final names and the writers' hidden temporaries may appear. The
temporaries (``.<name>.XXXX.part``) a killed writer leaves behind are counted and
reported (they are acceptable, but not cleaned up by anything yet).
"""
from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

CHILD_SRC = r'''
import os, sys, time
import numpy as np
from recordkit import StreamSpec
from recordkit.formats.ctf import CTFWriter
from recordkit.formats.cbf import CBFWriter
from recordkit.formats.ofrecord.writer import OFRecordWriter
from recordkit.formats import singa
from recordkit.engine.chunk import ChunkData, DenseColumn

STREAMS = [StreamSpec("x", "dense", 3)]
BRIDGE = ("webdataset", "tfrecord", "mds")


def bridge_writer(kind, target):
    if kind == "webdataset":
        from recordkit.formats.webdataset import WebDatasetWriter
        return WebDatasetWriter(target, STREAMS, shard_size=3000, mtime=0)  # fixed mtime: same bytes every run
    if kind == "tfrecord":
        from recordkit.formats.tfrecord import TFRecordWriter
        return TFRecordWriter(target, STREAMS, shard_size=600)
    from recordkit.formats.mds import MDSWriter
    return MDSWriter(target, STREAMS, shard_size=600)

def write_generation(kind, target, gen, n, pause, ready=lambda: None):
    if kind == "ctf":
        w = CTFWriter(target, STREAMS)
    elif kind == "cbf":
        w = CBFWriter(target, STREAMS, chunk_size=200)
    elif kind == "ofrecord":
        w = OFRecordWriter(target, num_parts=3)
    elif kind == "singa_create":
        w = singa.open(target, "create", "kvfile")
    elif kind == "singa_append":
        w = singa.open(target, "append", "kvfile")
    elif kind in BRIDGE:
        w = bridge_writer(kind, target)
    ready()
    for i in range(n):
        v = np.full((1, 3), gen * 1000 + i, np.float32)
        if kind in ("ctf", "cbf"):
            w.write({"x": v})
        elif kind == "ofrecord":
            w.write({"x": v.ravel(), "y": gen * 1000 + i, "pad": b"p" * 200})
        elif kind in BRIDGE:
            w.write_chunk(ChunkData(-1, np.array([i], np.uint64), np.array([1]),
                                    {"x": DenseColumn(v, np.array([0, 1]))}))
        else:
            w.write(f"g{gen}-{i:04d}".encode(), v.tobytes() * 20)
        if pause:
            time.sleep(pause)
    w.close()

if __name__ == "__main__":
    kind, target, gen, n, pause = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
    def ready():
        sys.stdout.write("ready\n")
        sys.stdout.flush()
    write_generation(kind, target, gen, n, pause, ready)
    sys.stdout.write("done\n")
    sys.stdout.flush()
'''

N, PAUSE = 60, 0.004
TRIALS = 4
WRITERS = ["ctf", "cbf", "ofrecord", "singa_create", "singa_append", "webdataset", "tfrecord", "mds"]
_ns: dict = {}
exec(compile(CHILD_SRC, "<writer child>", "exec"), _ns)
write_generation = _ns["write_generation"]


def snapshot(target):
    """{relative name: sha256} of the final names (a file, or a directory's visible files)."""
    if os.path.isdir(target):
        return {n: hashlib.sha256(open(os.path.join(target, n), "rb").read()).hexdigest()
                for n in sorted(os.listdir(target)) if not n.startswith(".")}
    if not os.path.exists(target):
        return {}
    return {os.path.basename(target): hashlib.sha256(open(target, "rb").read()).hexdigest()}


def temporaries(directory):
    return sorted(n for n in os.listdir(directory) if n.startswith(".") and n.endswith((".part", ".staging")))


def target_in(d, kind):
    return os.path.join(d, "ds" if kind in ("ofrecord", "webdataset", "tfrecord", "mds") else "out.dat")


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    """Per writer: the previous content (generation 0) and the complete new content."""
    out = {}
    for kind in WRITERS:
        d = tmp_path_factory.mktemp(f"expect-{kind}")
        target = target_in(d, kind)
        first = "singa_create" if kind == "singa_append" else kind
        write_generation(first, target, 0, N // 2, 0)
        old = snapshot(target)
        write_generation(kind, target, 1, N, 0)
        out[kind] = (old, snapshot(target))
    return out


def run_trial(kind, workdir, child_path, seed):
    """Prepare generation 0, start the child writing generation 1, SIGKILL it at random."""
    rng = random.Random(seed)
    os.makedirs(workdir)
    target = target_in(workdir, kind)
    first = "singa_create" if kind == "singa_append" else kind
    write_generation(first, target, 0, N // 2, 0)
    proc = subprocess.Popen([sys.executable, child_path, kind, target, "1", str(N), str(PAUSE)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line == "ready\n", (line, proc.stderr.read())
        # half the trials kill while writing, half around close() (commit) or after it
        delay = rng.uniform(0, N * PAUSE) if seed % 2 == 0 else rng.uniform(N * PAUSE, N * PAUSE * 3)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=20)
        proc.stdout.close()
        proc.stderr.close()
    scan_dir = target if kind == "ofrecord" else workdir
    return {"delay": delay, "returncode": proc.returncode, "final": snapshot(target),
            "leftover": temporaries(scan_dir), "visible": sorted(os.listdir(scan_dir))}


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    base = tmp_path_factory.mktemp("faults")
    child = base / "writer_child.py"
    child.write_text(CHILD_SRC)
    jobs = [(kind, str(base / f"{kind}-{t}"), str(child), 2 * (7 * t + i) + t % 2)
            for i, kind in enumerate(WRITERS) for t in range(TRIALS)]
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(lambda j: (j[0], run_trial(*j)), jobs))
    out = {}
    for kind, res in results:
        out.setdefault(kind, []).append(res)
    shutil.rmtree(base, ignore_errors=True)
    return out


@pytest.mark.parametrize("kind", WRITERS)
def test_killed_writer_leaves_old_or_new_content(kind, expected, trials):
    old, new = expected[kind]
    assert old != new
    outcomes = []
    for res in trials[kind]:
        final = res["final"]
        if kind == "ofrecord":
            # each part is atomic on its own: part files hold one version or the other
            for name, digest in final.items():
                assert digest in (old.get(name), new.get(name)), (name, res)
            assert set(final) <= set(old) | set(new), res
            outcome = "old" if final == old else "new" if final == new else "mixed-parts"
        else:
            assert final in (old, new), f"partial file after SIGKILL at {res['delay']:.3f}s: {res}"
            outcome = "old" if final == old else "new"
        # no stray names: only the final names and hidden *.part temporaries
        finals = set(old) | set(new) | ({"ds"} if kind in ("webdataset", "tfrecord", "mds") else set())
        strays = [n for n in res["visible"] if n not in finals and n not in res["leftover"]]
        assert not strays, strays
        outcomes.append((round(res["delay"], 3), res["returncode"], outcome, len(res["leftover"])))
    print(f"\n{kind}: (delay s, rc, outcome, temporaries left) {outcomes}")


def test_singa_append_killed_keeps_existing_tuples(trials, expected):
    for res in trials["singa_append"]:
        assert res["final"] in expected["singa_append"], res


def test_ofrecord_data_set_is_all_old_or_all_new(tmp_path, expected):
    """Deterministic reproducer of the window between part commits (no timing luck needed)."""
    from recordkit.storage.atomic import AtomicFile
    old, new = expected["ofrecord"]
    target = str(tmp_path / "ds")
    write_generation("ofrecord", target, 0, N // 2, 0)
    calls = []
    real = AtomicFile.commit

    def commit_then_die(self):
        real(self)
        calls.append(self.path)
        if len(calls) == 1:
            raise KeyboardInterrupt  # stands in for SIGKILL right after the first part is renamed

    AtomicFile.commit = commit_then_die
    try:
        with pytest.raises(KeyboardInterrupt):
            write_generation("ofrecord", target, 1, N, 0)
    finally:
        AtomicFile.commit = real
    assert snapshot(target) in (old, new)


def test_ofrecord_rewrite_with_fewer_parts_leaves_no_stale_parts(tmp_path):
    from recordkit.formats.ofrecord.reader import OFRecordReader
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(tmp_path, num_parts=3) as w:
        for i in range(6):
            w.write({"y": i})
    with OFRecordWriter(tmp_path, num_parts=1) as w:
        for i in range(2):
            w.write({"y": 100 + i})
    seen = [int(r["y"].value[0]) for b in OFRecordReader(tmp_path, epochs=1, rank=0, world_size=1) for r in b]
    assert seen == [100, 101]  # today: [100, 101, 1, 4, 2, 5] (part-00001, part-00002 are stale)


PREPARE_OUTPUTS = ("train_data.bin", "test_data.bin", "image_mean.bin")


def test_killed_prepare_leaves_each_store_old_or_new(tmp_path):
    """SIGKILL ``recordkit prepare cifar10`` at random moments over an earlier run's output:
    each of the three stores is, byte for byte, the earlier one or the complete new one."""
    from test_singa_prepare import make_cifar
    from recordkit.formats.singa import prepare

    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old_src, _ = make_cifar(tmp_path / "old", per_batch=800, test=400, seed=1)
    new_src, _ = make_cifar(tmp_path / "new", per_batch=800, test=400, seed=2)
    prepare.prepare_cifar10(old_src, tmp_path / "old-out")
    prepare.prepare_cifar10(new_src, tmp_path / "new-out")
    old, new = snapshot(str(tmp_path / "old-out")), snapshot(str(tmp_path / "new-out"))
    assert set(old) == set(new) == set(PREPARE_OUTPUTS)
    exe = os.path.join(os.path.dirname(sys.executable), "recordkit")
    rng = random.Random(8)
    outcomes = []
    for t in range(6):
        out = tmp_path / f"out-{t}"
        shutil.copytree(tmp_path / "old-out", out)
        proc = subprocess.Popen([exe, "prepare", "cifar10", str(new_src), str(out)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        delay = rng.uniform(0.25, 0.6)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=20)
        final = snapshot(str(out))
        assert set(final) == set(PREPARE_OUTPUTS), final
        kinds = []
        for name in PREPARE_OUTPUTS:
            assert final[name] in (old[name], new[name]), f"{name} partial after SIGKILL at {delay:.3f}s"
            kinds.append("old" if final[name] == old[name] else "new")
        strays = [n for n in os.listdir(out) if n not in PREPARE_OUTPUTS and n not in temporaries(str(out))]
        assert not strays, strays
        outcomes.append((round(delay, 3), proc.returncode, kinds))
    print(f"\nprepare: (delay s, rc, stores) {outcomes}")
