"""TFRecord: recordkit's files read by the ``tfrecord`` package (every value compared with
``recordkit cat``) and parsed by protobuf as the same messages protobuf itself builds; files
written by the ``tfrecord`` package read by recordkit; CRC framing; records as tf.train.Example;
bad input as located errors. (TensorFlow itself: tools/bridge/tf_check.py.)"""
import json
import os

import numpy as np
import pytest

from bridge_corpus import STREAMS, cat_records, cli, make_ctf
from recordkit import StreamSpec
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.tfrecord import TFRecordReader, TFRecordWriter, framing, schema

tfr = pytest.importorskip("tfrecord")


@pytest.fixture
def converted(tmp_path, capsys):
    corpus = make_ctf(tmp_path / "c.ctf")
    out = tmp_path / "tfr"
    assert cli(capsys, "convert", corpus, out, "--to", "tfrecord", *STREAMS, "--parts", "3")[0] == 0
    return corpus, out


def parts(out):
    return sorted(str(out / n) for n in os.listdir(out) if n.endswith(".tfrecord"))


def test_the_tfrecord_package_reads_every_value_that_recordkit_cat_prints(converted, capsys):
    corpus, out = converted
    want = cat_records(capsys, corpus, *STREAMS)
    got = []
    for p in parts(out):
        got += list(tfr.reader.sequence_loader(p, None, {"key": "int"},
                                               {"feat": "float", "lab.indices": "int", "lab.values": "float"}))
    assert [int(np.int64(c["key"][0]).view(np.uint64)) for c, _ in got] == [r["key"] for r in want]
    for (ctx, fl), r in zip(got, want):
        np.testing.assert_array_equal(np.array(fl["feat"]).reshape(-1, 4),
                                      np.array(r["feat"], dtype=np.float32).reshape(-1, 4))
        assert len(fl["lab.indices"]) == len(fl["lab.values"]) == len(r["lab"])
        for ind, val, x in zip(fl["lab.indices"], fl["lab.values"], r["lab"]):
            assert ind.tolist() == x["indices"] and val.tolist() == np.float32(x["values"]).tolist()


def _message_for(seq_key, feat, lab_rows, meta=None):
    """The SequenceExample built with protobuf's own API."""
    m = schema.SequenceExample()
    m.context.feature["key"].int64_list.value.append(int(np.uint64(seq_key).view(np.int64)))
    if meta is not None:
        m.context.feature["__recordkit__"].bytes_list.value.append(meta)
    fl = m.feature_lists.feature_list
    for row in feat:
        fl["feat"].feature.add().float_list.value.extend(row.tolist())
    fl["lab.indices"].SetInParent()
    fl["lab.values"].SetInParent()
    for ind, val in lab_rows:
        fl["lab.indices"].feature.add().int64_list.value.extend(ind)
        fl["lab.values"].feature.add().float_list.value.extend(val)
    return m


def test_records_parse_to_the_messages_protobuf_builds(converted):
    corpus, out = converted
    from recordkit.formats.ctf import CTFReader
    seqs = list(CTFReader(corpus, [StreamSpec("feat", "dense", 4, "F"), StreamSpec("lab", "sparse", 50, "L")]))
    records = []
    for p in parts(out):
        data = open(p, "rb").read()
        offs, lens = framing.scan(data, p)
        first = True
        for o, n in zip(offs, lens):
            m = schema.SequenceExample()
            m.ParseFromString(data[o:o + n])
            records.append((m, first))
            first = False
    assert len(records) == len(seqs)
    for (m, first), s in zip(records, seqs):
        lab = s["lab"]
        rows = [(lab.indices[a:b].tolist(), lab.data[a:b].tolist()) for a, b in zip(lab.indptr[:-1], lab.indptr[1:])]
        meta = m.context.feature["__recordkit__"].bytes_list.value[0] if first else None
        assert m == _message_for(s.key, s["feat"], rows, meta)
        # and protobuf's own bytes for that message parse back to it (no unknown fields left)
        again = schema.SequenceExample()
        again.ParseFromString(m.SerializeToString())
        assert again == m
    meta = json.loads(records[0][0].context.feature["__recordkit__"].bytes_list.value[0])
    assert meta["streams"][1] == {"name": "lab", "alias": "L", "format": "sparse", "dim": 50, "precision": "float"}


def test_files_written_by_the_tfrecord_package_read_with_declared_streams(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "data.tfrecord"
    w = tfr.TFRecordWriter(str(path))
    expect = []
    for i in range(6):
        n = int(rng.integers(1, 4))
        x = rng.normal(size=(n, 3)).astype(np.float32)
        ids = [rng.integers(0, 20, size=int(rng.integers(0, 3))).tolist() for _ in range(n)]
        w.write({"key": (1000 + i, "int")},
                {"x": ([row.tolist() for row in x], "float"),
                 "w.indices": (ids, "int"), "w.values": ([[1.0] * len(a) for a in ids], "float")})
        expect.append((1000 + i, x, ids))
    w.close()
    with pytest.raises(FormatError, match="no stream description"):
        TFRecordReader(str(path))
    r = TFRecordReader(str(path), [StreamSpec("x", "dense", 3), StreamSpec("w", "sparse", 20)])
    seqs = list(r)
    assert [s.key for s in seqs] == [k for k, _, _ in expect]
    for s, (_, x, ids) in zip(seqs, expect):
        np.testing.assert_array_equal(s["x"], x)
        assert [s["w"].indices[a:b].tolist() for a, b in zip(s["w"].indptr[:-1], s["w"].indptr[1:])] == ids


def test_framing_matches_tensorflows_crc32c_and_mask():
    # CRC-32C("123456789") = 0xE3069283; TensorFlow's mask: rotate right 15, add 0xa282ead8
    from crc32c import crc32c
    c = crc32c(b"123456789")
    assert c == 0xE3069283
    assert framing.masked_crc(b"123456789") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF
    frame = framing.FrameEncoder().frame(b"abc")
    assert frame[:8] == (3).to_bytes(8, "little") and frame[12:15] == b"abc" and len(frame) == 19
    # the tfrecord package's own framing agrees with ours on a whole file
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".tfrecord") as f:
        w = tfr.TFRecordWriter(f.name)
        w.write({"a": (1, "int")})
        w.close()
        data = open(f.name, "rb").read()
    offs, lens = framing.scan(data, "x")
    assert framing.FrameEncoder().frame(data[offs[0]:offs[0] + lens[0]]) == data


def test_records_convert_to_examples_with_their_kinds(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(tmp_path / "of")) as w:
        w.write({"img": b"\xff\xd8\xff\xe0 not really decoded", "label": np.array([3], np.int32),
                 "emb": np.array([0.5, 0.25], np.float64), "f": np.array([1.5], np.float32)})
    out = tmp_path / "tfr"
    code, _, err = cli(capsys, "convert", tmp_path / "of", out, "--to", "tfrecord")
    assert code == 0 and "narrowed" in err
    got = list(tfr.reader.tfrecord_loader(parts(out)[0], None, {"img": "byte", "label": "int", "emb": "float",
                                                                "f": "float"}))
    assert bytes(got[0]["img"]) == b"\xff\xd8\xff\xe0 not really decoded"
    assert got[0]["label"].tolist() == [3] and got[0]["emb"].tolist() == [0.5, 0.25] and got[0]["f"].tolist() == [1.5]


def _small(tmp_path):
    out = tmp_path / "t"
    from recordkit.formats.ctf import CTFReader
    src = tmp_path / "s.ctf"
    src.write_text("1 |a 1 2 |b 0:1\n2 |a 3 4\n3 |a 5 6 |b 1:2 1:3\n")
    streams = [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 4)]
    with TFRecordWriter(str(out), streams) as w:
        for c in CTFReader(str(src), streams).iter_chunks():
            w.write_chunk(c)
    return out, out / "part-00000.tfrecord"


def test_wrong_crcs_and_truncation_are_located_errors(tmp_path):
    out, part = _small(tmp_path)
    good = part.read_bytes()
    first_len = int.from_bytes(good[:8], "little")
    second = 12 + first_len + 4
    cases = [(second + 12 + 3, "data CRC mismatch", second, "record 1"),
             (second + 1, "length CRC mismatch", second, "record 1"),
             (9, "length CRC mismatch", 0, "record 0"),
             (12 + first_len + 1, "data CRC mismatch", 0, "record 0")]
    for pos, match, offset, record in cases:
        data = bytearray(good)
        data[pos] ^= 0x04
        part.write_bytes(bytes(data))
        with pytest.raises(FormatError, match=match) as e:
            TFRecordReader(str(out)).load_chunk(0)
        assert (e.value.offset, e.value.record, e.value.path) == (offset, record, str(part))
    for cut in range(1, len(good)):
        part.write_bytes(good[:cut])
        with pytest.raises(FormatError) as e:
            TFRecordReader(str(out)).load_chunk(0)
        assert e.value.path == str(part) and e.value.offset is not None


def test_a_record_that_is_not_a_sequence_example_or_lacks_a_feature_list(tmp_path):
    out, part = _small(tmp_path)
    enc = framing.FrameEncoder()
    ex = schema.SequenceExample()
    ex.context.feature["key"].int64_list.value.append(1)
    ex.feature_lists.feature_list["a"].feature.add().float_list.value.extend([1.0, 2.0])
    part.write_bytes(enc.frame(ex.SerializeToString()))
    import json as _json
    desc = _json.loads((out / "__recordkit__.json").read_text())
    desc["shards"][0]["sequences"] = 1
    (out / "__recordkit__.json").write_text(_json.dumps(desc))
    with pytest.raises(FormatError, match="no feature list 'b.indices'") as e:
        TFRecordReader(str(out)).load_chunk(0)
    assert e.value.record == "record 0" and e.value.offset == 0
    part.write_bytes(enc.frame(b"\xff\xff\xff"))
    with pytest.raises(FormatError, match="not a tf.train.SequenceExample"):
        TFRecordReader(str(out)).load_chunk(0)
    ex.feature_lists.feature_list["a"].feature.add().float_list.value.extend([1.0])
    ex.feature_lists.feature_list["b.indices"].SetInParent()
    ex.feature_lists.feature_list["b.values"].SetInParent()
    part.write_bytes(enc.frame(ex.SerializeToString()))
    with pytest.raises(FormatError, match="sample 1: 1 values, expected dim 2"):
        TFRecordReader(str(out)).load_chunk(0)


def test_random_damage_gives_only_located_errors(tmp_path):
    out, part = _small(tmp_path)
    good = part.read_bytes()
    rng = np.random.default_rng(5)
    for verify in (True, False):
        for _ in range(300):
            data = bytearray(good)
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
            part.write_bytes(bytes(data))
            try:
                TFRecordReader(str(out), verify_crc=verify).load_chunk(0)
            except RecordkitError as e:
                assert str(part) in str(e)


def test_the_column_wise_decoder_and_protobuf_give_the_same_chunks(converted, monkeypatch):
    from recordkit.formats.tfrecord import fastread
    _, out = converted
    fast = [TFRecordReader(str(out)).load_chunk(i) for i in range(3)]

    def refuse(*a, **k):
        raise fastread.NotCanonical

    monkeypatch.setattr(TFRecordReader, "_load_fast", refuse)
    slow = [TFRecordReader(str(out)).load_chunk(i) for i in range(3)]
    for a, b in zip(fast, slow):
        assert a.keys.tolist() == b.keys.tolist() and a.lengths.tolist() == b.lengths.tolist()
        for name in ("feat", "lab"):
            ca, cb = a.columns[name], b.columns[name]
            np.testing.assert_array_equal(ca.values, cb.values)
            np.testing.assert_array_equal(ca.seq_offsets, cb.seq_offsets)
            if name == "lab":
                np.testing.assert_array_equal(ca.indices, cb.indices)
                np.testing.assert_array_equal(ca.indptr, cb.indptr)


def _chunks_both_ways(out, monkeypatch):
    """Chunk 0 through the compiled walker and through protobuf (the walker refused)."""
    from recordkit.formats.tfrecord import fastread
    reader = TFRecordReader(str(out))
    part_bytes = (out / "part-00000.tfrecord").read_bytes()
    offs, lens = framing.scan(part_bytes, str(out), verify=True, first_record=0)
    fast = reader._load_fast(0, part_bytes, offs, lens, 0)   # raises NotCanonical if it would fall back
    with monkeypatch.context() as m:
        m.setattr(TFRecordReader, "_load_fast", lambda *a, **k: (_ for _ in ()).throw(fastread.NotCanonical()))
        slow = TFRecordReader(str(out)).load_chunk(0)
    return fast, slow


def test_the_compiled_walker_matches_protobuf_on_empty_lists_big_indices_and_odd_keys(tmp_path, monkeypatch):
    """Zero-sample sequences, samples with no non-zeros, indices of 1-5 varint bytes, keys above 2**63
    and a record without a key: the compiled walker's chunk equals protobuf's."""
    out, part = _small(tmp_path)
    enc = framing.FrameEncoder()
    rng = np.random.default_rng(3)
    frames = []
    for r in range(40):
        m = schema.SequenceExample()
        if r != 7:
            m.context.feature["key"].int64_list.value.append(int(rng.integers(-2**62, 2**62)) if r % 3 else -5)
        n = int(rng.integers(0, 4))
        fa = m.feature_lists.feature_list["a"]
        fi = m.feature_lists.feature_list["b.indices"]
        fv = m.feature_lists.feature_list["b.values"]
        for _ in range(n):
            fa.feature.add().float_list.value.extend(rng.normal(size=2).astype(np.float32).tolist())
            k = int(rng.integers(0, 3))
            idx = sorted(int(x) for x in rng.choice([0, 3, 200, 70000, 2**31 - 2], size=k, replace=False))
            fi.feature.add().int64_list.value.extend(idx)
            fv.feature.add().float_list.value.extend(rng.normal(size=k).astype(np.float32).tolist())
        frames.append(enc.frame(m.SerializeToString()))
    part.write_bytes(b"".join(frames))
    meta = out / "__recordkit__.json"
    desc = json.loads(meta.read_text())
    desc["streams"][1]["dim"] = 2**31 - 1
    desc["sequences"] = desc["shards"][0]["sequences"] = 40
    meta.write_text(json.dumps(desc))
    fast, slow = _chunks_both_ways(out, monkeypatch)
    assert fast.keys.tolist() == slow.keys.tolist() and fast.lengths.tolist() == slow.lengths.tolist()
    for name in ("a", "b"):
        ca, cb = fast.columns[name], slow.columns[name]
        np.testing.assert_array_equal(ca.values, cb.values)
        np.testing.assert_array_equal(ca.seq_offsets, cb.seq_offsets)
    np.testing.assert_array_equal(fast.columns["b"].indices, slow.columns["b"].indices)
    np.testing.assert_array_equal(fast.columns["b"].indptr, slow.columns["b"].indptr)


def test_the_compiled_walker_leaves_repeated_or_unpacked_lists_to_protobuf():
    """A feature list named twice (protobuf merges), unpacked values, a missing list: not canonical."""
    from recordkit.formats.tfrecord import _kernel
    m = schema.SequenceExample()
    m.feature_lists.feature_list["a"].feature.add().float_list.value.extend([1.0, 2.0])
    good = m.SerializeToString()
    entry = good[2:]                         # feature_lists body: the one map entry
    twice = b"\x12" + bytes([2 * len(entry)]) + entry + entry
    unpacked = b"\x12\x14\x0a\x12\x0a\x01a\x12\x0d\x0a\x0b\x12\x09\x0d" + b"\0\0\x80\x3f" + b"\x0d" + b"\0\0\0\x40"

    def walk(record: bytes, name=b"a"):
        data = np.frombuffer(record, dtype=np.uint8)
        got = _kernel.sequence_examples(data, np.zeros(1, np.int64), np.array([len(record)], np.int64),
                                        [name], [0x12], b"key")
        return None if got is None else (got[2][:, 0], got[3][0], got[4][0])
    counts, starts, lengths = walk(good)
    assert counts.tolist() == [1] and lengths.tolist() == [8]
    assert np.frombuffer(good[starts[0]:starts[0] + 8], "<f4").tolist() == [1.0, 2.0]
    assert walk(twice) is None
    assert walk(unpacked) is None
    assert walk(good, b"b") is None


# -- the column-wise NumPy encoders the compiled ones replaced, kept as the references they are
#    compared with (header_rows and const were wire.py's)

def header_rows(parts, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate per-row ragged pieces ``[(matrix, lens), ...]``: (flat bytes, per-row lengths).

    The pieces' matrices side by side, masked to each piece's valid bytes, read row-major,
    are exactly the rows' bytes one after another."""
    mats = np.concatenate([m for m, _ in parts], axis=1)
    mask = np.concatenate([np.arange(m.shape[1]) < lens[:, None] for m, lens in parts], axis=1)
    total = np.zeros(n, dtype=np.int64)
    for _, lens in parts:
        total += lens
    return mats[mask], total


def const(byte: int, n: int, present=None) -> tuple[np.ndarray, np.ndarray]:
    """A one-byte piece (a tag), on every row or where ``present``."""
    mat = np.full((n, 1), byte, dtype=np.uint8)
    lens = np.ones(n, dtype=np.int64) if present is None else present.astype(np.int64)
    return mat, lens


def _per_sample_reference(pay_flat, pay_lens, list_tag, seq_offsets):
    """The column-wise NumPy encoder the compiled one replaced: headers as varint columns, laid out
    with the payloads by a boolean mask."""
    from recordkit.formats.tfrecord.wire import varint_matrix
    n = len(pay_lens)
    present = pay_lens > 0
    q_mat, q_len = varint_matrix(pay_lens)
    q_len = np.where(present, q_len, 0)
    inner = np.where(present, 1 + q_len + pay_lens, 0)
    i_mat, i_len = varint_matrix(inner)
    feature = 1 + i_len + inner
    f_mat, f_len = varint_matrix(feature)
    hdr, hlen = header_rows([const(0x0A, n), (f_mat, f_len), const(list_tag, n), (i_mat, i_len),
                             const(0x0A, n, present), (q_mat, q_len)], n)
    sizes = hlen + pay_lens
    off = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=off[1:])
    out = np.empty(int(off[-1]), dtype=np.uint8)
    hoff = np.zeros(len(hlen) + 1, dtype=np.int64)
    np.cumsum(hlen, out=hoff[1:])
    is_hdr = np.zeros(len(out), dtype=bool)
    is_hdr[np.repeat(off[:-1] - hoff[:-1], hlen) + np.arange(int(hoff[-1]), dtype=np.int64)] = True
    out[is_hdr] = hdr
    out[~is_hdr] = pay_flat
    return out, off[np.asarray(seq_offsets, dtype=np.int64)]


def _sparse_lists_reference(indices, values, indptr, seq_offsets):
    """Both feature lists of a sparse column built from NumPy columns: the indices' varints (varint
    matrix, compacted) and the per-sample Feature messages (_per_sample_reference)."""
    from recordkit.formats.tfrecord.wire import compact, varint_matrix
    idx = np.asarray(indices, dtype=np.int64)
    mat, v_len = varint_matrix(idx)
    flat = compact(mat, v_len)
    cum = np.zeros(len(v_len) + 1, dtype=np.int64)
    np.cumsum(v_len, out=cum[1:])
    ind = _per_sample_reference(flat, cum[indptr[1:]] - cum[indptr[:-1]], 0x1A, seq_offsets)
    vals = np.ascontiguousarray(values, dtype="<f4").view(np.uint8)
    return ind, _per_sample_reference(vals, 4 * np.diff(indptr), 0x12, seq_offsets)


@pytest.mark.parametrize("nnz_per_sample", [[0, 0, 0], [1, 127, 128, 0, 300], [40000, 0, 3], [], [1] * 50])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_the_compiled_sparse_lists_write_the_bytes_of_the_column_wise_encoder(nnz_per_sample, index_dtype):
    from recordkit.formats.tfrecord import wire
    rng = np.random.default_rng(len(nnz_per_sample))
    counts = np.array(nnz_per_sample, dtype=np.int64)
    indptr = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    top = np.iinfo(index_dtype).max
    indices = rng.integers(0, top, int(indptr[-1]), dtype=index_dtype)
    indices[:3] = [0, 127, 128][:len(indices[:3])]
    values = rng.normal(size=int(indptr[-1])).astype(np.float32)
    seq = np.array(sorted({0, len(counts) // 2, len(counts)}), dtype=np.int64)
    (ib, io), (vb, vo) = wire.sparse_feature_lists(indices, values, indptr, seq)
    (rib, rio), (rvb, rvo) = _sparse_lists_reference(indices, values, indptr, seq)
    assert ib.tobytes() == rib.tobytes() and io.tolist() == rio.tolist()
    assert vb.tobytes() == rvb.tobytes() and vo.tolist() == rvo.tolist()


def test_the_compiled_sparse_lists_refuse_inconsistent_columns():
    from recordkit.formats.tfrecord import _kernel
    i64 = lambda *v: np.array(v, dtype=np.int64)
    vals = np.zeros(8, np.uint8)
    with pytest.raises(ValueError, match="negative"):
        _kernel.sparse_lists(i64(3, -1), vals, i64(0, 2), i64(0, 1))
    with pytest.raises(ValueError, match="value bytes"):
        _kernel.sparse_lists(i64(3, 1), vals[:5], i64(0, 2), i64(0, 1))
    with pytest.raises(ValueError, match="indptr runs"):
        _kernel.sparse_lists(i64(3, 1), vals, i64(0, 5), i64(0, 1))
    with pytest.raises(ValueError, match="indptr decreases"):
        _kernel.sparse_lists(i64(3, 1), vals, i64(0, 2, 1, 2), i64(0, 3))
    with pytest.raises(ValueError, match="sequence offsets run"):
        _kernel.sparse_lists(i64(3, 1), vals, i64(0, 2), i64(0, 4))


@pytest.mark.parametrize("table", [False, True])
def test_the_compiled_crc32c_equals_the_crc32c_package(table):
    from crc32c import crc32c
    from recordkit.formats.tfrecord import _kernel
    rng = np.random.default_rng(11)
    try:
        _kernel.use_table_crc(table)
        assert _kernel.crc32c(np.frombuffer(b"123456789", np.uint8)) == 0xE3069283
        for n in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4099]:
            data = rng.integers(0, 256, n, dtype=np.uint8)
            assert _kernel.crc32c(data) == crc32c(data.tobytes()), n
    finally:
        _kernel.use_table_crc(False)


def _framed_one_by_one(keys, bodies):
    """The records framed in Python one by one (the crc32c package's CRCs, the writer's headers)."""
    from recordkit.formats.tfrecord import writer, wire
    enc = framing.FrameEncoder()
    out = []
    for i, key in enumerate(keys):
        kv = wire.varint_bytes(int(key))
        entries = b"".join(writer._entry_head(name, int(off[i + 1] - off[i])) + body[off[i]:off[i + 1]].tobytes()
                           for name, body, off in bodies)
        out.append(enc.frame(writer._context_prefix(len(kv)) + kv + b"\x12" + wire.varint_bytes(len(entries))
                             + entries))
    return b"".join(out)


@pytest.mark.parametrize("table", [False, True])
def test_the_compiled_framing_writes_the_records_framed_one_by_one(table):
    from recordkit.formats.tfrecord import _kernel
    rng = np.random.default_rng(5)
    m = 300
    keys = rng.integers(0, 2 ** 63, m, dtype=np.uint64)
    keys[:4] = [0, 127, 128, 2 ** 64 - 1]
    bodies = []
    for name, most in ((b"x", 40), (b"w.indices", 300), (b"n" * 127, 3)):
        lens = rng.integers(0, most, m)
        lens[::7] = 0  # empty feature lists
        off = np.zeros(m + 1, dtype=np.int64)
        np.cumsum(lens, out=off[1:])
        bodies.append((name, rng.integers(0, 256, int(off[-1]), dtype=np.uint8), off))
    try:
        _kernel.use_table_crc(table)
        got = _kernel.frame_sequence_examples(keys, [n for n, _, _ in bodies], [b for _, b, _ in bodies],
                                              [o for _, _, o in bodies])
    finally:
        _kernel.use_table_crc(False)
    assert got.tobytes() == _framed_one_by_one(keys, bodies)
    offs, lens = framing.scan(got.tobytes(), "x")
    assert len(offs) == m
    assert _kernel.frame_sequence_examples(keys[:0], [b"x"], [np.zeros(0, np.uint8)], [np.zeros(1, np.int64)]).size == 0
    with pytest.raises(ValueError, match="not within"):
        _kernel.frame_sequence_examples(keys[:2], [b"x"], [np.zeros(3, np.uint8)], [np.array([0, 2, 9])])
    with pytest.raises(ValueError, match="offsets for"):
        _kernel.frame_sequence_examples(keys[:2], [b"x"], [np.zeros(3, np.uint8)], [np.array([0, 2])])
    with pytest.raises(ValueError, match="1 to 127 bytes"):
        _kernel.frame_sequence_examples(keys[:1], [b"x" * 128], [np.zeros(3, np.uint8)], [np.array([0, 2])])


# -- files larger than a chunk: record ranges -------------------------------------------------------
def _columns_of(chunks):
    keys = np.concatenate([c.keys for c in chunks])
    feat = np.concatenate([c.columns["feat"].values for c in chunks])
    lab = np.concatenate([c.columns["lab"].values for c in chunks])
    return keys, feat, lab


def test_a_file_larger_than_the_chunk_size_is_read_as_runs_of_whole_records(converted):
    _, out = converted
    whole = TFRecordReader(str(out))
    cut = TFRecordReader(str(out), chunk_size=700)
    assert len(whole.chunks) == 3 and len(cut.chunks) > 3 * 3
    assert sum(c.num_sequences for c in cut.chunks) == sum(c.num_sequences for c in whole.chunks)
    sizes = [os.path.getsize(p) for p in parts(out)]
    assert all(c.size < 700 + max(sizes) // 4 for c in cut.chunks)  # a run ends at the record that crosses 700 B
    a = _columns_of([whole.load_chunk(c.id) for c in whole.chunks])
    b = _columns_of([cut.load_chunk(c.id) for c in cut.chunks])
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_a_run_of_records_reads_only_its_bytes_and_a_damaged_one_is_located_in_its_file(converted, monkeypatch):
    _, out = converted
    part = parts(out)[1]
    reads = []
    from recordkit.storage.pool import SourcePool
    whole_reads = SourcePool.read_whole
    monkeypatch.setattr(SourcePool, "read_whole", lambda self, p: reads.append(p) or whole_reads(self, p))
    cut = TFRecordReader(str(out), chunk_size=700)
    at_open = len(reads)
    mine = [c for c in cut.chunks if cut._ranges[c.id][0] == 1]
    assert len(mine) > 2
    cut.load_chunk(mine[1].id)
    assert len(reads) == at_open  # the run's bytes only: the whole file is not read again
    data = bytearray(open(part, "rb").read())
    third = mine[2]
    data[third.offset + 12 + 3] ^= 0x04  # inside the first record of the third run: its data CRC
    open(part, "wb").write(bytes(data))
    with pytest.raises(FormatError, match="data CRC mismatch") as e:
        cut.load_chunk(third.id)
    assert (e.value.path, e.value.offset, e.value.record) == (part, third.offset, f"record {cut._ranges[third.id][3]}")
    with pytest.raises(FormatError, match="data CRC mismatch") as w:
        TFRecordReader(str(out)).load_chunk(1)
    assert (w.value.offset, w.value.record) == (e.value.offset, e.value.record)  # where the whole-file read says


def test_a_minibatch_source_over_record_runs_delivers_every_sequence_once(converted):
    from recordkit.engine.source import MinibatchSource
    _, out = converted
    cut = TFRecordReader(str(out), chunk_size=700)
    src = MinibatchSource(cut, randomize=True, window=4, max_sweeps=1, seed=1)
    seen = []
    while (mb := src.next_minibatch(37)) is not None:
        seen += mb.keys.tolist()
    src.close()
    whole = TFRecordReader(str(out))
    want = np.concatenate([whole.load_chunk(c.id).keys for c in whole.chunks]).tolist()
    assert sorted(seen) == sorted(want) and len(seen) == len(want)
