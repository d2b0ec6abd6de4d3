"""A keyed OFRecord set and a CTF file with ids are joined by key, not by
position; a value the target cannot hold is a located error (sequence key, sample), never a
traceback; an empty SINGA record is a located FormatError."""
import subprocess
import sys

import numpy as np
import pytest

from recordkit.engine.composite import CompositeDeserializer
from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError, UnrepresentableError
from recordkit.formats.ctf import CTFReader, CTFWriter
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
from recordkit.formats.ofrecord.writer import OFRecordWriter


def keyed_set(d, keys):
    with OFRecordWriter(d, 1) as w:
        for k in keys:
            w.write({"a": np.array([k], np.float32), "key": np.array([k], np.int64)})
    return d


def test_a_keyed_ofrecord_set_and_a_ctf_file_with_ids_join_by_key(tmp_path):
    d = keyed_set(tmp_path / "set", [2, 1, 3])
    (tmp_path / "b.ctf").write_text("1 |b 10\n2 |b 20\n3 |b 30\n")
    c = CompositeDeserializer([OFRecordDeserializer(d, [StreamSpec("a", "dense", 1)]),
                               CTFReader(tmp_path / "b.ctf", [StreamSpec("b", "dense", 1)])])
    assert c.join == "key"
    ch = c.load_chunk(0)
    assert ch.keys.tolist() == [2, 1, 3]
    assert ch.columns["b"].values.ravel().tolist() == [20, 10, 30]  # by position it was [10, 20, 30]


def test_keys_that_do_not_match_are_refused_not_paired(tmp_path):
    d = keyed_set(tmp_path / "set", [2, 1, 4])
    (tmp_path / "b.ctf").write_text("1 |b 10\n2 |b 20\n3 |b 30\n")
    c = CompositeDeserializer([OFRecordDeserializer(d, [StreamSpec("a", "dense", 1)]),
                               CTFReader(tmp_path / "b.ctf", [StreamSpec("b", "dense", 1)])])
    with pytest.raises(FormatError, match=r"no sequence with key\(s\) \[4\]"):
        c.load_chunk(0)


def test_records_without_keys_still_join_by_position(tmp_path):
    d = tmp_path / "set"
    with OFRecordWriter(d, 1) as w:
        for k in range(3):
            w.write({"a": np.array([k], np.float32)})
    (tmp_path / "b.ctf").write_text("7 |b 10\n8 |b 20\n9 |b 30\n")
    c = CompositeDeserializer([OFRecordDeserializer(d, [StreamSpec("a", "dense", 1)]),
                               CTFReader(tmp_path / "b.ctf", [StreamSpec("b", "dense", 1)])])
    assert c.join == "position"


def test_inf_into_ctf_names_the_stream_sequence_and_sample(tmp_path):
    src = tmp_path / "inf.ctf"
    src.write_text("0 |x 1 2\n1 |x 3 4\n5 |x 5 6\n5 |x 7 1e400\n")
    run = lambda *a: subprocess.run([sys.executable, "-m", "recordkit.cli.main", *map(str, a)], capture_output=True,
                                    text=True, timeout=60)
    assert run("convert", src, tmp_path / "inf.cbf", "--stream", "x=dense:2").returncode == 0
    out = run("convert", tmp_path / "inf.cbf", tmp_path / "back.ctf")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert (f"{tmp_path / 'inf.cbf'}: stream 'x', sequence 2 (sequence 2 of chunk 0), sample 1: CTF cannot "
            f"represent inf") in out.stderr  # the input file, then where in it
    assert not (tmp_path / "back.ctf").exists()


def test_the_ctf_writer_locates_nan_in_sparse_and_per_sequence_writes(tmp_path):
    import scipy.sparse as sp
    with pytest.raises(UnrepresentableError, match=r"sequence 7: stream 'x': CTF cannot represent inf or nan"):
        with CTFWriter(tmp_path / "o.ctf", [StreamSpec("x", "sparse", 4)]) as w:
            w.write({"x": sp.csr_matrix(np.array([[0, np.nan, 0, 1]]))}, key=7)
    assert not (tmp_path / "o.ctf").exists()


def test_an_empty_singa_record_is_a_located_error(tmp_path):
    from recordkit.formats import singa
    from recordkit.formats.singa import records
    from recordkit.formats.singa.deserializer import SingaRecordDeserializer
    path = tmp_path / "e.kv"
    with singa.open(path, "create", "kvfile") as s:
        s.write("0", records.encode_record(label=1))
    with pytest.raises(FormatError, match=r"e\.kv: .*holds no data or pixels.*byte offset 0.*tuple 0"):
        SingaRecordDeserializer(path)
