"""Every command on every format recordkit writes: one small data set per format, made once per
module with ``recordkit convert`` from a tiny CTF (a dense and a sparse stream, sequences of 1 to
3 samples), and each command run through the CLI in-process (``recordkit.cli.main.main``). A cell
fails when its command exits non-zero, unless the registry declares the pair unsupported with a
one-line reason (``registry.unsupported``); the same reasons fill the matrix of docs/formats.md.
"""
from __future__ import annotations

import contextlib
import io
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
