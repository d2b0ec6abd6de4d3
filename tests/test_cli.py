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
    code, out, err = run(capsys, "cat", str(p), "--stream", "A=dense:3:a", "--max-errors", "1")
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
    _, out, _ = run(capsys, "stats", str(p), *STREAM_ARGS, "--json", "--allow-empty-stream", "B")
    assert json.loads(out)["streams"]["B"] == {"samples": 0, "nnz": 0, "sum": 0.0, "min": None, "max": None}


@pytest.mark.parametrize("args,msg", [
    (["--stream", "A=dense"], "NAME=FORMAT:DIM"),
    (["--stream", "key=dense:3"], "reserved"),
    ([], "declare at least one --stream"),
])
def test_bad_stream_arguments_exit_2_with_one_error_line(tmp_path, capsys, args, msg):
    p = write(tmp_path, SAMPLE)
    try:
        code = main(["cat", str(p), *args])
    except SystemExit as e:  # refused while parsing
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and msg in err and err.count("\n") == 1 and err.startswith("recordkit: error: ")


def test_missing_file(tmp_path, capsys):
    code, _, err = run(capsys, "cat", str(tmp_path / "none.ctf"), *STREAM_ARGS)
    assert code == 1 and "no such file" in err


def test_console_script_and_demo(tmp_path):
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "demo", "--dir", str(tmp_path),
                          "--sequences", "300"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "round trip: identical" in out.stdout and (tmp_path / "demo.ctf").exists()
    bridge = out.stdout.split("bridge:")[1:]
    assert len(bridge) == 2 and "parquet" in bridge[0] and "WebDataset" in bridge[1], out.stdout
    assert all("identical" in line for line in bridge)


def test_no_progress_bar_when_not_a_terminal(tmp_path):
    p = write(tmp_path, SAMPLE)
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "stats", str(p), *STREAM_ARGS],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stderr == ""


# ---------------------------------------------------------------------------------------------
# CBF: convert, inspect, cat/stats with streams from the header

def convert_sample(tmp_path, capsys, *extra):
    src = write(tmp_path, SAMPLE)
    out = tmp_path / "s.cbf"
    code, _, err = run(capsys, "convert", str(src), str(out), *STREAM_ARGS, *extra)
    assert code == 0, err
    return src, out, err


def test_convert_ctf_to_cbf_and_cat_gives_the_same_records(tmp_path, capsys):
    src, out, err = convert_sample(tmp_path, capsys)
    assert "converted 2 sequences" in err and "MB/s" in err
    _, ctf_lines, _ = run(capsys, "cat", str(src), *STREAM_ARGS)
    _, cbf_lines, _ = run(capsys, "cat", str(out))
    strip = lambda text: [{k: v for k, v in json.loads(x).items() if k != "key"} for x in text.splitlines()]
    assert strip(ctf_lines) == strip(cbf_lines)
    assert [json.loads(x)["key"] for x in cbf_lines.splitlines()] == [0, 1]


def test_convert_with_a_ctf2bin_header_file(tmp_path, capsys):
    src = write(tmp_path, SAMPLE)
    header = write(tmp_path, "A a dense 3\nB b sparse 10\n", "header.txt")
    code, _, err = run(capsys, "convert", str(src), str(tmp_path / "h.cbf"), "--header", str(header))
    assert code == 0, err
    _, out, _ = run(capsys, "inspect", str(tmp_path / "h.cbf"), "--json")
    info = json.loads(out)
    assert [s["name"] for s in info["streams"]] == ["A", "B"] and info["sequences"] == 2


def test_bad_header_file_names_its_line(tmp_path, capsys):
    src = write(tmp_path, SAMPLE)
    header = write(tmp_path, "A a dense 3\nB b sparse\n", "header.txt")
    code, _, err = run(capsys, "convert", str(src), str(tmp_path / "h.cbf"), "--header", str(header))
    assert code == 1 and f"{header}:2:1: expected 'name alias dense|sparse dim'" in err


def test_convert_cbf_back_to_ctf(tmp_path, capsys):
    src, cbf, _ = convert_sample(tmp_path, capsys, "--precision", "double")
    back = tmp_path / "back.ctf"
    code, _, err = run(capsys, "convert", str(cbf), str(back))
    assert code == 0, err
    _, a, _ = run(capsys, "cat", str(back), "--stream", "A=dense:3", "--stream", "B=sparse:10", "--precision", "double")
    _, b, _ = run(capsys, "cat", str(src), *STREAM_ARGS, "--precision", "double")
    assert [{k: v for k, v in json.loads(x).items() if k != "key"} for x in a.splitlines()] == \
           [{k: v for k, v in json.loads(x).items() if k != "key"} for x in b.splitlines()]


def test_cbf_cat_stream_option_renames_and_selects(tmp_path, capsys):
    _, cbf, _ = convert_sample(tmp_path, capsys)
    code, out, err = run(capsys, "cat", str(cbf), "--stream", "labels=sparse:10:B")
    assert code == 0, err
    assert list(json.loads(out.splitlines()[0])) == ["key", "labels"]
    code, _, err = run(capsys, "cat", str(cbf), "--stream", "labels=dense:10:B")
    assert code == 2 and "declared dense dim 10" in err


def test_cbf_stats_match_ctf_stats(tmp_path, capsys):
    src, cbf, _ = convert_sample(tmp_path, capsys)
    _, a, _ = run(capsys, "stats", str(src), *STREAM_ARGS, "--json")
    _, b, _ = run(capsys, "stats", str(cbf), "--json")
    assert json.loads(a) == json.loads(b)


def test_inspect_cbf_text_and_json(tmp_path, capsys):
    _, cbf, _ = convert_sample(tmp_path, capsys)
    code, out, _ = run(capsys, "inspect", str(cbf))
    assert code == 0 and "CBF" in out and "version 1" in out and "A" in out and "sequence lengths" in out
    _, out, _ = run(capsys, "inspect", str(cbf), "--json")
    info = json.loads(out)
    assert info["chunks"][0]["sequences"] == 2 and info["sequence_lengths"]["max"] == 2
    assert info["streams"][1] == {"name": "B", "format": "sparse", "dtype": "float32", "dim": 10}


def test_inspect_ctf_shows_the_index(tmp_path, capsys):
    p = write(tmp_path, SAMPLE)
    code, out, _ = run(capsys, "inspect", str(p), "--json")
    info = json.loads(out)
    assert code == 0 and info["mode"] == "sequence ids" and info["sequences"] == 2 and info["samples"] == 3


def test_corrupt_cbf_is_a_located_error(tmp_path, capsys):
    _, cbf, _ = convert_sample(tmp_path, capsys)
    data = bytearray(cbf.read_bytes())
    data[0] = 0
    cbf.write_bytes(bytes(data))
    code, _, err = run(capsys, "cat", str(cbf))
    assert code == 1 and "byte offset 0" in err


def test_convert_refuses_unknown_output_extension(tmp_path, capsys):
    src = write(tmp_path, SAMPLE)
    assert main(["convert", str(src), str(tmp_path / "x.weird"), *STREAM_ARGS]) == 2
    assert "--to" in capsys.readouterr().err
