"""`recordkit validate` covers the bridge formats too: every chunk is loaded
through the format's reader and each failure is a located problem; a clean data set passes."""
from __future__ import annotations

import os

import pytest

from bridge_corpus import STREAMS, cli, make_ctf

FORMATS = ["parquet", "hf", "webdataset", "tfrecord", "mds"]


def data_files(directory):
    """The data files of a data set directory (not its descriptions), largest first."""
    names = [n for n in os.listdir(directory) if not n.endswith((".json", ".rkcrc")) and not n.startswith(".")]
    return sorted((os.path.join(directory, n) for n in names), key=os.path.getsize, reverse=True)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_clean_data_set_validates_and_a_damaged_shard_is_located(tmp_path, capsys, fmt):
    src = make_ctf(tmp_path / "in.ctf")
    out = tmp_path / "out"
    assert cli(capsys, "convert", src, out, "--to", fmt, "--parts", "2", *STREAMS)[0] == 0
    code, text, err = cli(capsys, "validate", out)
    assert code == 0, text + err
    assert "0 problem(s)" in err and "120 sequences checked" in err, err
    victim = data_files(out)[0]
    with open(victim, "r+b") as f:  # cut the shard in the middle of its data
        f.truncate(os.path.getsize(victim) // 2)
    code, text, err = cli(capsys, "validate", out)
    assert code == 1, text + err
    assert os.path.basename(victim) in text, text


def test_validate_json_lists_the_problem_with_its_file(tmp_path, capsys):
    import json
    src = make_ctf(tmp_path / "in.ctf")
    out = tmp_path / "out"
    assert cli(capsys, "convert", src, out, "--to", "tfrecord", *STREAMS)[0] == 0
    victim = data_files(out)[0]
    data = bytearray(open(victim, "rb").read())
    data[len(data) // 2] ^= 0xFF  # a flipped byte: the record's CRC no longer matches
    open(victim, "wb").write(bytes(data))
    code, text, _ = cli(capsys, "validate", out, "--json")
    assert code == 1
    problems = [json.loads(line) for line in text.splitlines() if line.strip().startswith("{")]
    assert any(victim in json.dumps(p) for p in problems), text
