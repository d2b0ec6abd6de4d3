"""A directory is read as one data set only when it says so (formats/directories.py): numbered
parts, a description, a format's fixed layout. Any other directory (train.parquet beside
test.parquet) is refused by every command and every reader, saying what it holds and how to read
a file of it, instead of being read as the two files back to back; the layouts recordkit and the
sharding tools write still open."""
import os

import numpy as np
import pytest

from recordkit.cli.main import main
from recordkit.engine.streams import StreamSpec

STREAMS = [StreamSpec("x", "dense", 2)]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_parquet(path, first: int, n: int) -> None:
    """A Parquet file of ``n`` sequences keyed ``first``, ``first + 1``, ..."""
    import recordkit
    ctf = path.with_suffix(".ctf.in")
    ctf.write_text("".join(f"{k} |x {k} {k}\n" for k in range(first, first + n)))
    recordkit.convert(str(ctf), path, streams=STREAMS)
    ctf.unlink()


@pytest.fixture
def train_test(tmp_path):
    d = tmp_path / "d"
    d.mkdir()
    write_parquet(d / "train.parquet", 0, 2)
    write_parquet(d / "test.parquet", 2, 1)
    (d / "notes.txt").write_text("two unrelated files")
    return d


COMMANDS = [["cat"], ["stats"], ["validate"], ["inspect"], ["read", "--mb-size", "2"], ["convert", "{out}"]]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_every_command_refuses_a_directory_of_unrelated_files(train_test, tmp_path, capsys, command):
    out_path = tmp_path / "out.cbf"
    code, out, err = run(capsys, command[0], train_test, *[a.format(out=out_path) for a in command[1:]])
    assert code == 1 and out == "", (code, out, err)
    assert err.startswith(f"recordkit: error: {train_test}: is a directory but not one data set (it holds 3 "
                          f"entries: notes.txt, test.parquet, train.parquet)"), err
    assert f"({train_test / 'test.parquet'})" in err and "part-00000.parquet, part-00001.parquet" in err
    assert not out_path.exists()


def test_a_file_of_such_a_directory_reads_when_named(train_test, capsys):
    code, out, _ = run(capsys, "cat", train_test / "test.parquet")
    assert code == 0 and out.count("\n") == 1


@pytest.mark.parametrize("ext", [".parquet", ".cbf", ".tar", ".tfrecord"])
def test_every_reader_refuses_unnumbered_files_of_its_format(tmp_path, ext):
    """The readers list a directory through the same rule as detection: one place decides."""
    from recordkit.errors import NotADataSetError
    from recordkit.formats.cbf.parts import open_cbf_data_set
    from recordkit.formats.parquet import ParquetDeserializer
    from recordkit.formats.tfrecord import TFRecordReader
    from recordkit.formats.webdataset import WebDatasetReader
    from recordkit.formats.detect import sniff_format
    d = tmp_path / "d"
    d.mkdir()
    for name in ("part-00000", "extra"):  # numbered parts plus one that is not
        (d / (name + ext)).write_bytes(b"")
    opener = {".parquet": lambda: ParquetDeserializer(d), ".cbf": lambda: open_cbf_data_set(str(d)),
              ".tar": lambda: WebDatasetReader(str(d), STREAMS), ".tfrecord": lambda: TFRecordReader(str(d), STREAMS)}
    for open_it in (opener[ext], lambda: sniff_format(d)):
        with pytest.raises(NotADataSetError, match=f"holds 2 entries: extra{ext}, part-00000{ext}"):
            open_it()


def test_numbered_parts_are_one_data_set_in_number_order(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    # Ray's extra blocks (part-T-B) between their task's part and the next task's; 2 before 10
    for name, first in [("part-10.parquet", 5), ("part-2.parquet", 3), ("part-2-1.parquet", 4),
                        ("part-1.parquet", 0)]:
        write_parquet(d / name, first, 3 if first == 0 else 1)
    (d / "README.md").write_text("files of another kind are not part of it")
    code, out, _ = run(capsys, "cat", d)
    assert code == 0
    assert [line.split(",")[0] for line in out.splitlines()] == ['{"key":%d' % k for k in range(6)]


def test_what_makes_a_numbered_set():
    from recordkit.formats.directories import numbered_set
    assert numbered_set(["train-0.tar", "train-1.tar", "train-10.tar", "train-2.tar", ".tmp.tar"], (".tar",)) == \
        ["train-0.tar", "train-1.tar", "train-2.tar", "train-10.tar"]
    assert numbered_set(["part-00000-00001.parquet", "part-00001.parquet", "part-00000.parquet"], (".parquet",)) \
        == ["part-00000.parquet", "part-00000-00001.parquet", "part-00001.parquet"]
    assert numbered_set(["train.parquet", "test.parquet"], (".parquet",)) is None
    assert numbered_set(["train-0.tar", "test-0.tar"], (".tar",)) is None  # two names: two data sets
    assert numbered_set(["notes.txt"], (".tar",)) is None


def test_a_description_beside_its_shards_says_so_whatever_their_names():
    from recordkit.formats.bridge_probes import probe_tfrecord_parts, probe_webdataset_shards
    assert probe_webdataset_shards({"__recordkit__.json", "train.tar", "test.tar"})
    assert not probe_webdataset_shards({"train.tar", "test.tar"})
    assert probe_tfrecord_parts({"__recordkit__.json", "a.tfrecord"}) and not probe_tfrecord_parts({"a.tfrecord"})


def test_a_directory_holding_two_formats_is_not_one_data_set(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    write_parquet(d / "part-0.parquet", 0, 1)
    (d / "part-0.tar").write_bytes(b"")
    code, _, err = run(capsys, "cat", d)
    assert code == 1 and f"{d}: holds data of several formats (parquet, webdataset; it holds 2 entries: " \
                         f"part-0.parquet, part-0.tar)" in err


@pytest.mark.parametrize("target", ["cbf", "parquet", "hf", "webdataset", "tfrecord", "mds", "ofrecord"])
def test_every_directory_recordkit_writes_still_opens(tmp_path, capsys, target):
    src = tmp_path / "in.ctf"
    src.write_text("".join(f"{k} |x {k} {k}\n" for k in range(4)))
    out = tmp_path / ("out.cbf" if target == "cbf" else "out")
    parts = [] if target in ("hf", "mds") else ["--parts", "2"]
    if target == "cbf":  # the local engine writes one file: a directory of parts is what Ray writes
        out.mkdir()
        for i, keys in enumerate([(0, 1), (2, 3)]):
            (tmp_path / f"p{i}.ctf").write_text("".join(f"{k} |x {k} {k}\n" for k in keys))
            assert run(capsys, "convert", tmp_path / f"p{i}.ctf", out / f"part-{i:05d}.cbf", "--stream",
                       "x=dense:2")[0] == 0
    else:
        assert run(capsys, "convert", src, out, "--to", target, "--stream", "x=dense:2", *parts)[0] == 0
    assert os.path.isdir(out)
    code, text, err = run(capsys, "cat", out)
    assert code == 0 and text.count("\n") == 4, err


def test_ofrecord_parts_named_otherwise_open_with_their_prefix(tmp_path, capsys):
    src = tmp_path / "in.ctf"
    src.write_text("0 |x 1 2\n1 |x 3 4\n")
    out = tmp_path / "of"
    assert run(capsys, "convert", src, out, "--to", "ofrecord", "--stream", "x=dense:2", "--parts", "2")[0] == 0
    for i in range(2):
        os.replace(out / f"part-{i:05d}", out / f"data_{i}")
    assert run(capsys, "cat", out)[0] == 1  # not named as parts: not a data set
    code, text, _ = run(capsys, "cat", out, "--part-name-prefix", "data_")
    assert code == 0 and text.count("\n") == 2
