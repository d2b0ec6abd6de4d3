"""MDS (MosaicML Streaming): the layout decoded independently of recordkit's reader, following
MosaicML's format (shard = uint32 count, uint32 offsets, config JSON, samples; a sample = uint32
sizes of the variable columns, then the columns in name order; dynamic-shape ndarray =
[ndim << 2 | shape dtype][shape][values]); bad shards as located errors. (The real
``streaming`` library: tools/bridge/mds_check.py.)"""
import json
import os

import numpy as np
import pytest

from bridge_corpus import STREAMS, cat_records, cli, make_ctf
from recordkit import StreamSpec
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.mds import MDSReader, MDSWriter


def decode_ndarray(blob: bytes, dtype: str) -> np.ndarray:
    head = blob[0]
    ndim, code = head >> 2, head & 3
    width = 1 << code
    shape = np.frombuffer(blob, f"<u{width}", ndim, 1)
    return np.frombuffer(blob[1 + ndim * width:], dtype).reshape(tuple(int(x) for x in shape))


def decode_shard(path, info):
    data = open(path, "rb").read()
    n = int(np.frombuffer(data, "<u4", 1, 0)[0])
    offs = np.frombuffer(data, "<u4", n + 1, 4)
    config = json.loads(data[4 + 4 * (n + 1):int(offs[0])])
    assert config == {k: info[k] for k in config}  # the shard carries the index's config
    names, encs, sizes = info["column_names"], info["column_encodings"], info["column_sizes"]
    samples = []
    for k in range(n):
        a, b = int(offs[k]), int(offs[k + 1])
        nvar = sum(s is None for s in sizes)
        var = np.frombuffer(data, "<u4", nvar, a).tolist()
        pos = a + 4 * nvar
        sample = {}
        for name, enc, size in zip(names, encs, sizes):
            size = size if size is not None else var.pop(0)
            blob = data[pos:pos + size]
            sample[name] = (int(np.frombuffer(blob, "<u8")[0]) if enc == "uint64"
                            else decode_ndarray(blob, enc.split(":")[1]))
            pos += size
        assert pos == b
        samples.append(sample)
    return samples


def test_the_layout_is_mosaicmls(tmp_path, capsys):
    corpus = make_ctf(tmp_path / "c.ctf")
    out = tmp_path / "mds"
    assert cli(capsys, "convert", corpus, out, "--to", "mds", *STREAMS, "--shard-size", "4000")[0] == 0
    index = json.loads((out / "index.json").read_text())
    assert index["version"] == 2 and len(index["shards"]) > 1
    info = index["shards"][0]
    assert info["column_names"] == ["feat", "key", "lab.indices", "lab.offsets", "lab.values"]
    assert info["column_encodings"] == ["ndarray:float32", "uint64", "ndarray:int32", "ndarray:int64",
                                        "ndarray:float32"]
    assert info["column_sizes"] == [None, 8, None, None, None]
    assert info["format"] == "mds" and info["compression"] is None and info["zip_data"] is None
    samples = []
    for info in index["shards"]:
        assert info["raw_data"]["bytes"] == os.path.getsize(out / info["raw_data"]["basename"])
        got = decode_shard(out / info["raw_data"]["basename"], info)
        assert len(got) == info["samples"]
        samples += got
    want = cat_records(capsys, corpus, *STREAMS)
    assert [s["key"] for s in samples] == [r["key"] for r in want]
    for s, r in zip(samples, want):
        np.testing.assert_array_equal(s["feat"], np.array(r["feat"], np.float32).reshape(-1, 4))
        off = s["lab.offsets"]
        assert [{"indices": s["lab.indices"][a:b].tolist(), "values": s["lab.values"][a:b].tolist()}
                for a, b in zip(off[:-1], off[1:])] == [
            {"indices": x["indices"], "values": np.float32(x["values"]).tolist()} for x in r["lab"]]
    assert index["recordkit"]["streams"][0]["alias"] == "F"


def test_checksums_put_sha1_into_the_index(tmp_path, capsys):
    import hashlib
    corpus = make_ctf(tmp_path / "c.ctf", n=10)
    out = tmp_path / "mds"
    assert cli(capsys, "convert", corpus, out, "--to", "mds", *STREAMS, "--checksum")[0] == 0
    info = json.loads((out / "index.json").read_text())["shards"][0]
    assert info["hashes"] == ["sha1"]
    data = (out / info["raw_data"]["basename"]).read_bytes()
    assert info["raw_data"]["hashes"]["sha1"] == hashlib.sha1(data).hexdigest()


def _small(tmp_path):
    from recordkit.formats.ctf import CTFReader
    src = tmp_path / "s.ctf"
    src.write_text("1 |a 1 2 |b 0:1\n2 |a 3 4\n3 |a 5 6 |b 1:2 1:3\n")
    streams = [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 4)]
    out = tmp_path / "m"
    with MDSWriter(str(out), streams) as w:
        for c in CTFReader(str(src), streams).iter_chunks():
            w.write_chunk(c)
    return out, out / "shard.00000.mds"


def test_truncated_or_missing_shards_and_bad_index_are_located_errors(tmp_path):
    out, shard = _small(tmp_path)
    good = shard.read_bytes()
    for cut in range(0, len(good), 7):
        shard.write_bytes(good[:cut])
        with pytest.raises(FormatError) as e:
            MDSReader(str(out)).load_chunk(0)
        assert e.value.path == str(shard)
    shard.unlink()
    with pytest.raises(FormatError, match="missing"):
        MDSReader(str(out))
    (out / "index.json").write_text('{"version": 3, "shards": []}')
    with pytest.raises(FormatError, match="version"):
        MDSReader(str(out))


def test_random_damage_gives_only_located_errors(tmp_path):
    out, shard = _small(tmp_path)
    good = shard.read_bytes()
    rng = np.random.default_rng(9)
    for _ in range(400):
        data = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
        shard.write_bytes(bytes(data))
        try:
            MDSReader(str(out)).load_chunk(0)
        except RecordkitError as e:
            assert str(shard) in str(e)


def test_the_column_wise_path_and_the_sample_path_give_the_same_chunks(tmp_path, capsys, monkeypatch):
    corpus = make_ctf(tmp_path / "c.ctf")
    out = tmp_path / "mds"
    assert cli(capsys, "convert", corpus, out, "--to", "mds", *STREAMS, "--shard-size", "3000")[0] == 0
    r = MDSReader(str(out))
    fast = [r.load_chunk(c.id) for c in r.chunks]
    monkeypatch.setattr(MDSReader, "_load_fast", lambda self, *a: None)
    slow = [r.load_chunk(c.id) for c in r.chunks]
    for a, b in zip(fast, slow):
        assert a.keys.tolist() == b.keys.tolist() and a.lengths.tolist() == b.lengths.tolist()
        for name in ("feat", "lab"):
            ca, cb = a.columns[name], b.columns[name]
            np.testing.assert_array_equal(ca.values, cb.values)
            np.testing.assert_array_equal(ca.seq_offsets, cb.seq_offsets)
            if name == "lab":
                np.testing.assert_array_equal(ca.indices, cb.indices)
                np.testing.assert_array_equal(ca.indptr, cb.indptr)


def _reference_samples(n, columns, keys, key_pos):
    """The per-sequence encoder the vectorized one replaced, kept as the reference."""
    import struct

    def _shape_head(shape):
        top = max(shape) if shape else 0
        code, dt = (0, "<u1") if top < 256 else (1, "<u2") if top < 65536 else (2, "<u4") if top < 1 << 32 else (3, "<u8")
        return bytes([(len(shape) << 2) | code]) + np.array(shape, dtype=dt).tobytes()

    encoded = []
    for src, bounds, lens, dim in columns:
        raw = memoryview(np.ascontiguousarray(src).view(np.uint8))
        b = (np.asarray(bounds) * src.dtype.itemsize).tolist()
        shapes = np.asarray(lens).tolist()
        encoded.append([_shape_head((k,) if dim is None else (k, dim)) + bytes(raw[b[i]:b[i + 1]])
                        for i, k in enumerate(shapes)])
    key_bytes = keys.tobytes()
    head = struct.Struct(f"<{len(encoded)}I")
    out = []
    for i in range(n):
        parts = [e[i] for e in encoded]
        cols = parts[:key_pos] + [key_bytes[8 * i:8 * i + 8]] + parts[key_pos:]
        out.append(head.pack(*map(len, parts)) + b"".join(cols))
    return out


@pytest.mark.parametrize("dim,first", [(3, [0, 1, 2, 0, 5]), (300, [1, 0, 2]), (70000, [1, 2]), (None, [0, 3, 255, 256, 70000])])
def test_the_vectorized_sample_encoder_writes_the_bytes_the_per_sequence_one_did(dim, first):
    from recordkit.formats.mds.writer import _encode_samples
    rng = np.random.default_rng(len(first))
    n = len(first)
    per = np.array(first, dtype=np.int64) * (1 if dim is None else dim)
    bounds = np.concatenate([[0], np.cumsum(per)])
    a = rng.random(int(bounds[-1]), dtype=np.float32)
    b = rng.integers(0, 1 << 30, int(bounds[-1])).astype("<i4")
    c = rng.random(int(bounds[-1])).astype("<f8")  # float64 values
    columns = [(a, bounds, np.array(first), dim), (b, bounds, np.array(first), dim), (c, bounds, np.array(first), dim)]
    keys = rng.integers(0, 1 << 62, n).astype("<u8")
    for key_pos in range(4):
        block, sizes = _encode_samples(n, columns, keys, key_pos)
        ref = _reference_samples(n, columns, keys, key_pos)
        assert sizes.tolist() == [len(r) for r in ref]
        assert block.tobytes() == b"".join(ref)
