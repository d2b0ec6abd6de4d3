"""Inputs that are not regular files (FIFO, character device, socket) are refused up front with
"not a regular file", in every reader and in `checksum`, without an open() that could block."""
import os
import socket
import subprocess
import sys

import pytest

COMMANDS = [
    ["cat", "{p}", "--stream", "x=dense:1"], ["stats", "{p}", "--stream", "x=dense:1"], ["inspect", "{p}"],
    ["read", "{p}", "--stream", "x=dense:1", "--mb-size", "4"], ["convert", "{p}", "{out}", "--stream", "x=dense:1"],
    ["cat", "{p}", "--store", "kvfile"], ["cat", "{p}", "--store", "textfile"], ["cat", "{p}", "--store", "binfile"],
    ["checksum", "create", "{p}"], ["checksum", "verify", "{p}"], ["validate", "{p}"],
]


@pytest.fixture(params=["fifo", "socket", "device"])
def special(request, tmp_path):
    if request.param == "device":
        yield "/dev/zero", "a character device"
        return
    path = tmp_path / request.param
    if request.param == "fifo":
        os.mkfifo(path)
        yield str(path), "a FIFO"
    else:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        yield str(path), "a socket"
        s.close()


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:3]) for c in COMMANDS])
def test_every_command_refuses_a_special_file_at_once(special, command, tmp_path):
    path, kind = special
    args = [a.format(p=path, out=tmp_path / "out.cbf") for a in command]
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", *args], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0
    assert f"{path}: not a regular file ({kind})" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_the_python_readers_refuse_a_fifo(tmp_path):
    from recordkit.engine.streams import StreamSpec
    from recordkit.errors import NotRegularFileError
    from recordkit.formats import singa
    from recordkit.formats.cbf import CBFReader
    from recordkit.formats.ctf import CTFReader
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for open_it in (lambda: CTFReader(fifo, [StreamSpec("x", "dense", 1)]), lambda: CBFReader(fifo),
                    lambda: singa.open(fifo, "read", "kvfile")):
        with pytest.raises(NotRegularFileError, match="not a regular file"):
            open_it()


def test_an_ofrecord_part_that_is_a_fifo_is_refused(tmp_path):
    d = tmp_path / "set"
    d.mkdir()
    os.mkfifo(d / "part-0")
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "cat", str(d)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 1 and "not a regular file (a FIFO)" in out.stderr, out.stderr
