"""A set of files published as a whole (StagedDirectory), and SINGA's prepare written that way.

`prepare cifar10` killed at random must never leave train data and mean new with test data old:
the set is staged beside the target and swapped in one step.
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time

import pytest

from recordkit.storage.atomic import discarded_targets
from recordkit.storage.staged_directory import StagedDirectory
from test_singa_prepare import make_cifar

OWNED = {"a.bin", "b.bin"}.__contains__


def write(path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def test_a_new_target_appears_with_every_staged_file(tmp_path):
    with StagedDirectory(tmp_path / "set", OWNED, foreign="keep") as staged:
        write(staged.path("a.bin"), b"A")
        write(staged.path("b.bin"), b"B")
        assert not (tmp_path / "set").exists()
    assert sorted(os.listdir(tmp_path)) == ["set"]
    assert (tmp_path / "set" / "a.bin").read_bytes() == b"A"


def test_an_existing_target_keeps_what_is_not_the_sets_and_loses_owned_files_the_new_set_lacks(tmp_path):
    target = tmp_path / "set"
    (target / "sub").mkdir(parents=True)
    write(target / "a.bin", b"old A")
    write(target / "b.bin", b"old B")
    write(target / "job.conf", b"mine")
    write(target / "sub" / "x", b"x")
    with StagedDirectory(target, OWNED, foreign="keep") as staged:
        write(staged.path("a.bin"), b"new A")
    assert sorted(os.listdir(target)) == ["a.bin", "job.conf", "sub"]
    assert (target / "a.bin").read_bytes() == b"new A"
    assert (target / "job.conf").read_bytes() == b"mine" and (target / "sub" / "x").read_bytes() == b"x"
    assert sorted(os.listdir(tmp_path)) == ["set"]


def test_a_failure_leaves_the_old_set_and_no_staging_directory(tmp_path):
    target = tmp_path / "set"
    target.mkdir()
    write(target / "a.bin", b"old")
    discarded_targets()
    with pytest.raises(RuntimeError), StagedDirectory(target, OWNED, foreign="keep") as staged:
        write(staged.path("a.bin"), b"new")
        raise RuntimeError("writer failed")
    assert os.listdir(tmp_path) == ["set"] and (target / "a.bin").read_bytes() == b"old"
    assert discarded_targets() == [str(target)]


def test_the_working_directory_is_published_file_by_file(tmp_path, monkeypatch):
    target = tmp_path / "set"
    target.mkdir()
    write(target / "b.bin", b"old B")
    write(target / "keep", b"k")
    monkeypatch.chdir(target)
    with StagedDirectory(target, OWNED, foreign="keep") as staged:
        write(staged.path("a.bin"), b"A")
    assert sorted(os.listdir(target)) == ["a.bin", "keep"]
    assert sorted(os.listdir(tmp_path)) == ["set"]


def test_a_target_that_is_a_file_is_refused(tmp_path):
    write(tmp_path / "f", b"")
    with pytest.raises(NotADirectoryError, match="not a directory"):
        StagedDirectory(tmp_path / "f", OWNED, foreign="keep")


def test_a_killed_writers_staging_directory_is_removed_by_the_next_writer_a_live_ones_is_kept(tmp_path):
    target = tmp_path / "set"
    code = ("import sys, time\nfrom recordkit.storage.staged_directory import StagedDirectory\n"
            "s = StagedDirectory(sys.argv[1], lambda n: True, foreign='keep')\nprint(s.staging, flush=True)\n"
            "time.sleep(60)\n")
    live = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    killed = subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE, text=True)
    try:
        live_dir, killed_dir = live.stdout.readline().strip(), killed.stdout.readline().strip()
        killed.kill()
        killed.wait()
        old = time.time() - 3600
        os.utime(killed_dir, (old, old))
        os.utime(live_dir, (old, old))
        with StagedDirectory(target, OWNED, foreign="keep") as staged:
            write(staged.path("a.bin"), b"A")
        assert not os.path.exists(killed_dir)
        assert os.path.isdir(live_dir)
    finally:
        live.kill()
        live.wait()


def digest(directory) -> dict[str, str]:
    return {name: hashlib.sha256((directory / name).read_bytes()).hexdigest()
            for name in ("train_data.bin", "test_data.bin", "image_mean.bin")}


def test_prepare_cifar10_killed_at_random_leaves_the_whole_old_set_or_the_whole_new_one(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    src_old, _ = make_cifar(tmp_path / "old", per_batch=40, test=30, seed=1)
    src_new, _ = make_cifar(tmp_path / "new", per_batch=400, test=300, seed=2)
    out = tmp_path / "out"
    reference = tmp_path / "reference"
    from recordkit.formats.singa.prepare import prepare_cifar10
    prepare_cifar10(src_new, reference, progress=False)
    new = digest(reference)
    prepare_cifar10(src_old, out, progress=False)
    old = digest(out)
    cmd = [sys.executable, "-c", "import sys\nfrom recordkit.formats.singa.prepare import prepare_cifar10\n"
           "prepare_cifar10(sys.argv[1], sys.argv[2], progress=False)\n", str(src_new), str(out)]
    start = time.monotonic()
    subprocess.run(cmd, check=True)
    full = time.monotonic() - start
    seen = set()
    for i in range(20):
        prepare_cifar10(src_old, out, progress=False)
        child = subprocess.Popen(cmd)
        time.sleep(full * (i + 0.5) / 20)
        child.send_signal(signal.SIGKILL)
        child.wait()
        now = digest(out)
        assert now in (old, new), f"kill {i}: a mix of the old and the new set"
        seen.add("new" if now == new else "old")
    assert sorted(n for n in os.listdir(out)) == ["image_mean.bin", "test_data.bin", "train_data.bin"]
    assert "old" in seen  # the kills did land while writing
