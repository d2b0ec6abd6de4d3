"""WebDataset, TFRecord and MDS through recordkit itself: CTF -> X -> CTF equals CTF -> CTF,
``recordkit cat X`` equals ``recordkit cat CTF`` without --stream, sharding, atomic output,
checksums, and the engine (MinibatchSource) over each format."""
import os

import numpy as np
import pytest

from bridge_corpus import STREAMS, cat_records, cli, make_ctf
from recordkit import StreamSpec
from recordkit.errors import FormatError

FORMATS = ["webdataset", "tfrecord", "mds"]


@pytest.fixture
def corpus(tmp_path):
    return make_ctf(tmp_path / "c.ctf")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("sharding", [[], ["--parts", "3"], ["--shard-size", "700"]])
def test_ctf_to_format_to_ctf_equals_ctf_to_ctf(tmp_path, capsys, corpus, fmt, sharding):
    ref = tmp_path / "ref.ctf"
    assert cli(capsys, "convert", corpus, ref, *STREAMS)[0] == 0
    out = tmp_path / "out"
    code, _, err = cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, *sharding)
    assert code == 0, err
    back = tmp_path / "back.ctf"
    code, _, err = cli(capsys, "convert", out, back)  # no --stream: the data set describes itself
    assert code == 0, err
    assert back.read_bytes() == ref.read_bytes()
    shards = [n for n in os.listdir(out) if not n.endswith(".json")]
    if sharding[:1] == ["--parts"]:
        assert len(shards) == 3
    elif sharding:
        assert len(shards) > 3


@pytest.mark.parametrize("fmt", FORMATS)
def test_cat_of_the_format_prints_what_cat_of_the_ctf_prints(tmp_path, capsys, corpus, fmt):
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--parts", "2")[0] == 0
    assert cat_records(capsys, out) == cat_records(capsys, corpus, *STREAMS)


@pytest.mark.parametrize("fmt", ["webdataset", "mds"])
def test_double_precision_stays_double_where_the_format_holds_it(tmp_path, capsys, fmt):
    src = tmp_path / "d.ctf"
    src.write_text("1 |a 0.1 0.30000000000000004 |b 3:1e-300\n2 |a 1e300 -2\n")
    streams = ["--stream", "a=dense:2", "--stream", "b=sparse:5", "--precision", "double"]
    ref = tmp_path / "ref.ctf"
    assert cli(capsys, "convert", src, ref, *streams)[0] == 0
    out = tmp_path / "out"
    assert cli(capsys, "convert", src, out, "--to", fmt, *streams)[0] == 0
    back = tmp_path / "back.ctf"
    assert cli(capsys, "convert", out, back)[0] == 0
    assert back.read_bytes() == ref.read_bytes()


def test_tfrecord_narrows_double_with_a_warning(tmp_path, capsys):
    src = tmp_path / "d.ctf"
    src.write_text("1 |a 0.1 0.30000000000000004\n")
    out = tmp_path / "out"
    code, _, err = cli(capsys, "convert", src, out, "--to", "tfrecord", "--stream", "a=dense:2", "--precision", "double")
    assert code == 0 and "float32" in err and "narrowed" in err
    assert cat_records(capsys, out)[0]["a"] == [[0.1, 0.3]]  # float32's shortest forms


@pytest.mark.parametrize("fmt", FORMATS)
def test_minibatch_source_reads_the_format_like_the_ctf(tmp_path, capsys, corpus, fmt):
    from recordkit.cli import sources
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.ctf import CTFReader
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--parts", "4")[0] == 0
    ctf = CTFReader(corpus, [StreamSpec("feat", "dense", 4, "F"), StreamSpec("lab", "sparse", 50, "L")])
    mod = {"webdataset": "WebDatasetReader", "tfrecord": "TFRecordReader", "mds": "MDSReader"}[fmt]
    import importlib
    reader = getattr(importlib.import_module(f"recordkit.formats.{fmt}"), mod)(str(out))
    assert len(reader.chunks) == 4 and sum(c.num_sequences for c in reader.chunks) == 120
    # the description's sample counts are what loading finds
    for info in reader.chunks:
        assert info.num_samples == reader.load_chunk(info.id).num_samples
    got, want = [], []
    for r, sink in ((reader, got), (ctf, want)):
        src = MinibatchSource(r, randomize=False, max_sweeps=1)
        while (mb := src.next_minibatch(17)) is not None:
            sink.append((mb.keys.tolist(), mb["feat"].data.copy(), mb["lab"].csr.toarray()))
    assert [k for k, _, _ in got] == [k for k, _, _ in want]
    for (_, a, b), (_, c, d) in zip(got, want):
        np.testing.assert_array_equal(a, c)
        np.testing.assert_array_equal(b, d)
    del sources


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_failed_write_leaves_nothing_and_a_rewrite_replaces_the_whole_data_set(tmp_path, capsys, corpus, fmt):
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--parts", "5")[0] == 0
    before = sorted(os.listdir(out))
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--parts", "2")[0] == 0
    after = sorted(os.listdir(out))
    assert len(after) < len(before)  # the old data set's extra shards are gone
    assert cat_records(capsys, out) == cat_records(capsys, corpus, *STREAMS)
    # a writer that fails midway publishes nothing
    import importlib
    mod = importlib.import_module(f"recordkit.formats.{fmt}")
    writer_cls = {"webdataset": "WebDatasetWriter", "tfrecord": "TFRecordWriter", "mds": "MDSWriter"}[fmt]
    from recordkit.formats.ctf import CTFReader
    reader = CTFReader(corpus, [StreamSpec("feat", "dense", 4, "F"), StreamSpec("lab", "sparse", 50, "L")])
    target = tmp_path / "new"
    with pytest.raises(RuntimeError):
        with getattr(mod, writer_cls)(str(target), reader.streams, shard_size=300) as w:
            for chunk in reader.iter_chunks():
                w.write_chunk(chunk)
            raise RuntimeError("stop")
    assert not target.exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".new.")] == []


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_directory_holding_other_files_is_not_replaced(tmp_path, capsys, corpus, fmt):
    out = tmp_path / "precious"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS)
    assert code == 2 and "notes.txt" in err and "refusing" in err
    assert (out / "notes.txt").read_text() == "mine" and os.listdir(out) == ["notes.txt"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_checksum_sidecars_are_written_and_verified(tmp_path, capsys, corpus, fmt):
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--checksum")[0] == 0
    shards = sorted(n for n in os.listdir(out) if n.startswith(("shard", "part")) and not n.endswith(".rkcrc"))
    assert shards and all((out / (n + ".rkcrc")).exists() for n in shards)
    victim = out / shards[0]
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0x01
    victim.write_bytes(bytes(data))
    code, _, err = cli(capsys, "cat", out)
    assert code == 1 and "checksum mismatch" in err and shards[0] in err


@pytest.mark.parametrize("fmt", FORMATS)
def test_without_its_description_the_data_set_needs_streams(tmp_path, capsys, corpus, fmt):
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS)[0] == 0
    if fmt == "mds":
        import json
        index = json.loads((out / "index.json").read_text())
        del index["recordkit"]
        (out / "index.json").write_text(json.dumps(index))
    else:
        os.remove(out / "__recordkit__.json")
    if fmt == "tfrecord":  # each part's first record still describes the streams
        assert cat_records(capsys, out) == cat_records(capsys, corpus, *STREAMS)
        return
    code, _, err = cli(capsys, "cat", out)
    assert code == 1 and "--stream" in err
    # declared streams name the data set's fields (NAME=FORMAT:DIM:FIELD)
    recs = cat_records(capsys, out, "--stream", "f=dense:4:feat", "--stream", "l=sparse:50:lab")
    want = cat_records(capsys, corpus, *STREAMS)
    assert [r["f"] for r in recs] == [r["feat"] for r in want]
    assert [r["l"] for r in recs] == [r["lab"] for r in want]


def test_empty_input_writes_a_readable_empty_data_set(tmp_path):
    from recordkit.formats.tfrecord import TFRecordReader, TFRecordWriter
    from recordkit.formats.webdataset import WebDatasetReader, WebDatasetWriter
    from recordkit.formats.mds import MDSReader, MDSWriter
    streams = [StreamSpec("a", "dense", 2)]
    for W, R in ((WebDatasetWriter, WebDatasetReader), (TFRecordWriter, TFRecordReader), (MDSWriter, MDSReader)):
        out = tmp_path / W.__name__
        with W(str(out), streams):
            pass
        r = R(str(out))
        assert [len(r.load_chunk(c.id)) for c in r.chunks] == [0]


def test_a_shard_replaced_by_a_shorter_one_is_a_located_error(tmp_path, capsys, corpus):
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", "tfrecord", *STREAMS, "--parts", "2")[0] == 0
    other = tmp_path / "other"
    assert cli(capsys, "convert", corpus, other, "--to", "tfrecord", *STREAMS, "--parts", "3")[0] == 0
    os.replace(other / "part-00001.tfrecord", out / "part-00001.tfrecord")
    from recordkit.formats.tfrecord import TFRecordReader
    r = TFRecordReader(str(out))
    with pytest.raises(FormatError, match="says 60"):
        r.load_chunk(1)


@pytest.mark.parametrize("fmt", FORMATS)
def test_inspect_and_read_take_the_format(tmp_path, capsys, corpus, fmt):
    import json
    out = tmp_path / "out"
    assert cli(capsys, "convert", corpus, out, "--to", fmt, *STREAMS, "--parts", "2")[0] == 0
    code, text, err = cli(capsys, "inspect", out, "--json")
    assert code == 0, err
    info = json.loads(text)
    assert info["format"] == fmt and info["sequences"] == 120 and len(info["shards"]) == 2
    assert [s["alias"] for s in info["streams"]] == ["F", "L"]
    code, text, err = cli(capsys, "read", out, "--mb-size", "64", "--randomize", "--json")
    assert code == 0, err
    assert json.loads(text.strip().splitlines()[-1])["sequences"] == 120


@pytest.mark.parametrize("fmt", FORMATS)
def test_urls_are_written_file_by_file_and_a_rewrite_removes_stale_shards(tmp_path, capsys, corpus, fmt):
    fsspec = pytest.importorskip("fsspec")
    url = f"memory://bridge-{fmt}/out"
    assert cli(capsys, "convert", corpus, url, "--to", fmt, *STREAMS, "--parts", "3", "--checksum")[0] == 0
    assert cat_records(capsys, url) == cat_records(capsys, corpus, *STREAMS)
    assert cli(capsys, "convert", corpus, url, "--to", fmt, *STREAMS)[0] == 0
    fs = fsspec.filesystem("memory")
    names = sorted(p.rsplit("/", 1)[1] for p in fs.ls(f"/bridge-{fmt}/out", detail=False))
    assert len(names) == 2 and not any(n.endswith(".rkcrc") for n in names)  # one shard + the description
    assert cat_records(capsys, url) == cat_records(capsys, corpus, *STREAMS)
    fs.rm(f"/bridge-{fmt}", recursive=True)
