"""What the command line says about stats tables with long
names, missing files (every kind the same: `NAME: no such file`), special files, directories
that are no data set, the sizes a CSV conversion reports; and the package metadata `make demo`
builds from."""
import os
import re
import subprocess
import sys
import tomllib
import warnings
from pathlib import Path

import pytest

from helpers import write
from recordkit.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_stats_table_stays_aligned_with_long_stream_names(tmp_path, capsys):
    p = write(tmp_path, "|a 1 2 |b 3:1\n|a -1250000.5 4\n")
    long = "a_stream_name_longer_than_any_column"
    code, out, _ = run(capsys, "stats", str(p), "--stream", f"{long}=dense:2:a", "--stream", "s=sparse:9:b")
    assert code == 0
    header, *rows = out.splitlines()[1:]
    # every column ends where its header ends
    ends = [m.end() for m in re.finditer(r"\S+", header)][1:]
    for row in rows:
        assert [m.end() for m in re.finditer(r"\S+", row)][1:] == ends, out
    assert rows[0].startswith(long + " ")


def test_ofrecord_stats_table_is_aligned_too(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    import numpy as np
    d = tmp_path / "of"
    with OFRecordWriter(d, 1) as w:
        w.write({"a_feature_with_a_very_long_name_indeed": np.arange(3, dtype=np.float32), "y": 1})
    code, out, _ = run(capsys, "stats", str(d))
    header, *rows = out.splitlines()[1:]
    starts = [m.start() for m in re.finditer(r"\S+", header)][:2]   # name and kind: left-aligned
    ends = [m.end() for m in re.finditer(r"\S+", header)][2:]       # the numbers: right-aligned
    assert code == 0 and len(rows) == 2
    for row in rows:
        cells = list(re.finditer(r"\S+", row))
        assert [m.start() for m in cells][:2] == starts and [m.end() for m in cells][2:] == ends, out


@pytest.mark.parametrize("argv", [
    ["cat", "{missing}", "--store", "textfile"],
    ["cat", "{missing}", "--store", "kvfile"],
    ["cat", "{missing}", "--stream", "x=dense:1"],
    ["convert", "{missing}", "{out}.cbf", "--from", "csv", "--csv-dim", "2"],
    ["convert", "{data}", "{out}.cbf", "--header", "{missing}"],   # a file opened with open()
    ["cat", "memory://recordkit-test/{name}", "--store", "textfile"],   # a remote one
    ["checksum", "verify", "{missing}"],
])
def test_every_missing_file_is_name_no_such_file(tmp_path, capsys, argv):
    data = write(tmp_path, "|a 1\n")
    missing = str(tmp_path / "missing.txt")
    argv = [a.format(missing=missing, out=tmp_path / "o", data=data, name="missing.txt") for a in argv]
    code, _, err = run(capsys, *argv)
    name = argv[1] if argv[0] != "checksum" else argv[2]
    if "--header" in argv:
        name = missing
    assert code == 1 and err == f"recordkit: error: {name}: no such file\n"


def test_a_fifo_is_not_called_missing(tmp_path, capsys):
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    code, _, err = run(capsys, "cat", str(fifo), "--stream", "x=dense:1")
    assert code == 1 and err == f"recordkit: error: {fifo}: not a regular file (a FIFO)\n"


@pytest.mark.parametrize("content,held", [
    ([], "is an empty directory, not a data set"),
    (["notes.txt", "a.ctf"], "is a directory but not one data set (it holds 2 entries: a.ctf, notes.txt)"),
    ([f"f{i}" for i in range(7)], "is a directory but not one data set (it holds 7 entries: f0, f1, f2, f3, f4, ...)")])
def test_a_directory_that_is_not_a_data_set_says_what_it_holds(tmp_path, capsys, content, held):
    d = tmp_path / "d"
    d.mkdir()
    for name in content:
        (d / name).write_text("x")
    code, _, err = run(capsys, "cat", str(d))
    assert code == 1
    assert err.startswith(f"recordkit: error: {d}: {held}") and err.count("\n") == 1
    if content:
        assert "--part-name-prefix" in err and f"({d / sorted(content)[0]})" in err


def test_a_csv_conversion_reports_the_bytes_it_read(tmp_path, capsys):
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer
    csv = tmp_path / "d.csv"
    csv.write_text("\n".join(f"{i % 3},{i}.25,{i}.5,{i}.75" for i in range(40000)) + "\n\n")
    size = csv.stat().st_size
    reader = SingaCSVDeserializer(csv, 3, lines_per_chunk=15000)
    assert [c.size for c in reader.chunks][0] > 0 and sum(c.size for c in reader.chunks) == size - 1  # not the blank line
    assert reader.chunks[1].offset == reader.chunks[0].offset + reader.chunks[0].size
    code, _, err = run(capsys, "convert", str(csv), str(tmp_path / "o.cbf"), "--from", "csv", "--csv-dim", "3")
    assert code == 0
    mb = float(re.search(r"\(([\d.]+) MB in", err).group(1))
    assert mb == pytest.approx((size - 1) / 1e6, abs=0.05) and mb > 0


def test_a_singa_record_store_conversion_reports_the_bytes_it_read(tmp_path):
    import numpy as np
    from recordkit.formats.singa.deserializer import SingaRecordDeserializer, SingaRecordWriter
    from recordkit.engine.chunk import ChunkData, DenseColumn
    from recordkit.engine.streams import StreamSpec
    path = tmp_path / "s.bin"
    offsets = np.arange(11, dtype=np.int64)
    chunk = ChunkData(0, np.arange(10, dtype=np.uint64), np.ones(10, np.int64),
                      {"features": DenseColumn(np.ones((10, 4), np.float32), offsets),
                       "label": DenseColumn(np.zeros((10, 1), np.float32), offsets.copy())})
    with SingaRecordWriter(path, [StreamSpec("features", "dense", 4), StreamSpec("label", "dense", 1)]) as w:
        w.write_chunk(chunk)
    reader = SingaRecordDeserializer(path, tuples_per_chunk=4)
    assert [c.offset for c in reader.chunks][0] == 0
    assert sum(c.size for c in reader.chunks) == path.stat().st_size


def test_the_license_is_an_spdx_expression_that_setuptools_reads_without_deprecation():
    """`make demo` showed setuptools' deprecation of the `project.license` table (it stops
    building after 2027-02-18): the SPDX string needs setuptools >= 77 at build time."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["project"]["license"] == "MIT"
    floor = next(r for r in meta["build-system"]["requires"] if r.startswith("setuptools"))
    assert tuple(int(x) for x in floor.split(">=")[1].split(".")) >= (77,)
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip("this environment's setuptools predates SPDX license strings")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist = apply_configuration(Distribution(), str(ROOT / "pyproject.toml"))
    assert dist.metadata.license_expression == "MIT"
    assert [str(w.message) for w in caught if "license" in str(w.message).lower()] == []
