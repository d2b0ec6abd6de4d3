"""The converter's fast path (formats/cbf/from_ctf.py: CTF parsed straight into CBF records)
writes the same bytes as CTFReader -> CBFWriter, and tolerates and reports errors the same way."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from recordkit import StreamSpec
from recordkit.cli.main import main
from recordkit.errors import FormatError
from recordkit.formats.cbf import CBFReader, CBFWriter, from_ctf
from recordkit.formats.cbf import output as cbf_output
from recordkit.formats.ctf import CTFReader

REPO = Path(__file__).resolve().parents[1]
INPUTS = sorted((REPO / "tests/data/ctf_oracle/inputs").glob("*.ctf")) + \
    sorted((REPO / "tests/data/cbf_oracle/inputs").glob("*.ctf"))


def _case(path: Path):
    cfg = json.loads(path.with_suffix(".json").read_text())
    streams = [StreamSpec(s["name"], s["format"], s["dim"], s.get("alias")) for s in cfg["streams"]]
    kw = dict(precision=cfg.get("precision", "float"), skip_sequence_ids=cfg.get("skip_sequence_ids", False),
              max_errors=cfg.get("max_errors", 0))
    return streams, kw


def _via_writer(src, streams, kw, out, in_chunk, out_chunk):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CTFReader(src, streams, chunk_size=in_chunk, **kw)
        with r, CBFWriter(out, r.streams, precision=kw["precision"], chunk_size=out_chunk) as w:
            for chunk in r.iter_chunks(threads=2, whole=False):
                w.write_chunk(chunk)
        return w.sequences_written, r.summary()


def _via_fast_path(src, streams, kw, out, in_chunk, out_chunk, threads=2):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CTFReader(src, streams, chunk_size=in_chunk, **kw)
        with r:
            n = from_ctf.convert(r, out, chunk_size=out_chunk, threads=threads)
        return n, r.summary()


@pytest.mark.parametrize("src", INPUTS, ids=lambda p: p.stem)
@pytest.mark.parametrize("in_chunk,out_chunk,threads", [(32 << 20, 32 << 20, 2), (300, 700, 2), (64, 1, 1),
                                                        (1000, 1 << 20, 2)])
def test_fast_path_writes_the_same_bytes_as_cbf_writer(src, in_chunk, out_chunk, threads, tmp_path):
    streams, kw = _case(src)
    a, b = tmp_path / "writer.cbf", tmp_path / "fast.cbf"
    try:
        expected = _via_writer(src, streams, kw, a, in_chunk, out_chunk)
    except FormatError as e:
        with pytest.raises(FormatError) as got:
            _via_fast_path(src, streams, kw, b, in_chunk, out_chunk, threads)
        assert str(got.value) == str(e)
        assert not b.exists() and list(tmp_path.iterdir()) == []  # no output, no temporary file left
        return
    assert _via_fast_path(src, streams, kw, b, in_chunk, out_chunk, threads) == expected
    assert b.read_bytes() == a.read_bytes()


def test_fast_path_double_precision_reads_back(tmp_path):
    src = tmp_path / "d.ctf"
    src.write_text("|a 1.5 -2e300 |b 3:0.1\n|a 0 1e-320\n|b 0:1 1:2 2:3\n")
    streams = [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 4)]
    a, b = tmp_path / "w.cbf", tmp_path / "f.cbf"
    _via_writer(src, streams, dict(precision="double", skip_sequence_ids=False, max_errors=0), a, 1 << 20, 1 << 20)
    _via_fast_path(src, streams, dict(precision="double", skip_sequence_ids=False, max_errors=0), b, 1 << 20, 1 << 20)
    assert b.read_bytes() == a.read_bytes()
    with CBFReader(b) as r:
        assert [str(s.dtype) for s in r.streams] == ["float64", "float64"]


def test_cli_convert_takes_the_fast_path_and_matches_cbf_writer(tmp_path, capsys, monkeypatch):
    src = REPO / "tests/data/cbf_oracle/inputs/mixed_jagged.ctf"
    streams, kw = _case(src)
    a = tmp_path / "w.cbf"
    _via_writer(src, streams, kw, a, 32 << 20, 5000)
    calls = []
    real = from_ctf.convert
    monkeypatch.setattr(from_ctf, "convert", lambda *x, **k: calls.append(1) or real(*x, **k))
    argv = ["convert", str(src), str(tmp_path / "c.cbf"), "--precision", kw["precision"], "--output-chunk-size", "5000"]
    for s in streams:
        argv += ["--stream", f"{s.name}={s.format}:{s.dim}:{s.alias}"]
    assert main(argv) == 0
    assert calls == [1]
    assert (tmp_path / "c.cbf").read_bytes() == a.read_bytes()
    assert "converted" in capsys.readouterr().err


def test_error_beyond_budget_leaves_no_output(tmp_path):
    src = tmp_path / "bad.ctf"
    src.write_text("|a 1 2\n" * 50 + "|a 1 x\n" + "|a 3 4\n" * 50)
    out = tmp_path / "o.cbf"
    r = CTFReader(src, [StreamSpec("a", "dense", 2)], chunk_size=200)
    with pytest.raises(FormatError, match="bad.ctf:51:"):
        from_ctf.convert(r, out, chunk_size=100)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.ctf"]


def test_last_chunk_guess_both_ways_gives_the_same_bytes(tmp_path, monkeypatch):
    """The last-chunk guess (its stream-0 records written before it closes) must not change the
    file, whether it holds or not (a dropped sequence, a chunk that fills up before the end)."""
    seen = []
    real = from_ctf._Chunker.flush

    def flush(self):
        real(self)
        seen.append(tuple(self.guesses))
    monkeypatch.setattr(from_ctf._Chunker, "flush", flush)
    streams = [StreamSpec("a", "dense", 2), StreamSpec("b", "sparse", 7)]
    results = set()
    for bad_line in (None, 390, 10):
        src = tmp_path / "g.ctf"
        src.write_text("".join(f"|a {i} {'x' if i == bad_line else i * 0.5} |b {i % 7}:1.5 {(i * 3) % 7}:2\n"
                               for i in range(400)))
        kw = dict(precision="float", skip_sequence_ids=False, max_errors=1)
        for out_chunk in (1500, 4000, 9000, 30000):
            a, b = tmp_path / "w.cbf", tmp_path / "f.cbf"
            expected = _via_writer(src, streams, kw, a, 2000, out_chunk)
            seen.clear()
            assert _via_fast_path(src, streams, kw, b, 2000, out_chunk) == expected
            assert b.read_bytes() == a.read_bytes()
            results.add(seen[-1])
    assert any(h for h, m in results) and any(m for h, m in results), results


@pytest.mark.parametrize("step", [1, 7, 4096])
def test_writes_in_small_steps_give_the_same_bytes(step, tmp_path, monkeypatch):
    monkeypatch.setattr(cbf_output, "WRITE_STEP", step)
    src = REPO / "tests/data/cbf_oracle/inputs/mixed_jagged.ctf"
    streams, kw = _case(src)
    a, b = tmp_path / "w.cbf", tmp_path / "f.cbf"
    expected = _via_writer(src, streams, kw, a, 2000, 3000)
    assert _via_fast_path(src, streams, kw, b, 2000, 3000) == expected
    assert b.read_bytes() == a.read_bytes()
