"""The optional checksummed index: NAME.rkcrc sidecars written by writers and the CLI, verified on read."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from helpers import dense, sparse
from recordkit import FormatError
from recordkit.storage.atomic import AtomicFile
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader, CTFWriter
from recordkit.formats.ofrecord.reader import OFRecordReader
from recordkit.formats.ofrecord.writer import OFRecordWriter
from recordkit.storage import checksum, open_source, sidecars
from recordkit.storage.atomic import write_sidecar
from recordkit.cli.main import main

STREAMS = [dense("x", 4), sparse("y", 50)]


def write_cbf(path, n=300, seed=0, **kw):
    rng = np.random.default_rng(seed)
    import scipy.sparse as sp
    with CBFWriter(path, STREAMS, chunk_size=4096, **kw) as w:
        for k in range(n):
            w.write({"x": rng.normal(size=(3, 4)).astype(np.float32),
                     "y": sp.random(2, 50, density=0.1, random_state=k, dtype=np.float32, format="csr")})
    return path


def everything(reader):
    """Comparable form: (key, {stream: nested lists})."""
    return [(s.key, {k: (v.toarray() if hasattr(v, "toarray") else v).tolist() for k, v in s.data.items()})
            for s in reader]


def flip(path, offset):
    data = bytearray(open(path, "rb").read())
    data[offset] ^= 0x40
    open(path, "wb").write(bytes(data))


def test_writer_with_checksums_writes_a_sidecar_that_matches_the_file(tmp_path):
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    side = tmp_path / "a.cbf.rkcrc"
    assert side.exists()
    table = sidecars.verify(str(p))
    assert table.file_size == p.stat().st_size
    assert len(table.crcs) == -(-table.file_size // checksum.DEFAULT_BLOCK_SIZE)
    assert everything(CBFReader(p)) == everything(CBFReader(write_cbf(tmp_path / "b.cbf")))


def test_a_flipped_byte_in_a_chunk_is_an_error_naming_file_block_and_offset(tmp_path, monkeypatch):
    monkeypatch.setattr(checksum, "DEFAULT_BLOCK_SIZE", 1024)
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    r = CBFReader(p)
    target = r.chunks[3].offset + 10
    r.close()
    flip(p, target)
    r = CBFReader(p)  # header and table are intact: opening works
    r.load_chunk(0)
    with pytest.raises(FormatError) as e:
        r.load_chunk(3)
    block = target // 1024
    assert str(p) in str(e.value) and f"block {block}" in str(e.value)
    assert e.value.offset == block * 1024
    assert f"bytes {block * 1024}..{block * 1024 + 1024}" in str(e.value)


def test_without_a_sidecar_the_same_damage_goes_unnoticed_by_design(tmp_path):
    p = write_cbf(tmp_path / "a.cbf")
    r = CBFReader(p)
    target = r.chunks[3].offset + 4 * r.chunks[3].num_sequences + 8  # inside dense values
    r.close()
    flip(p, target)
    CBFReader(p).load_chunk(3)  # a plausible wrong value: exactly what the sidecar is for


@pytest.mark.parametrize("start,length", [(0, 1), (5, 3000), (1023, 2), (1024, 1024), (4000, 10 ** 6), (0, 10 ** 6)])
def test_verified_reads_of_any_range_equal_the_raw_bytes(tmp_path, start, length):
    p = tmp_path / "f.bin"
    p.write_bytes(os.urandom(10_000))
    write_sidecar(str(p), checksum.compute_local(str(p), block_size=1024))
    src = open_source(str(p))
    assert isinstance(src, checksum.VerifiedSource)
    assert src.pread(start, length) == p.read_bytes()[start:start + length]
    src.close()


def test_ctf_ofrecord_and_singa_writers_write_verified_sidecars(tmp_path):
    ctf = tmp_path / "a.ctf"
    with CTFWriter(ctf, STREAMS, checksums=True) as w:
        w.write({"x": np.ones((2, 4), np.float32), "y": np.zeros((1, 50), np.float32)})
    assert sidecars.verify(str(ctf)).file_size == ctf.stat().st_size
    d = tmp_path / "of"
    with OFRecordWriter(d, 2, checksums=True) as w:
        for i in range(10):
            w.write({"v": np.arange(i + 1, dtype=np.float32)})
    parts = sorted(os.listdir(d))
    assert parts == ["part-00000", "part-00000.rkcrc", "part-00001", "part-00001.rkcrc"]
    assert len(list(OFRecordReader(d, batch_size=1, epochs=1))) == 10  # sidecars are not taken for parts
    from recordkit.formats import singa
    store = tmp_path / "s.bin"
    with singa.open(str(store), "create", "kvfile", checksums=True) as s:
        s.write("00000", "abc")
    with singa.open(str(store), "append") as s:  # append keeps a store's sidecar
        s.write("00001", "def")
    assert sidecars.verify(str(store)).file_size == store.stat().st_size
    flip(store, 10)
    with pytest.raises(FormatError, match="checksum mismatch in block 0"):
        with singa.open(str(store), "read", "kvfile") as s:
            list(s)


def test_damaged_ofrecord_part_is_reported_by_the_reader(tmp_path):
    d = tmp_path / "of"
    with OFRecordWriter(d, 1, checksums=True) as w:
        for i in range(50):
            w.write({"v": np.arange(20, dtype=np.float32)})
    flip(d / "part-00000", 200)
    with pytest.raises(FormatError, match=r"part-00000: checksum mismatch"):
        list(OFRecordReader(d, batch_size=1, epochs=1))


def test_a_sidecar_for_another_size_of_file_is_an_error_at_open(tmp_path):
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    with open(p, "ab") as f:
        f.write(b"\0")
    with pytest.raises(FormatError, match="changed after the index was written"):
        CBFReader(p)


@pytest.mark.parametrize("damage", ["truncate", "magic", "crc"])
def test_a_damaged_sidecar_is_an_error_naming_the_sidecar(tmp_path, damage):
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    side = tmp_path / "a.cbf.rkcrc"
    data = bytearray(side.read_bytes())
    if damage == "truncate":
        data = data[:10]
    elif damage == "magic":
        data[0] ^= 1
    else:
        data[-1] ^= 1
    side.write_bytes(bytes(data))
    with pytest.raises(FormatError) as e:
        CBFReader(p)
    assert str(side) in str(e.value)


def test_rewriting_a_file_without_checksums_removes_the_stale_sidecar(tmp_path):
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    write_cbf(p, n=50, seed=1)  # same name, new content, no checksums asked
    assert not (tmp_path / "a.cbf.rkcrc").exists()
    assert len(everything(CBFReader(p))) == 50


def test_crash_while_publishing_leaves_old_data_without_its_sidecar_never_new_data_with_old_sums(tmp_path, monkeypatch):
    p = write_cbf(tmp_path / "a.cbf", checksums=True)
    old = p.read_bytes()
    real_replace = os.replace

    def crash(src, dst):
        if str(dst) == str(p):
            raise KeyboardInterrupt("killed")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        f = AtomicFile(p, checksums=True)
        f.write(b"new content")
        f.commit()
    monkeypatch.setattr(os, "replace", real_replace)
    assert p.read_bytes() == old
    assert len(everything(CBFReader(p))) == 300  # readable; unverified until `checksum create`


def test_cli_create_and_verify(tmp_path, capsys):
    p = write_cbf(tmp_path / "a.cbf")
    d = tmp_path / "of"
    with OFRecordWriter(d, 3) as w:
        for i in range(9):
            w.write({"v": np.arange(3, dtype=np.float32)})
    assert main(["checksum", "verify", str(p)]) == 1
    assert "no checksum index" in capsys.readouterr().err
    assert main(["checksum", "create", str(p), str(d), "--block-size", "512"]) == 0
    out = capsys.readouterr().out
    assert out.count("wrote") == 4
    assert main(["checksum", "verify", str(p), str(d)]) == 0
    assert capsys.readouterr().out.count(": ok (") == 4
    flip(d / "part-00001", 12)
    assert main(["checksum", "verify", str(p), str(d)]) == 1
    captured = capsys.readouterr()
    assert captured.out.count(": ok (") == 3
    assert "part-00001: checksum mismatch in block 0 (bytes 0.." in captured.err


def test_cli_convert_with_checksum_and_cat_reports_damage(tmp_path):
    ctf = tmp_path / "in.ctf"
    ctf.write_text("".join(f"{i} |x {i} 1 2 3\n" for i in range(200)))
    out = tmp_path / "out.cbf"
    assert main(["convert", str(ctf), str(out), "--stream", "x=dense:4", "--checksum"]) == 0
    assert (tmp_path / "out.cbf.rkcrc").exists()
    flip(out, 40)
    r = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "cat", str(out)], capture_output=True, text=True)
    assert r.returncode == 1 and "checksum mismatch in block 0" in r.stderr and str(out) in r.stderr
