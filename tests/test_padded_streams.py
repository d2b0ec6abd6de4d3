"""A declared dense dim that no sample reaches, and the warnings a command counted without showing.

``features=dense:5`` over rows of 4 values used to zero-pad every sample and exit 0 after 20
warnings; now it is an error naming both widths, unless ``--allow-padding`` /
``allow_padding=`` allows it. Short rows in *some* samples stay what CTF (and CNTK) make of them:
padded, with a warning. Warnings past the per-kind limit are counted, and the command prints the
count at its end.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit.cli.main import main
from recordkit.engine.presence import PaddedStreamError
from recordkit.errors import FormatError, UsageError
from recordkit.formats.ctf import CTFReader

STREAMS = ["--stream", "features=dense:5:f", "--stream", "label=sparse:3:l"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def rows(tmp_path, n=100, width=4, full=()):
    """``n`` one-line sequences with ``width`` values of input f (5 in the lines ``full``) and a label."""
    lines = []
    for k in range(n):
        w = 5 if k in full else width
        lines.append(f"{k} |f {' '.join(str(k + v) for v in range(w))} |l {k % 3}:1\n")
    return write(tmp_path, "".join(lines))


def quietly(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def test_read_with_a_dense_dim_no_sample_reaches_is_an_error_naming_both_widths(tmp_path, capsys):
    src = rows(tmp_path)
    code, _, err = run(capsys, "read", src, "--mb-size", "16", *STREAMS)
    assert code == 1
    last = err.splitlines()[-1]
    assert last.startswith(f"recordkit: error: {src}:1:3: dense stream 'features' is wider than its data: "
                           f"declared 5, the data has 4 (no sample has more than 4 values; all 100 samples")
    assert "--allow-padding features (allow_padding=['features'])" in last


def test_allow_padding_lets_the_read_through_by_name_or_alias(tmp_path, capsys):
    src = rows(tmp_path)
    for name in ("features", "f"):
        code, out, err = run(capsys, "read", src, "--mb-size", "16", *STREAMS, "--allow-padding", name,
                             "--trace-level", "0")
        assert code == 0 and "100 samples" in out, err
    r = CTFReader(src, [dense("features", 5, "f"), sparse("label", 3, "l")], trace_level=0,
                  allow_padding=("features",))
    with r:
        values = np.concatenate([c.columns["features"].values for c in r.iter_chunks()])
    assert values.shape == (100, 5) and not values[:, 4].any()


def test_short_rows_in_some_samples_are_padded_as_cntk_pads_them(tmp_path):
    src = rows(tmp_path, full={57})
    with pytest.warns(UserWarning, match="has 4 of 5 values: padded with zeros"):
        with CTFReader(src, [dense("features", 5, "f"), sparse("label", 3, "l")]) as r:
            values = np.concatenate([c.columns["features"].values for c in r.iter_chunks()])
    assert values[57].tolist() == [57, 58, 59, 60, 61] and values[3].tolist() == [3, 4, 5, 6, 0]


def test_minibatch_source_raises_at_the_end_of_a_randomized_sweep(tmp_path):
    from recordkit.engine.source import MinibatchSource
    src = rows(tmp_path, n=300, width=3)
    reader = CTFReader(src, [dense("features", 5, "f"), sparse("label", 3, "l")], chunk_size=1024, trace_level=0)
    assert len(reader.chunks) > 2
    source = MinibatchSource(reader, randomize=True, seed=1, max_sweeps=1)
    with pytest.raises(PaddedStreamError) as err:
        while source.next_minibatch(64) is not None:
            pass
    e = err.value
    assert isinstance(e, FormatError) and e.streams == ["features"] and e.widths == {"features": (5, 3)}
    assert (e.line, e.column) == (1, 3)  # the earliest padded sample, whichever chunk was read first


def test_ctf_to_cbf_conversion_with_too_wide_a_dim_writes_nothing(tmp_path, capsys):
    src = rows(tmp_path)
    code, _, err = run(capsys, "convert", src, tmp_path / "o.cbf", *STREAMS, "--trace-level", "0")
    assert code == 1 and "declared 5, the data has 4" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.ctf"]


def test_allow_padding_rejects_unknown_names(tmp_path):
    src = rows(tmp_path, n=2)
    with pytest.raises(UsageError, match="allow_padding: no stream 'feature' is declared"):
        CTFReader(src, [dense("features", 5, "f")], allow_padding=["feature"])


def test_warnings_past_the_limit_are_counted_at_the_end_of_the_command(tmp_path, capsys):
    """599 padded samples in one chunk, parsed in two pieces: 20 listed, the kernel records the
    first 256 of each piece and counts the rest, and the command's last warning line gives the 579
    it did not show."""
    src = rows(tmp_path, n=600, full={599})
    code, _, err = run(capsys, "cat", src, *STREAMS)
    assert code == 0
    lines = err.splitlines()
    assert sum("has 4 of 5 values: padded with zeros" in line for line in lines) == 20
    assert lines[-1] == (f"recordkit: warning: {src}: 579 more warning(s) of this kind (dense input padded with "
                         f"zeros) were counted but not shown")


def test_the_count_of_unshown_warnings_comes_before_the_error(tmp_path, capsys):
    src = rows(tmp_path, n=30)
    code, _, err = run(capsys, "cat", src, *STREAMS)
    assert code == 1
    lines = err.splitlines()
    assert lines[-2] == (f"recordkit: warning: {src}: 10 more warning(s) of this kind (dense input padded with "
                         f"zeros) were counted but not shown")
    assert lines[-1].startswith("recordkit: error: ") and "declared 5, the data has 4" in lines[-1]
