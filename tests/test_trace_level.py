"""Trace levels, CNTK's meaning: 0 errors only (tolerated errors are counted,
not listed), 1 warnings too (each tolerated error, padded sample, unknown input), 2 information
too (each chunk loaded with its sequences and samples; each sweep of a MinibatchSource). The
same output from the command line (`--trace-level`) and from the Python API (``trace_level=``
on readers and MinibatchSource, or ``recordkit.errors.set_trace_level``); warnings point at the
caller's line, not at recordkit's source."""
import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

from helpers import dense, write
from recordkit.engine.source import MinibatchSource
from recordkit.engine.streams import StreamSpec
from recordkit.errors import RecordkitInfo, RecordkitWarning, UsageError, set_trace_level
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader

# one tolerated error (line 2), one padded sample (line 3), one undeclared input (line 4)
TEXT = "1 |a 1 2 3\n2 |a 1 x 3\n3 |a 7 8\n4 |a 1 1 1 |zz 1\n"
ARGS = ["--stream", "A=dense:3:a", "--max-errors", "1", "--chunk-size", "24"]


def cli(*argv):
    return subprocess.run([sys.executable, "-m", "recordkit.cli.main", *argv], capture_output=True, text=True,
                          timeout=120)


def lines(err: str, kind: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith(f"recordkit: {kind}: ")]


@pytest.mark.parametrize("command", ["cat", "stats", "convert", "read"])
def test_each_trace_level_of_each_command(tmp_path, command):
    p = write(tmp_path, TEXT)
    extra = {"convert": [str(tmp_path / "o.cbf")], "read": ["--mb-size", "2"]}.get(command, [])
    seen = {}
    for level in (0, 1, 2):
        out = cli(command, str(p), *extra, *ARGS, "--trace-level", str(level))
        assert out.returncode == 0, out.stderr
        seen[level] = out.stderr
        # the count of tolerated errors is printed at every level; level 0 says how to list them
        assert "1 error(s) tolerated" in out.stderr
        assert ("--trace-level 1 lists them" in out.stderr) == (level == 0)
    assert lines(seen[0], "warning") == [] and lines(seen[0], "info") == []
    # chunks may be parsed on several threads: their lines come in the order the chunks finish
    warned = sorted(lines(seen[1], "warning"), key=lambda line: int(line.split(":")[3]))
    assert len(warned) == 3 and lines(seen[1], "info") == []
    assert f"{p}:2:8: malformed value" in warned[0] and "sequence 2 skipped" in warned[0]
    assert "has 2 of 3 values: padded" in warned[1] and "input 'zz' is not declared" in warned[2]
    assert sorted(lines(seen[2], "warning")) == sorted(warned)
    info = lines(seen[2], "info")
    chunks = [line for line in info if " loaded: " in line]
    # 4 sequences in chunks of 24 bytes: one line per chunk, what it delivered (sequence 2 was dropped)
    assert len(chunks) >= 2 and all(line.startswith(f"recordkit: info: {p}: chunk ") for line in chunks)
    assert sum(int(line.split(" loaded: ")[1].split(" sequences")[0]) for line in chunks) == 3
    if command == "read":
        assert any(line.startswith("recordkit: info: sweep 0: 4 sequences") for line in info)


def test_trace_level_two_on_cbf_ofrecord_and_csv_inputs(tmp_path):
    cbf = tmp_path / "d.cbf"
    with CBFWriter(cbf, [StreamSpec("x", "dense", 2)], chunk_size=64) as w:
        for i in range(20):
            w.write({"x": np.full((1, 2), i, dtype=np.float32)})
    out = cli("stats", str(cbf), "--trace-level", "2")
    info = lines(out.stderr, "info")
    chunks = CBFReader(cbf).chunks
    assert len(chunks) > 1 and sorted(info) == sorted(
        f"recordkit: info: {cbf}: chunk {c.id} loaded: {c.num_sequences} sequences, {c.num_samples} samples, "
        f"{c.size} bytes at offset {c.offset}" for c in chunks)
    assert lines(cli("stats", str(cbf)).stderr, "info") == []

    ofr = tmp_path / "of"
    assert cli("convert", str(cbf), str(ofr), "--to", "ofrecord", "--parts", "2").returncode == 0
    out = cli("cat", str(ofr), "--trace-level", "2")
    assert [line.split(": part loaded: ")[1] for line in lines(out.stderr, "info")][0].startswith("10 records")
    assert lines(cli("cat", str(ofr)).stderr, "info") == []

    csv = tmp_path / "d.csv"
    csv.write_text("".join(f"{i % 2},{i},{i + 1}\n" for i in range(10)))
    out = cli("convert", str(csv), str(tmp_path / "c.cbf"), "--from", "csv", "--csv-dim", "2", "--trace-level", "2")
    assert lines(out.stderr, "info") == [f"recordkit: info: {csv}: chunk 0 loaded: 10 sequences, 10 samples, "
                                         f"{csv.stat().st_size} bytes at offset 0"]


def caught(fn):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        result = fn()
    return result, w


def read_ctf(path, **kw):
    with CTFReader(path, [dense("A", 3, "a")], max_errors=1, chunk_size=24, **kw) as r:
        return [s.key for s in r]


def test_python_readers_give_the_same_output_per_level(tmp_path):
    p = write(tmp_path, TEXT)
    by_level = {}
    for level in (0, 1, 2):
        keys, w = caught(lambda: read_ctf(p, trace_level=level))
        assert keys == [1, 3, 4]
        by_level[level] = w
    assert by_level[0] == []
    assert [type(x.message) for x in by_level[1]] == [RecordkitWarning] * 3
    assert [str(x.message) for x in by_level[2] if not isinstance(x.message, RecordkitInfo)] == \
        [str(x.message) for x in by_level[1]]
    assert any(isinstance(x.message, RecordkitInfo) and "chunk 0 loaded" in str(x.message) for x in by_level[2])


def test_the_default_level_is_set_process_wide_for_readers_made_without_one(tmp_path):
    p = write(tmp_path, TEXT)
    previous = set_trace_level(0)
    try:
        assert caught(lambda: read_ctf(p))[1] == []
        assert len(caught(lambda: read_ctf(p, trace_level=1))[1]) == 3  # an explicit level wins
    finally:
        set_trace_level(previous)
    assert len(caught(lambda: read_ctf(p))[1]) == 3


@pytest.mark.parametrize("bad", [-1, "2", True, 1.5])
def test_a_bad_trace_level_is_a_usage_error(tmp_path, bad):
    p = write(tmp_path, TEXT)
    with pytest.raises(UsageError, match="trace_level must be"):
        CTFReader(p, [dense("A", 3, "a")], trace_level=bad)


def test_minibatch_source_reports_each_sweep_at_level_two(tmp_path):
    p = write(tmp_path, "".join(f"{i} |a {i} 0 0\n" for i in range(6)))
    reader = CTFReader(p, [dense("A", 3, "a")], chunk_size=16, trace_level=1)

    def run(level):
        with MinibatchSource(reader, randomize=True, seed=3, max_sweeps=2, trace_level=level) as src:
            return sum(mb.num_sequences for mb in src.minibatches(4))
    n, w = caught(lambda: run(2))
    assert n == 12
    sweeps = [str(x.message) for x in w]
    assert len(sweeps) == 2 and all(isinstance(x.message, RecordkitInfo) for x in w)
    assert sweeps[0].startswith("sweep 0: 6 sequences, 6 samples in ") and "randomized (seed 3," in sweeps[0]
    assert sweeps[1].startswith("sweep 1: ") and "seed 4" in sweeps[1] and "worker 0 of 1" in sweeps[1]
    assert caught(lambda: run(1))[1] == []


def test_cntk_compat_trace_level_reaches_readers_and_engine(tmp_path):
    from recordkit.compat.cntk import CTFDeserializer, MinibatchSource as CntkSource, StreamDef, StreamDefs, TraceLevel
    p = write(tmp_path, TEXT)

    def run(level):
        d = CTFDeserializer(str(p), StreamDefs(A=StreamDef(field="a", shape=3)))
        src = CntkSource(d, max_sweeps=1, randomize=False, trace_level=level, max_errors=1)
        while src.next_minibatch(2):
            pass
    _, w = caught(lambda: run(TraceLevel.Info))
    kinds = {type(x.message) for x in w}
    assert kinds == {RecordkitWarning, RecordkitInfo}
    assert any(str(x.message).startswith("sweep 0:") for x in w)
    assert caught(lambda: run(TraceLevel.Error))[1] == []


def test_a_warning_points_at_the_callers_line_not_at_recordkit(tmp_path):
    """Python's display of a warning shows the line it is attributed to: the user's call, not a
    line of recordkit's source."""
    p = write(tmp_path, "|a 1\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        list(CTFReader(p, [dense("A", 3, "a")], allow_padding=["A"]))  # the padded sample's warning is attributed here
    assert len(w) == 1 and w[0].filename == __file__
    code = ("import warnings, sys\nfrom recordkit.formats.ctf import CTFReader\nfrom recordkit import StreamSpec\n"
            f"r = CTFReader({str(p)!r}, [StreamSpec('A', 'dense', 3, 'a')], allow_padding=['A'])\n"
            "seqs = list(r)  # USER LINE\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "RecordkitWarning: " in out.stderr and "recordkit/" not in out.stderr
    assert out.stderr.startswith("<string>:5: RecordkitWarning:"), out.stderr


def test_warnings_on_worker_threads_show_no_recordkit_source_line(tmp_path):
    p = write(tmp_path, "".join(f"{i} |a 1\n" for i in range(50)))
    code = ("import warnings\nfrom recordkit.formats.ctf import CTFReader\nfrom recordkit import StreamSpec\n"
            "from recordkit.engine.source import MinibatchSource\n"
            f"r = CTFReader({str(p)!r}, [StreamSpec('A', 'dense', 3, 'a')], chunk_size=64, allow_padding=['A'])\n"
            "s = MinibatchSource(r, randomize=False, max_sweeps=1)\n"
            "while s.next_minibatch(8) is not None:\n    pass\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "RecordkitWarning: " in out.stderr
    assert "recordkit/" not in out.stderr and "warnings.warn" not in out.stderr and "threading" not in out.stderr
