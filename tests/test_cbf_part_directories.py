"""A directory of CBF parts is one data set for every command and reader."""
import json
import os

import numpy as np
import pytest

from recordkit import StreamSpec
from recordkit.cli.main import main
from recordkit.errors import FormatError
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.cbf.parts import CBFParts, open_cbf_data_set

STREAMS = [StreamSpec("x", "dense", 3), StreamSpec("y", "sparse", 7)]


def sequences(n, seed=0):
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    for _ in range(n):
        k = int(rng.integers(1, 5))
        yield {"x": rng.normal(size=(k, 3)).astype(np.float32),
               "y": sp.csr_matrix((np.ones(k, np.float32), (np.arange(k), rng.integers(0, 7, k))), shape=(k, 7))}


@pytest.fixture()
def data(tmp_path):
    """The same 37 sequences as one file and as a directory of parts 0, 1, 2 ... 10 (name order != number order)."""
    seqs = list(sequences(37))
    with CBFWriter(tmp_path / "one.cbf", STREAMS, chunk_size=200) as w:
        for s in seqs:
            w.write(s)
    parts = tmp_path / "out.cbf"
    parts.mkdir()
    cuts = [0, 3, 5, 9, 12, 15, 20, 24, 28, 30, 33, 37]
    for i, (a, b) in enumerate(zip(cuts[:-1], cuts[1:])):
        with CBFWriter(parts / f"part-{i:d}.cbf", STREAMS, chunk_size=150) as w:
            for s in seqs[a:b]:
                w.write(s)
    (parts / ".part-99.cbf.tmp.part").write_bytes(b"junk")  # a writer's temporary: not a part
    return tmp_path / "one.cbf", parts


def run(capsys, *args):
    code = main(list(map(str, args)))
    out, err = capsys.readouterr()
    return code, out, err


def test_cat_stats_and_convert_of_a_part_directory_equal_the_single_file(capsys, data, tmp_path):
    one, parts = data
    assert run(capsys, "cat", parts)[1] == run(capsys, "cat", one)[1]
    keys = [json.loads(line)["key"] for line in run(capsys, "cat", parts)[1].splitlines()]
    assert keys == list(range(37))  # ordinals continue from part to part, in part-number order
    assert run(capsys, "stats", parts, "--json")[1] == run(capsys, "stats", one, "--json")[1]
    code, _, err = run(capsys, "convert", parts, tmp_path / "back.ctf")
    assert code == 0, err
    run(capsys, "convert", one, tmp_path / "ref.ctf")
    assert (tmp_path / "back.ctf").read_bytes() == (tmp_path / "ref.ctf").read_bytes()
    code, out, _ = run(capsys, "read", parts, "--mb-size", "16", "--randomize", "--json")
    assert code == 0 and json.loads(out)["sequences"] == 37


def test_minibatch_source_over_parts_reads_every_sequence_once(data):
    from recordkit.engine.source import MinibatchSource
    one, parts = data
    with open_cbf_data_set(str(parts)) as r, CBFReader(one) as ref:
        assert isinstance(r, CBFParts) and r.num_sequences == 37 and len(r.paths) == 11
        assert sum(c.num_samples for c in r.chunks) == sum(c.num_samples for c in ref.chunks)
        with MinibatchSource(r, randomize=True, window=2, seed=3, max_sweeps=1) as src:
            got = {}
            for mb in src.minibatches(8):
                for j, k in enumerate(mb.keys):
                    got[int(k)] = mb["x"].data[j][mb["x"].mask[j].astype(bool)]
        want = {s.key: s["x"] for s in ref}
        assert sorted(got) == sorted(want)
        assert all(np.array_equal(got[k], want[k]) for k in want)
        assert list(np.concatenate([r.sequence_keys(c.id) for c in r.chunks])) == list(range(37))


def test_parts_with_different_streams_are_a_located_error(data):
    _, parts = data
    with CBFWriter(parts / "part-11.cbf", [StreamSpec("x", "dense", 4)]) as w:
        w.write({"x": np.zeros((1, 4), np.float32)})
    with pytest.raises(FormatError, match=r"part-11\.cbf.*differ"):
        open_cbf_data_set(str(parts))


def test_a_directory_without_parts_says_so(tmp_path, capsys):
    d = tmp_path / "empty.cbf"
    d.mkdir()
    (d / "notes.txt").write_text("hi")
    code, _, err = run(capsys, "cat", d)
    assert code == 1
    assert "empty.cbf: is a directory but not one data set (it holds 1 entry: notes.txt)" in err
    assert "part-00000.cbf, part-00001.cbf" in err


def test_inspect_describes_a_part_directory(capsys, data):
    one, parts = data
    code, out, _ = run(capsys, "inspect", parts, "--json")
    info = json.loads(out)
    assert code == 0 and info["format"] == "cbf" and len(info["files"]) == 11
    ref = json.loads(run(capsys, "inspect", one, "--json")[1])
    assert info["sequences"] == ref["sequences"] == 37 and info["samples"] == ref["samples"]
    assert info["sequence_lengths"] == ref["sequence_lengths"]


def test_cntk_compat_and_brainscript_open_a_part_directory(data):
    from recordkit.compat.cntk import CBFDeserializer, MinibatchSource, StreamDef, StreamDefs
    one, parts = data
    counts = []
    for path in (one, parts):
        src = MinibatchSource(CBFDeserializer(str(path), StreamDefs(x=StreamDef(field="x", shape=3))),
                              randomize=False, max_sweeps=1)
        n = 0
        while True:
            mb = src.next_minibatch(10)
            if not mb:
                break
            n += mb[src.streams.x].num_sequences
        counts.append(n)
    assert counts == [37, 37]
    import recordkit
    cfg = f"""Train = [ reader = [ readerType = "CNTKBinaryReader"; file = "{parts}"; randomize = false
        input = [ x = [ alias = "x" ] ] ] ]"""
    source = recordkit.from_config(cfg, section="Train", max_sweeps=1)
    assert sum(mb.num_sequences for mb in source.minibatches(10)) == 37
