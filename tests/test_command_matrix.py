"""Every command on every format recordkit writes: one small data set per format, made once per
module with ``recordkit convert`` from a tiny CTF (a dense and a sparse stream, sequences of 1 to
3 samples), and each command run through the CLI in-process (``recordkit.cli.main.main``). A cell
fails when its command exits non-zero, unless the registry declares the pair unsupported with a
one-line reason (``registry.unsupported``); the same reasons fill the matrix of docs/formats.md.
"""
from __future__ import annotations

import base64
import contextlib
import io
import json
import shutil

import pytest

from recordkit.cli.main import COMMANDS, main
from recordkit.formats import registry

CTF = """0 |f 1 2 3 |s 0:1 4:2
0 |f 4 5 6 |s 2:3
0 |f 7 8 9
1 |f 0.5 0.25 1 |s 1:1
2 |f 1 1 1 |s 3:1 4:1
2 |f 2 2 2
"""
STREAMS = ["--stream", "f=dense:3", "--stream", "s=sparse:5"]
WRITTEN = registry.writable()
OUTPUT_NAMES = {"cbf": "data.cbf", "parquet": "data.parquet", "ctf": "data.ctf"}  # the others: a directory/file named data.FORMAT


def run(argv) -> tuple[int, str, str]:
    """``recordkit ARGV`` in this process: (exit status, stdout, stderr)."""
    out, err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    out.flush()
    return int(code or 0), out.buffer.getvalue().decode("utf-8", "replace"), err.getvalue()


@pytest.fixture(scope="module")
def data_sets(tmp_path_factory):
    """format -> a small data set in it, converted from the tiny CTF."""
    root = tmp_path_factory.mktemp("matrix")
    source = root / "tiny.ctf"
    source.write_text(CTF)
    made = {}
    for fmt in WRITTEN:
        if registry.get(fmt).missing():
            continue
        out = root / OUTPUT_NAMES.get(fmt, f"data.{fmt}")
        code, _, err = run(["convert", str(source), str(out), "--to", fmt] + STREAMS)
        assert code == 0, f"convert --to {fmt}: {err}"
        made[fmt] = str(out)
    made["source"] = str(source)
    return made


def _streams(fmt: str) -> list[str]:
    """--stream for the formats whose data does not declare its streams (CTF text)."""
    return STREAMS if registry.get(fmt).needs_streams else []


def _argv(command: str, fmt: str, path: str, tmp_path) -> list[list[str]]:
    """The command line(s) one cell runs."""
    s = _streams(fmt)
    if command == "cat":
        return [["cat", path] + s]
    if command == "stats":
        return [["stats", path] + s]
    if command == "convert":
        return [["convert", path, str(tmp_path / "back.cbf"), "--to", "cbf"] + s]
    if command == "inspect":
        return [["inspect", path] + s]
    if command == "read":
        return [["read", path, "--mb-size", "2"] + s, ["read", path, "--mb-size", "2", "--randomize"] + s]
    if command == "validate":
        return [["validate", path] + s]
    if command == "verify":
        return [["verify", path, path] + s]
    if command == "plan":
        return [["plan", path, "--mb-size", "2"] + s, ["plan", path, "--mb-size", "2", "--randomize"] + s]
    if command == "reshard":
        return [["reshard", path, str(tmp_path / "resharded"), "--parts", "2"]]
    if command == "checksum":
        copy = tmp_path / "copy"
        (shutil.copytree if registry.get(fmt).output_directory else shutil.copy)(path, copy)
        return [["checksum", "create", str(copy)], ["checksum", "verify", str(copy)]]
    if command == "report":
        return [["report", path, "-o", str(tmp_path / "report.html")] + s]
    raise AssertionError(f"no command line for {command}: add one")


@pytest.mark.parametrize("fmt", WRITTEN)
@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_works_on_every_written_format(data_sets, command, fmt, tmp_path):
    reason = registry.unsupported(command, fmt)
    if reason is not None:
        assert reason.strip() and "\n" not in reason, f"{command} x {fmt}: the reason must be one line"
        return
    if fmt not in data_sets:
        pytest.skip(f"{fmt}: {', '.join(registry.get(fmt).missing())} not installed")
    for argv in _argv(command, fmt, data_sets[fmt], tmp_path):
        code, _, err = run(argv)
        assert code == 0, f"recordkit {' '.join(argv)} -> exit {code}: {err.strip()[-600:]}"


def test_every_unsupported_cell_is_refused_with_its_reason():
    """The registry's reasons cover only commands that take no data set of that format."""
    for command in COMMANDS:
        for fmt in WRITTEN:
            reason = registry.unsupported(command, fmt)
            assert reason is None or (reason and "\n" not in reason)
    assert registry.unsupported("cat", "ctf") is None
    assert registry.unsupported("reshard", "ofrecord") is None
    assert registry.unsupported("reshard", "parquet")


# -- the cells that did not work, each checked for what it prints -------------------------------------------------
def test_ofrecord_read_and_plan_use_the_recorded_streams(data_sets):
    for argv in (["read", data_sets["ofrecord"], "--mb-size", "2", "--randomize"],
                 ["plan", data_sets["ofrecord"], "--mb-size", "2"]):
        code, _, err = run(argv)
        assert code == 0 and "for a CTF file" not in err, err


def test_kvfile_written_from_sequences_of_several_lengths_reads_back_one_record_per_sample(data_sets):
    code, out, err = run(["cat", data_sets["kvfile"], "--store", "kvfile"])
    assert code == 0, err
    assert len(out.splitlines()) == 6  # 3 + 1 + 2 samples, each a record of the dense stream's 3 values
    code, out, err = run(["stats", data_sets["kvfile"], "--json"])
    assert code == 0, err
    totals = json.loads(out)
    assert totals["sequences"] == 6 and totals["streams"]["features"]["samples"] == 6
    assert totals["streams"]["features"]["sum"] == pytest.approx(45 + 1.75 + 9)


def test_inspect_of_ctf_shows_the_declared_streams(data_sets):
    code, out, err = run(["inspect", data_sets["ctf"], "--stream", "f=dense:3:F", "--stream", "s=sparse:5"])
    assert code == 0, err
    assert "2 declared streams" in out and "(alias F)" in out


def test_inspect_plot_says_what_it_wrote(data_sets, tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "lengths.png"
    code, _, err = run(["inspect", data_sets["ctf"], "--plot", str(png)])
    assert code == 0 and png.exists(), err
    assert f"wrote the sequence-length histogram to {png}" in err


def test_cat_of_ofrecord_with_stream_prints_those_streams(data_sets):
    code, out, err = run(["cat", data_sets["ofrecord"], "--stream", "f=dense:3"])
    assert code == 0, err
    import json
    first = json.loads(out.splitlines()[0])
    assert set(first) == {"key", "f"} and first["f"] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def test_verify_takes_an_ofrecord_sets_recorded_streams(data_sets):
    code, out, err = run(["verify", data_sets["ofrecord"], data_sets["cbf"]])
    assert code == 0, err + out


def test_ofrecord_deserializer_takes_stream_texts(data_sets):
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    with OFRecordDeserializer(data_sets["ofrecord"], ["f=dense:3:f"]) as reader:
        assert [s.name for s in reader.streams] == ["f"]
        assert reader.load_chunk(0).columns["f"].sequence(0).tolist()[0] == [1, 2, 3]


@pytest.mark.parametrize("content,name,says", [
    (b"label,a,b\n1,2,3\n", "x.csv", "--from csv --csv-dim N"),
    (b"\x1f\x8b\x08\x00" + bytes(20), "x.ctf.gz", "gzip-compressed"),
    (b"\xff\xd8\xff\xe0" + bytes(20), "x.jpg", "a JPEG image, not a data set"),
    (b"\x89PNG\r\n\x1a\n" + bytes(20), "x.png", "a PNG image, not a data set"),
])
@pytest.mark.parametrize("command", ["cat", "stats", "convert", "report"])
def test_a_file_that_is_not_ctf_text_is_named_for_what_it_is(tmp_path, content, name, says, command):
    path = tmp_path / name
    path.write_bytes(content)
    extra = {"convert": [str(tmp_path / "o.cbf")], "report": ["-o", str(tmp_path / "r.html")]}.get(command, [])
    code, _, err = run([command, str(path)] + extra)
    assert code != 0 and says in err and "for a CTF file" not in err, err


def _ofrecord_with_images(path, n=3):
    from PIL import Image
    import numpy as np
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(str(path), 1) as w:
        for i in range(n):
            buf = io.BytesIO()
            Image.fromarray(np.full((4, 5, 3), i * 40, np.uint8)).save(buf, format="JPEG")
            w.write({"encoded": buf.getvalue(), "class/label": np.array([i], np.int32), "key": np.array([100 + i])})


def test_webdataset_of_ofrecord_images_is_read_by_recordkits_own_commands(tmp_path):
    pytest.importorskip("PIL")
    _ofrecord_with_images(tmp_path / "of")
    out = tmp_path / "wds"
    code, _, err = run(["convert", str(tmp_path / "of"), str(out), "--to", "webdataset", "--image-feature", "encoded"])
    assert code == 0, err
    for argv in (["cat", str(out)], ["stats", str(out)], ["validate", str(out)]):
        code, stdout, err = run(argv)
        assert code == 0, f"{argv}: {err}"
    code, stdout, _ = run(["cat", str(out)])
    first = json.loads(stdout.splitlines()[0])   # the image is a recorded bytes stream: nothing left behind
    assert set(first) == {"key", "class_label", "jpg"} and first["class_label"] == [[0.0]] and first["key"] == 100
    assert base64.b64decode(first["jpg"]["base64"])[:3] == b"\xff\xd8\xff"


@pytest.mark.parametrize("fmt", WRITTEN)
def test_every_reader_locates_a_sequence_in_its_files(data_sets, fmt):
    """``sequence_location(chunk_id, index, sample)``: what verify and errors print, from the reader
    itself (no caller reads a reader's private index)."""
    if fmt not in data_sets:
        pytest.skip(f"{fmt} not installed")
    streams = STREAMS[1::2] if registry.get(fmt).needs_streams else None
    with registry.get(fmt).open_reader(data_sets[fmt], streams) as reader:
        where = reader.sequence_location(0, 1, 0)
    assert where.startswith(data_sets[fmt]) and "sample 0" in where, where
