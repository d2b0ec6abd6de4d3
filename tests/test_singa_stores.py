"""SINGA stores: byte layouts, the Store protocol, error reporting, atomic create/append, cat."""
from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import struct

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from recordkit.errors import FormatError, RecordkitWarning, UsageError
from recordkit.formats import singa
from recordkit.formats.singa import Mode, format_csv_record, parse_csv_record, sniff_store as sniff
from recordkit.cli import cat as cat_cmd

Q = struct.Struct("<Q").pack


def kv(key: bytes, value: bytes) -> bytes:
    return Q(len(key)) + key + Q(len(value)) + value


def write_store(path, kind, pairs, **kw):
    with singa.open(path, "create", kind, **kw) as s:
        for k, v in pairs:
            assert s.write(k, v)


def data(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def no_temporaries(directory) -> bool:
    return not [n for n in os.listdir(directory) if n.endswith(".part")]


# -- byte layouts (spec 1.1 and 6.1 verified examples) ------------------------------------------------
def test_kvfile_insert_matches_singa_bytes(tmp_path):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("00000", "abc")])
    assert data(p) == bytes.fromhex("0500000000000000 3030303030 0300000000000000 616263")


def test_binfile_matches_singa_bytes_with_and_without_key(tmp_path):
    p = tmp_path / "s.bin"
    write_store(p, "binfile", [("key1", "val1"), ("", "nokey")])
    assert data(p) == bytes.fromhex("73670100 0400000000000000 6b657931 0400000000000000 76616c31"
                                    "73670000 0500000000000000 6e6f6b6579")


def test_textfile_writes_value_and_newline_ignoring_key(tmp_path):
    p = tmp_path / "s.txt"
    write_store(p, "textfile", [("k", "1,2,3"), ("other", "")])
    assert data(p) == b"1,2,3\n\n"


# -- reading ---------------------------------------------------------------------------------------------
pairs_st = st.lists(st.tuples(st.binary(max_size=40), st.binary(min_size=1, max_size=200)), max_size=20)


@settings(max_examples=40, deadline=None)
@given(pairs=pairs_st)
@pytest.mark.parametrize("kind", ["kvfile", "binfile"])
def test_binary_stores_round_trip_any_bytes(tmp_path_factory, kind, pairs):
    p = tmp_path_factory.mktemp(kind) / "s"
    write_store(p, kind, pairs)
    with singa.open(p, "read", kind) as s:
        assert list(s) == pairs
        assert s.count() == len(pairs)


def test_kvfile_bytes_equal_independent_framing(tmp_path):
    pairs = [(b"", b"x"), (b"a" * 300, b"\x00" * 5), (b"dup", b"1"), (b"dup", b"2")]
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", pairs)  # create mode accepts empty and duplicate keys
    assert data(p) == b"".join(kv(k, v) for k, v in pairs)


def test_textfile_read_keys_are_line_numbers_and_only_newline_is_stripped(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"a\r\n\nlast")
    with singa.open(p, "read", "textfile") as s:
        assert list(s) == [(b"0", b"a\r"), (b"1", b""), (b"2", b"last")]
        s.seek_to_first()
        assert s.read() == (b"0", b"a\r")


def test_seek_to_first_restarts_and_end_stays_end(tmp_path):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("a", "1"), ("b", "2")])
    s = singa.open(p)
    assert [s.read(), s.read(), s.read(), s.read()] == [(b"a", b"1"), (b"b", b"2"), None, None]
    s.seek_to_first()
    assert s.read() == (b"a", b"1")
    s.close()


def test_v01_shard_directory_reads_shard_dat(tmp_path):
    (tmp_path / "shard.dat").write_bytes(kv(b"00000", b"abc"))
    assert sniff(tmp_path) == "kvfile"
    with singa.open(tmp_path) as s:
        assert list(s) == [(b"00000", b"abc")]


# -- broken input: reported with file, offset and tuple index --------------------------------------
def test_truncated_kvfile_tail_is_an_error_naming_offset_and_tuple(tmp_path):
    p = tmp_path / "s.kv"
    p.write_bytes(kv(b"a", b"1") + kv(b"b", b"22")[:-1])
    with singa.open(p, "read", "kvfile") as s:
        assert s.read() == (b"a", b"1")
        with pytest.raises(FormatError) as e:
            s.read()
    assert e.value.offset == 18 and e.value.record == "tuple 1" and e.value.path == str(p)


def test_tolerant_mode_warns_counts_and_stops_cleanly(tmp_path):
    p = tmp_path / "s.kv"
    p.write_bytes(kv(b"a", b"1") + kv(b"b", b"22")[:12])
    with pytest.warns(RecordkitWarning, match="tuple 1"):
        with singa.open(p, "read", "kvfile", tolerant=True) as s:
            assert list(s) == [(b"a", b"1")]
            assert s.read() is None
    assert s.errors == 1


def test_huge_length_field_is_an_error_not_an_allocation(tmp_path):
    p = tmp_path / "s.kv"
    p.write_bytes(Q(2 ** 63) + b"xxxx")
    with pytest.raises(FormatError, match="exceeds the 4 bytes left"):
        singa.open(p, "read", "kvfile").read()


def test_kvfile_empty_value_is_reported_where_singa_stops(tmp_path):
    p = tmp_path / "s.kv"
    p.write_bytes(kv(b"a", b"1") + kv(b"b", b"") + kv(b"c", b"3"))
    with pytest.raises(FormatError, match="empty value"):
        list(singa.open(p, "read", "kvfile"))
    with pytest.warns(RecordkitWarning):
        assert list(singa.open(p, "read", "kvfile", tolerant=True)) == [(b"a", b"1")]


@pytest.mark.parametrize("head, message", [(b"xg\x01\x00", "bad magic"), (b"sg\x02\x00", "bad key flag")])
def test_binfile_bad_magic_or_flag_is_an_error(tmp_path, head, message):
    p = tmp_path / "s.bin"
    p.write_bytes(b"sg\x00\x00" + Q(1) + b"v" + head + Q(1) + b"v")
    with pytest.raises(FormatError, match=message) as e:
        list(singa.open(p, "read", "binfile"))
    assert e.value.offset == 13 and e.value.record == "tuple 1"


# -- writing --------------------------------------------------------------------------------------------
def test_empty_value_is_refused_with_a_warning(tmp_path):
    with singa.open(tmp_path / "s.kv", "create", "kvfile") as s:
        with pytest.warns(RecordkitWarning, match="empty value"):
            assert s.write("k", b"") is False
    assert data(tmp_path / "s.kv") == b""


def test_tuple_larger_than_singa_buffer_is_refused(tmp_path):
    with singa.open(tmp_path / "s.kv", "create", "kvfile", capacity=32) as s:
        with pytest.raises(ValueError, match="buffer"):
            s.write("k", b"x" * 32)


def test_create_publishes_only_on_close(tmp_path):
    p = tmp_path / "s.kv"
    s = singa.open(p, "create", "kvfile")
    s.write("a", "1")
    s.flush()
    assert not p.exists()
    s.close()
    assert data(p) == kv(b"a", b"1") and no_temporaries(tmp_path)


def test_create_interrupted_by_an_exception_keeps_old_content(tmp_path):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("old", "1")])
    with pytest.raises(RuntimeError):
        with singa.open(p, "create", "kvfile") as s:
            s.write("new", "2")
            raise RuntimeError("crash")
    assert data(p) == kv(b"old", b"1") and no_temporaries(tmp_path)


def test_append_adds_after_existing_and_rejects_existing_keys(tmp_path):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("a", "1")])
    with singa.open(p, "append") as s:  # kind sniffed
        with pytest.warns(RecordkitWarning, match="already exists"):
            assert s.write("a", "x") is False
        assert s.write("b", "2") and s.write("b", "3")  # new duplicates pass, as in SINGA
    assert s.existing == 1
    assert data(p) == kv(b"a", b"1") + kv(b"b", b"2") + kv(b"b", b"3")


def test_append_drops_a_broken_tail_and_reports_it(tmp_path):
    p = tmp_path / "s.kv"
    p.write_bytes(kv(b"a", b"1") + kv(b"b", b"2222")[:-2])
    with pytest.warns(RecordkitWarning, match="broken tail"):
        with singa.open(p, "append", "kvfile") as s:
            s.write("c", "3")
    assert s.errors == 1
    assert list(singa.open(p)) == [(b"a", b"1"), (b"c", b"3")]


def test_append_crash_leaves_old_content_readable(tmp_path):
    p = tmp_path / "s.bin"
    write_store(p, "binfile", [("a", "1")])
    before = data(p)
    s = singa.open(p, "append", "binfile")
    s.write("b", "2")
    s.flush()
    assert data(p) == before  # mid-session: the old file is untouched
    s.abort()  # what an exception in a with-block (or losing the writer) does
    assert data(p) == before and no_temporaries(tmp_path)
    assert list(singa.open(p)) == [(b"a", b"1")]


def test_textfile_append_adds_missing_newline_first(tmp_path):
    p = tmp_path / "t.txt"
    p.write_bytes(b"x\ny")
    with singa.open(p, "append", "textfile") as s:
        s.write("", "z")
    assert data(p) == b"x\ny\nz\n"


def test_append_needs_an_existing_store(tmp_path):
    with pytest.raises(FileNotFoundError):
        singa.open(tmp_path / "missing", "append", "kvfile")


# -- API surface ----------------------------------------------------------------------------------------
def test_singa_spellings_and_mode_enum(tmp_path):
    p = str(tmp_path / "s.kv")
    s = singa.Open(p, Mode.kCreate, "kvfile")
    assert s.Write("k", "v")
    s.Flush()
    s.Close()
    r = singa.Open(p, Mode.kRead)
    assert r.Read() == (b"k", b"v") and r.Read() is None
    r.SeekToFirst()
    assert r.Read() == (b"k", b"v") and r.Count() == 1
    r.Close()
    assert singa.CreateStore("textfile") is singa.TextFileStore


def test_wrong_mode_operations_and_backends_are_usage_errors(tmp_path):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("a", "1")])
    with singa.open(p) as r:
        with pytest.raises(UsageError):
            r.write("b", "2")
    with singa.open(tmp_path / "n.kv", "create", "kvfile") as w:
        with pytest.raises(UsageError):
            w.read()
    with pytest.raises(UsageError, match="not supported"):
        singa.open(p, "read", "lmdb")
    with pytest.raises(UsageError, match="which store"):
        singa.open(tmp_path / "x", "create")


def test_sniff_tells_the_kinds_apart_and_refuses_empty(tmp_path):
    for kind, name in [("kvfile", "a"), ("binfile", "b"), ("textfile", "c")]:
        write_store(tmp_path / name, kind, [("k", "v")])
        assert sniff(tmp_path / name) == kind
    (tmp_path / "e").write_bytes(b"")
    assert sniff(tmp_path / "e") is None
    with pytest.raises(FormatError, match="pass the store kind"):
        singa.open(tmp_path / "e")


def test_memory_fsspec_url_read_create_append():
    pytest.importorskip("fsspec")
    url = "memory://singa-test/s.bin"
    write_store(url, "binfile", [("a", "1")])
    with singa.open(url, "append") as s:
        s.write("b", "2")
    with singa.open(url) as s:
        assert list(s) == [(b"a", b"1"), (b"b", b"2")]
    import fsspec
    fs = fsspec.filesystem("memory")
    assert [p for p in fs.ls("/singa-test", detail=False) if p.endswith(".part")] == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_s3_read_create_append_on_a_local_moto_server():
    pytest.importorskip("s3fs", reason="s3fs is needed for s3:// URLs")
    pytest.importorskip("boto3", reason="boto3 (with moto) creates the bucket")
    moto_server = pytest.importorskip("moto.server", reason="moto[server] is not installed")
    port = _free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        opts = {"key": "testing", "secret": "testing", "use_listings_cache": False,
                "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "us-east-1"}}
        import boto3
        import s3fs
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key="testing").create_bucket(Bucket="singa-bucket")
        fs = s3fs.S3FileSystem(**opts)
        url = "s3://singa-bucket/train_data.bin"
        write_store(url, "kvfile", [("00000", "abc")], storage_options=opts)
        assert fs.cat(url) == kv(b"00000", b"abc")
        with singa.open(url, "append", storage_options=opts) as s:
            s.write("00001", "def")
        assert sniff(url, opts) == "kvfile"
        with singa.open(url, "read", storage_options=opts) as s:
            assert list(s) == [(b"00000", b"abc"), (b"00001", b"def")]
        assert not [p for p in fs.ls("singa-bucket", detail=False) if p.endswith(".part")]
    finally:
        server.stop()


# -- CSV records ------------------------------------------------------------------------------------------
def test_csv_record_label_then_values_trailing_separator_tolerated():
    label, values = parse_csv_record("3,0.5,1e1,-2,", 3)
    assert label == 3 and values.dtype == np.float32 and values.tolist() == [0.5, 10.0, -2.0]


def test_csv_record_deploy_phase_does_not_skip_a_label_column():
    label, values = parse_csv_record("1,2", 2, deploy=True)
    assert label is None and values.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("line, message", [("1,2", "too few"), ("1,2,3,4", "extra"), ("1,,2,3", "not a float"),
                                           ("x,1,2", "label")])
def test_csv_record_errors_where_singa_aborts(line, message):
    with pytest.raises(FormatError, match=message):
        parse_csv_record(line, 2, line=7)


def test_csv_record_reproduces_the_tokenizer_quirk_with_whitespace_separator():
    # substr(start, pos) + stof skipping whitespace: an empty field re-reads the next number
    assert parse_csv_record("1  2", 3, separator=" ", has_label=False)[1].tolist() == [1.0, 2.0, 2.0]


def test_csv_output_format_is_label_then_six_decimals():
    assert format_csv_record(2, [0.5, 1]) == b"2,0.500000,1.000000"
    assert parse_csv_record(format_csv_record(2, [0.5, 1]) + b"\r", 2)[1].tolist() == [0.5, 1.0]


# -- recordkit cat --------------------------------------------------------------------------------------
def run_cat(capsys, path, store=None, decode=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("path")
    cat_cmd.add_store_arguments(parser)
    argv = [str(path)] + (["--store", store] if store else []) + (["--decode", decode] if decode else [])
    assert cat_cmd.cat_store(parser.parse_args(argv)) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_cat_prints_key_and_base64_value_per_tuple(tmp_path, capsys):
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("00000", b"\x00\xff")])
    assert run_cat(capsys, p) == [{"key": "00000", "value": base64.b64encode(b"\x00\xff").decode()}]


def test_cat_textfile_key_is_line_number(tmp_path, capsys):
    p = tmp_path / "t.txt"
    p.write_bytes(b"a,b\nc")
    assert run_cat(capsys, p, store="textfile") == [{"key": "0", "value": "YSxi"}, {"key": "1", "value": "Yw=="}]


def test_cat_ambiguous_file_asks_for_store(tmp_path, capsys):
    p = tmp_path / "e"
    p.write_bytes(b"")
    with pytest.raises(UsageError, match="--store"):
        run_cat(capsys, p)
    assert run_cat(capsys, p, store="kvfile") == []


def test_cat_decode_image_record_adds_record_fields(tmp_path, capsys):
    records = pytest.importorskip("recordkit.formats.singa.records")
    value = records.encode_record(shape=[2, 2], label=3, pixel=bytes([1, 2, 3, 4]))
    p = tmp_path / "s.kv"
    write_store(p, "kvfile", [("00000", value)])
    [obj] = run_cat(capsys, p, decode="image-record")
    assert obj["label"] == 3 and obj["shape"] == [2, 2] and obj["pixel"] == [[1, 2], [3, 4]]


def test_recordkit_cat_routes_singa_stores(tmp_path, capsys):
    import json as _json
    from recordkit.cli.main import main as cli_main
    from recordkit.formats import singa
    p = tmp_path / "train_data.bin"
    with singa.open(str(p), "create", "kvfile") as s:
        s.write(b"00000", b"abc")
        s.write(b"00001", b"de")
    assert cli_main(["cat", str(p)]) == 0  # sniffed as a KVFile
    lines = [_json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["key"] for x in lines] == ["00000", "00001"]
    t = tmp_path / "lines.txt"
    t.write_text("a\nb\n")
    assert cli_main(["cat", str(t), "--store", "textfile"]) == 0
    assert [_json.loads(x)["key"] for x in capsys.readouterr().out.splitlines()] == ["0", "1"]
