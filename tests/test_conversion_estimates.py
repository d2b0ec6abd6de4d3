"""Conversions that change the data's nature say so before they run."""
import os

import numpy as np
import pytest

from recordkit.cli.main import main
from recordkit.compose import convert as conversion
from recordkit.errors import RecordkitWarning


def tagging_corpus(path, n=123, seed=0):
    """A tagging corpus: id-mode sentences of one-hot words (dim 50000) and tags (dim 50)."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n):
        for _ in range(int(rng.integers(3, 25))):
            lines.append(f"{s} |w {int(rng.integers(0, 50000))}:1 |t {int(rng.integers(0, 50))}:1")
    path.write_text("\n".join(lines) + "\n")
    return path


ISSUE_STREAMS = ["--stream", "word=sparse:50000:w", "--stream", "tag=sparse:50:t"]


def test_densifying_into_a_singa_store_is_refused_with_the_estimate(tmp_path, capsys):
    src = tagging_corpus(tmp_path / "s.ctf")
    out = tmp_path / "s.kv"
    code = main(["convert", str(src), str(out), "--to", "kvfile", *ISSUE_STREAMS])
    err = capsys.readouterr().err
    assert code == 2
    assert "would grow the data about" in err and "--allow-densify" in err
    assert "word (dim 50000) written dense" in err
    size_kb = src.stat().st_size / 1e3
    assert f"{size_kb:.1f} KB -> about" in err and " MB" in err
    assert not out.exists() and [n for n in os.listdir(tmp_path) if n.startswith(".s.kv")] == []


def test_allow_densify_converts_with_a_warning_and_the_estimate_is_close(tmp_path, capsys):
    src = tagging_corpus(tmp_path / "s.ctf", n=20)
    out = tmp_path / "s.kv"
    code = main(["convert", str(src), str(out), "--to", "kvfile", *ISSUE_STREAMS, "--allow-densify"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "warning:" in err and "written dense" in err and "drops stream(s) tag" in err
    assert "drops sequence boundaries" in err
    import re
    est_mb = float(re.search(r"about ([\d.]+) MB", err).group(1))
    actual_mb = out.stat().st_size / 1e6
    assert 0.8 * actual_mb <= est_mb <= 1.25 * actual_mb


def test_estimate_from_the_first_chunk_scales_to_the_whole_input(tmp_path):
    from recordkit.compose.convert import estimate, open_reader
    src = tagging_corpus(tmp_path / "s.ctf", n=400)
    reader = open_reader(str(src), streams=ISSUE_STREAMS[1::2], chunk_size=4096)
    assert len(reader.chunks) > 5
    est = estimate(reader, reader.load_chunk(0), "kvfile", "float", input_bytes=src.stat().st_size)
    samples = sum(c.num_samples for c in reader.chunks)
    assert est.densified == [("word", 50000)]
    assert 0.7 * samples * 50000 * 4 <= est.output_bytes <= 1.3 * samples * 50000 * 4


def test_lossless_conversions_do_not_warn(tmp_path, capsys):
    src = tagging_corpus(tmp_path / "s.ctf", n=30)
    for out, extra in ((tmp_path / "a.ctf", []), (tmp_path / "o", ["--to", "ofrecord"])):
        assert main(["convert", str(src), str(out), *ISSUE_STREAMS, *extra]) == 0
        assert "warning" not in capsys.readouterr().err


def test_ids_dropped_by_cbf_are_noted_but_line_numbers_are_not(tmp_path, capsys):
    src = tagging_corpus(tmp_path / "s.ctf", n=10)
    text = src.read_text()
    src.write_text("".join(f"{int(line.split(maxsplit=1)[0]) + 100} {line.split(maxsplit=1)[1]}\n"
                           for line in text.splitlines()))  # ids 100.. are not CBF's positions 0..N-1
    assert main(["convert", str(src), str(tmp_path / "a.cbf"), *ISSUE_STREAMS]) == 0
    err = capsys.readouterr().err
    assert "recordkit: note: CBF has no sequence ids" in err and "drops sequence keys" not in err
    plain = tmp_path / "p.ctf"
    plain.write_text("|x 1 2\n|x 3 4\n")
    assert main(["convert", str(plain), str(tmp_path / "p.cbf"), "--stream", "x=dense:2"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_float64_into_a_singa_store_warns_about_narrowing(tmp_path, capsys):
    src = tmp_path / "d.ctf"
    src.write_text("|x 0.1 0.2\n|x 0.3 0.4\n")
    assert main(["convert", str(src), str(tmp_path / "d.kv"), "--to", "kvfile", "--stream", "x=dense:2",
                 "--precision", "double"]) == 0
    assert "float64 values narrowed to float32" in capsys.readouterr().err


def test_library_refusal_is_a_usage_error_and_allow_densify_passes(tmp_path):
    src = tagging_corpus(tmp_path / "s.ctf", n=10)
    with pytest.raises(conversion.ConversionRefused, match="allow_densify"):
        conversion.convert(str(src), tmp_path / "x.kv", "kvfile", ISSUE_STREAMS[1::2])
    with pytest.warns(RecordkitWarning, match="written dense"):
        result = conversion.convert(str(src), tmp_path / "x.kv", "kvfile", ISSUE_STREAMS[1::2], allow_densify=True)
    assert result.sequences == 10 and result.estimate.growth > 10


def test_a_deserializer_without_byte_sizes_is_not_refused_but_still_warned_about(tmp_path):
    """A Deserializer passed in (not a path) whose chunks report no sizes: the growth cannot be judged."""
    from recordkit.compose.convert import open_reader
    from recordkit.engine.deserializer import ChunkInfo
    src = tagging_corpus(tmp_path / "s.ctf", n=5)
    inner = open_reader(str(src), streams=ISSUE_STREAMS[1::2])

    class NoSizes:
        streams = inner.streams
        chunks = [ChunkInfo(c.id, c.num_sequences, c.num_samples) for c in inner.chunks]
        load_chunk = staticmethod(inner.load_chunk)

    with pytest.warns(RecordkitWarning, match="written dense"):
        result = conversion.convert(NoSizes(), tmp_path / "x.kv", "kvfile")
    assert result.sequences == 5 and result.estimate.growth == 0.0
