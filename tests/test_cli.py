"""The recordkit command line: cat, stats, demo, errors and exit codes."""
import json
import math
import subprocess
import sys

import pytest

from helpers import write
from recordkit.cli.main import main

SAMPLE = "100 |a 1 2 3 |b 7:1.5\n100 |a 4 5 6\n200 |b 1:-2 3:0.25 |a 0.1 0.2 0.3\n"
STREAM_ARGS = ["--stream", "A=dense:3:a", "--stream", "B=sparse:10:b"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cat_prints_one_json_object_per_sequence(tmp_path, capsys):
    p = write(tmp_path, SAMPLE)
    code, out, err = run(capsys, "cat", str(p), *STREAM_ARGS)
    assert code == 0 and err == ""
    recs = [json.loads(line) for line in out.splitlines()]
    assert recs[0] == {"key": 100, "A": [[1, 2, 3], [4, 5, 6]], "B": [{"indices": [7], "values": [1.5]}]}
    assert recs[1]["A"] == [[0.1, 0.2, 0.3]]  # float32 printed in shortest form, reads back exactly
    assert recs[1]["B"] == [{"indices": [1, 3], "values": [-2, 0.25]}]
    assert list(recs[0]) == ["key", "A", "B"]


def test_cat_lists_every_declared_stream_even_when_empty(tmp_path, capsys):
    p = write(tmp_path, "1 |a 1 2 3\n")
    code, out, _ = run(capsys, "cat", str(p), *STREAM_ARGS)
    assert json.loads(out) == {"key": 1, "A": [[1, 2, 3]], "B": []}


def test_cat_double_precision_and_skip_sequence_ids(tmp_path, capsys):
    p = write(tmp_path, "5 |a 0.1 0 0\n5 |a 0.2 0 0\n")
    _, out, _ = run(capsys, "cat", str(p), "--stream", "A=dense:3:a", "--precision", "double",
                    "--skip-sequence-ids")
    recs = [json.loads(line) for line in out.splitlines()]
    assert [r["key"] for r in recs] == [0, 1] and recs[0]["A"] == [[0.1, 0, 0]]


def test_cat_writes_non_finite_values_without_losing_them(tmp_path, capsys):
    p = write(tmp_path, "|a 1e400 -1e400 1\n")
    _, out, _ = run(capsys, "cat", str(p), "--stream", "A=dense:3:a")
    rec = json.loads(out)
    assert rec["A"][0][0] == math.inf and rec["A"][0][1] == -math.inf


def test_cat_error_exits_nonzero_with_location(tmp_path, capsys):
    p = write(tmp_path, "1 |a 1 2 3\n2 |a 1 x 3\n")
    code, out, err = run(capsys, "cat", str(p), *STREAM_ARGS)
    assert code == 1
    assert f"recordkit: error: {p}:2:8: malformed value in input 'A'" in err


def test_cat_max_errors_reports_skipped_sequences(tmp_path, capsys):
    p = write(tmp_path, "1 |a 1 2 3\n2 |a 1 x 3\n3 |a 7 8 9\n")
    code, out, err = run(capsys, "cat", str(p), *STREAM_ARGS, "--max-errors", "1")
    assert code == 0
    assert [json.loads(line)["key"] for line in out.splitlines()] == [1, 3]
    assert f"{p}:2:8:" in err and "sequence 2 skipped" in err and "1 error(s) tolerated" in err


def test_stats_json(tmp_path, capsys):
    p = write(tmp_path, SAMPLE)
    code, out, _ = run(capsys, "stats", str(p), *STREAM_ARGS, "--json")
    assert code == 0
    s = json.loads(out)
    assert s["sequences"] == 2
    a, b = s["streams"]["A"], s["streams"]["B"]
    assert (a["samples"], a["nnz"], a["min"], a["max"]) == (3, 9, pytest.approx(0.1), 6)
    assert a["sum"] == pytest.approx(21.6, rel=1e-6)
    assert (b["samples"], b["nnz"], b["sum"], b["min"], b["max"]) == (2, 3, -0.25, -2, 1.5)


def test_stats_table(tmp_path, capsys):
    p = write(tmp_path, SAMPLE)
    code, out, _ = run(capsys, "stats", str(p), *STREAM_ARGS)
    assert code == 0 and "2 sequences" in out and out.splitlines()[2].split()[:3] == ["A", "3", "9"]


def test_stats_of_stream_without_values_has_no_range(tmp_path, capsys):
    p = write(tmp_path, "|a 1 2 3\n")
    _, out, _ = run(capsys, "stats", str(p), *STREAM_ARGS, "--json")
    assert json.loads(out)["streams"]["B"] == {"samples": 0, "nnz": 0, "sum": 0.0, "min": None, "max": None}


@pytest.mark.parametrize("args,msg", [
    (["--stream", "A=dense"], "NAME=FORMAT:DIM"),
    (["--stream", "key=dense:3"], "reserved"),
    ([], "declare at least one --stream"),
])
def test_bad_stream_arguments(tmp_path, capsys, args, msg):
    p = write(tmp_path, SAMPLE)
    with pytest.raises(SystemExit) as e:
        main(["cat", str(p), *args])
    assert msg in str(e.value)


def test_missing_file(tmp_path, capsys):
    code, _, err = run(capsys, "cat", str(tmp_path / "none.ctf"), *STREAM_ARGS)
    assert code == 1 and "no such file" in err


def test_console_script_and_demo(tmp_path):
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "demo", "--dir", str(tmp_path),
                          "--sequences", "300"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "round trip: identical" in out.stdout and (tmp_path / "demo.ctf").exists()


def test_no_progress_bar_when_not_a_terminal(tmp_path):
    p = write(tmp_path, SAMPLE)
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "stats", str(p), *STREAM_ARGS],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""
