"""A full disk: every writer ends with one `recordkit: error:` line naming
the target, and nothing is left behind: no temporary file, no staging directory, no partial
output under the final name. Stale temporaries of killed writers are removed by the next
writer of the same target, unless a live writer holds them.

The full disk is a 2 MiB tmpfs where mounting is permitted (root), else a file-size limit
(RLIMIT_FSIZE: the same failed writes, as EFBIG) in the child process."""
import fcntl
import os
import subprocess
import sys
import time

import numpy as np
import pytest

STREAMS = ["--stream", "f=dense:50", "--stream", "l=sparse:1000"]


@pytest.fixture(scope="module")
def big_ctf(tmp_path_factory):
    """~6 MB of CTF: more than the 2 MiB disk in every output format."""
    rng = np.random.default_rng(0)
    lines = []
    for i in range(12000):
        dense = " ".join(f"{v:.6f}" for v in rng.normal(size=50))
        lines.append(f"{i} |f {dense} |l {int(rng.integers(1000))}:1")
    path = tmp_path_factory.mktemp("src") / "big.ctf"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def small_disk(tmp_path):
    """(directory, preexec) of a 2 MiB disk."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                             capture_output=True).returncode == 0
    if mounted:
        yield mnt, None
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
        return

    def limit():
        import resource
        import signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (2 << 20, 2 << 20))
    yield mnt, limit


def convert(src, out, *extra, preexec=None):
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", str(src), str(out), *STREAMS,
                           *extra], capture_output=True, text=True, preexec_fn=preexec, timeout=300)


TARGETS = [("o.ctf", []), ("o.cbf", ["--precision", "double"]), ("o.kv", ["--to", "kvfile"]),
           ("o.bin", ["--to", "binfile"]), ("ofr", ["--to", "ofrecord", "--parts", "3"])]


@pytest.mark.parametrize("name, extra", TARGETS, ids=[t[0] for t in TARGETS])
def test_a_full_disk_is_one_error_line_and_leaves_nothing_behind(big_ctf, small_disk, name, extra):
    disk, preexec = small_disk
    out = convert(big_ctf, disk / name, *extra, preexec=preexec)
    assert out.returncode == 1, out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("recordkit: error:")]
    assert len(errors) == 1 and "Traceback" not in out.stderr, out.stderr
    assert str(disk / name) in errors[0] and "intact" in errors[0]
    assert os.listdir(disk) == [], os.listdir(disk)


def test_a_full_disk_keeps_the_previous_output_intact(big_ctf, small_disk, tmp_path):
    disk, preexec = small_disk
    (disk / "o.ctf").write_text("0 |f 1\n")
    out = convert(big_ctf, disk / "o.ctf", preexec=preexec)
    assert out.returncode == 1
    assert (disk / "o.ctf").read_text() == "0 |f 1\n"
    assert os.listdir(disk) == ["o.ctf"]


def _stale(directory, target, age=3600):
    tmp = directory / f".{target}.abc123.part"
    tmp.write_bytes(b"half a file")
    past = time.time() - age
    os.utime(tmp, (past, past))
    return tmp


def test_a_killed_writers_temporary_is_removed_by_the_next_writer(tmp_path, big_ctf):
    stale = _stale(tmp_path, "o.ctf")
    other = _stale(tmp_path, "other.ctf")
    assert convert(big_ctf, tmp_path / "o.ctf").returncode == 0
    assert not stale.exists()
    assert other.exists()  # another target's temporary is not ours to judge


def test_a_temporary_held_by_a_live_writer_is_kept(tmp_path, big_ctf):
    stale = _stale(tmp_path, "o.ctf")
    with open(stale, "rb") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(f.fileno(),))
    try:
        # the lock now lives in the child (the file description is shared)
        assert convert(big_ctf, tmp_path / "o.ctf").returncode == 0
        assert stale.exists()
    finally:
        holder.kill()
        holder.wait()


def test_a_fifo_named_like_a_temporary_is_never_opened_blocking(tmp_path, big_ctf):
    fifo = tmp_path / ".o.ctf.fifo1.part"
    os.mkfifo(fifo)
    past = time.time() - 3600
    os.utime(fifo, (past, past))
    assert convert(big_ctf, tmp_path / "o.ctf").returncode == 0
    assert fifo.exists()


def test_discard_removes_the_temporary_even_when_closing_fails(tmp_path):
    from recordkit.storage.atomic import AtomicFile, discarded_targets

    class FailingClose:
        def __init__(self, f):
            self.f = f

        def close(self):
            self.f.close()
            raise OSError(28, "No space left on device")

    discarded_targets()  # forget what earlier tests discarded
    a = AtomicFile(tmp_path / "x.bin")
    a.write(b"data")
    a.file = FailingClose(a.file)
    a.discard()
    assert os.listdir(tmp_path) == []
    assert discarded_targets() == [str(tmp_path / "x.bin")]


def test_converting_into_a_missing_directory_names_the_directory_not_a_temporary(tmp_path, capsys):
    from recordkit.cli.main import main
    src = tmp_path / "a.ctf"
    src.write_text("|f 1 2\n|f 3 4\n")
    target = tmp_path / "missing" / "out.cbf"
    assert main(["convert", str(src), str(target), "--stream", "f=dense:2"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path / 'missing'}: no such directory" in err and ".part" not in err
    assert not (tmp_path / "missing").exists()
