"""A huge declared dim on a tiny file: dims are range-checked where they are
declared, and a chunk whose zero padding could not fit is refused with the size it would need,
before anything is allocated."""
import subprocess
import sys

import numpy as np
import pytest

import recordkit
from helpers import PEAK_RSS_CODE
from recordkit.engine.streams import StreamSpec
from recordkit.errors import FormatError
from recordkit.formats.ctf import CTFReader


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.ctf"
    p.write_text("0 |x 1\n")
    return p


@pytest.mark.parametrize("dim", [2**31, 2**62, 2**64 - 1])
def test_a_dim_beyond_the_format_range_is_refused_where_it_is_declared(tiny, dim):
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "stats", str(tiny), "--stream",
                          f"x=dense:{dim}"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr  # an argument error: refused while parsing
    assert f"dense dim {dim} exceeds 2147483647" in out.stderr and "Traceback" not in out.stderr
    with pytest.raises(ValueError, match="exceeds 2147483647"):
        StreamSpec("x", "dense", dim)


def test_a_brainscript_dim_beyond_the_range_is_a_located_error(tiny):
    text = ('reader = [\n readerType = "CNTKTextFormatReader"\n file = "%s"\n randomize = false\n'
            ' input = [\n  x = [ dim = 4611686018427387904 ; format = "dense" ]\n ]\n]' % tiny)
    with pytest.raises(FormatError, match=r"<config>:6:\d+: Sample dimension \(4611686018427387904\) for dense"):
        recordkit.from_config(text, max_sweeps=1)


def test_padding_a_tiny_file_to_a_huge_dim_is_refused_without_allocating_it(tiny):
    code = (PEAK_RSS_CODE + "import sys\n"
            "from recordkit.cli.main import main\n"
            f"rc = main(['stats', {str(tiny)!r}, '--stream', 'x=dense:1000000000'])\n"
            "print(rc, peak_rss_kb())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    rc, peak_kb = out.stdout.split()
    assert rc == "1"
    assert int(peak_kb) < 400 * 1024  # was 7.9 GB
    assert "dim 1000000000) would need 3.7 GiB" in out.stderr and "zero padding" in out.stderr
    assert "chunk 0" in out.stderr and "byte offset 0" in out.stderr


def test_the_python_reader_and_the_converter_refuse_it_too(tiny, tmp_path):
    with CTFReader(tiny, [StreamSpec("x", "dense", 10**9)]) as r, pytest.raises(FormatError, match="zero padding"):
        r.load_chunk(0)
    out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", str(tiny), str(tmp_path / "o.cbf"),
                          "--stream", "x=dense:1000000000"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and "zero padding" in out.stderr
    assert not (tmp_path / "o.cbf").exists()


def test_a_wide_dim_with_complete_data_is_still_read(tmp_path):
    """Complete dense rows pad to at most 4x their text: never refused, however wide."""
    p = tmp_path / "wide.ctf"
    p.write_text("".join(f"{i} |x " + " ".join(["1"] * 5000) + "\n" for i in range(20)))
    with CTFReader(p, [StreamSpec("x", "dense", 5000)]) as r:
        assert r.load_chunk(0).columns["x"].values.shape == (20, 5000)


def test_a_partly_padded_stream_below_the_floor_is_read_with_warnings(tiny):
    with CTFReader(tiny, [StreamSpec("x", "dense", 100_000)], allow_padding=["x"]) as r, pytest.warns(Warning):
        col = r.load_chunk(0).columns["x"].values
    assert col.shape == (1, 100_000) and col[0, 0] == 1 and not np.any(col[0, 1:])
