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


# -- every file a reader opens besides its input: sidecars, caches, the files a description lists ----------

def _cli(*args):
    """The command in a process of its own: an open() that blocks on a FIFO fails the test at the
    timeout instead of hanging the suite."""
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", *map(str, args)], capture_output=True,
                          text=True, timeout=30)


def _data(tmp_path, target, *options):
    """in.ctf (two sequences of stream x), converted to ``target`` (a path under tmp_path) if given."""
    src = tmp_path / "in.ctf"
    src.write_text("0 |x 1 2\n1 |x 3 4\n")
    if target:
        import recordkit
        recordkit.convert(str(src), tmp_path / target, streams=["x=dense:2"], **dict(options))
    return src


def _ctf_index_cache(tmp_path):
    src = _data(tmp_path, None)
    assert _cli("cat", src, "--stream", "x=dense:2", "--cache-index").returncode == 0  # writes the cache
    return src


SIDECARS = {  # what a command reads -> (how the data is made, the file made a FIFO, the command)
    "checksum sidecar": (lambda t: _data(t, None), "in.ctf.rkcrc", ["cat", "in.ctf", "--stream", "x=dense:2"]),
    "checksum sidecar, verify": (lambda t: _data(t, None), "in.ctf.rkcrc", ["checksum", "verify", "in.ctf"]),
    "CTF index cache": (_ctf_index_cache, "in.ctf.0.rkindex", ["cat", "in.ctf", "--stream", "x=dense:2",
                                                               "--cache-index"]),
    "HF data file": (lambda t: _data(t, "hf", ("to", "hf")), "hf/data-00000-of-00001.arrow", ["cat", "hf"]),
    "MDS shard": (lambda t: _data(t, "mds", ("to", "mds")), "mds/shard.00000.mds", ["cat", "mds"]),
    "MDS index": (lambda t: _data(t, "mds", ("to", "mds")), "mds/index.json", ["cat", "mds"]),
    "WebDataset shard": (lambda t: _data(t, "wds", ("to", "webdataset")), "wds/shard-000000.tar", ["cat", "wds"]),
    "WebDataset description": (lambda t: _data(t, "wds", ("to", "webdataset")), "wds/__recordkit__.json",
                               ["cat", "wds"]),
    "TFRecord part": (lambda t: _data(t, "tfr", ("to", "tfrecord")), "tfr/part-00000.tfrecord", ["cat", "tfr"]),
    "Parquet part": (lambda t: _data(t, "pq", ("to", "parquet"), ("parts", 2)), "pq/part-00001.parquet",
                     ["cat", "pq"]),
    "OFRecord index sidecar": (lambda t: _data(t, "of", ("to", "ofrecord")), "of/.part-00000.rkidx",
                               ["convert", "of", "out.cbf"]),
    "OFRecord index sidecar, validate": (lambda t: _data(t, "of", ("to", "ofrecord")), "of/.part-00000.rkidx",
                                         ["validate", "of"]),
    "OFRecord stream declarations": (lambda t: _data(t, "of", ("to", "ofrecord")), "of/_recordkit_streams.json",
                                     ["convert", "of", "out.cbf"]),
    "ctf2bin header": (lambda t: _data(t, None), "header.txt", ["convert", "in.ctf", "out.cbf", "--header",
                                                                "header.txt"]),
    "read state": (lambda t: _data(t, None), "state.json", ["read", "in.ctf", "--stream", "x=dense:2",
                                                            "--mb-size", "1", "--resume", "state.json"]),
}


@pytest.mark.parametrize("case", SIDECARS)
def test_every_file_a_command_opens_is_checked_before_it_is_opened(tmp_path, monkeypatch, case):
    make, fifo, command = SIDECARS[case]
    make(tmp_path)
    path = tmp_path / fifo
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    monkeypatch.chdir(tmp_path)
    out = _cli(*command)
    assert out.returncode != 0 and f"{fifo}: not a regular file (a FIFO)" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "out.cbf").exists()


def test_a_fifo_in_place_of_a_range_cache_record_is_refused_offline(tmp_path):
    """Offline, a remote file's version is read from the cache's record: a FIFO there is refused
    (the record is unreadable), never opened."""
    from recordkit.storage import range_cache
    url = "memory://set/a.cbf"
    os.mkfifo(tmp_path / (range_cache._url_key(url) + range_cache._RECORD_SUFFIX))
    out = _cli("cat", url, "--cache-dir", str(tmp_path), "--offline")
    assert out.returncode != 0 and "not a regular file (a FIFO)" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
