"""The format registry: one table behind the CLI's choices, detection and the README."""
import pathlib

import numpy as np
import pytest

from recordkit.cli import main as cli_main
from recordkit.formats import registry
from recordkit.formats.detect import by_extension, sniff, sniff_format

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("page", registry.TABLE_FILES)
def test_format_tables_of_the_docs_are_the_registrys(page):
    table = registry.readme_table((ROOT / page).read_text(encoding="utf-8"))
    assert table is not None, f"{page} lacks the format table markers"
    assert table == registry.markdown_table(), "run: python -m recordkit.formats.registry"


def test_update_readme_rewrites_only_the_table(tmp_path):
    p = tmp_path / "R.md"
    p.write_text(f"before\n{registry.TABLE_BEGIN}\n| stale |\n{registry.TABLE_END}\nafter\n")
    assert registry.update_readme(str(p)) is True
    text = p.read_text()
    assert text.startswith("before\n") and text.endswith("after\n")
    assert registry.readme_table(text) == registry.markdown_table()
    assert registry.update_readme(str(p)) is False


def test_convert_to_choices_are_the_registered_writers():
    parser = cli_main.build_parser(["convert", "a", "b"])
    sub = next(a for a in parser._actions if a.dest == "command")
    to = next(a for a in sub.choices["convert"]._actions if a.dest == "to")
    assert list(to.choices) == registry.writable()
    for name in ("ctf", "cbf", "ofrecord", "kvfile", "binfile", "parquet", "hf"):
        assert name in to.choices


def test_every_entry_names_importable_factories():
    for fmt in registry.FORMATS.values():
        for ref in (fmt.reader, fmt.writer, fmt.file_probe, fmt.directory_probe):
            if ref and not fmt.missing():
                assert callable(registry._load(ref)), ref


def test_a_missing_optional_dependency_names_the_extra():
    fmt = registry.Format("fancy", "Fancy", "file", reader="x:y", extra="fancy",
                          requires=("recordkit_no_such_module_here",))
    with pytest.raises(registry.MissingDependency, match=r"pip install 'recordkit\[fancy\]'"):
        fmt.open_reader("whatever")


def test_missing_pyarrow_gives_the_parquet_extra_on_the_command_line(tmp_path, monkeypatch, capsys):
    import importlib.util
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    (tmp_path / "a.ctf").write_text("0 |x 1 2\n")
    code = cli_main.main(["convert", str(tmp_path / "a.ctf"), str(tmp_path / "a.parquet"), "--stream", "x=dense:2"])
    assert code == 2
    assert "pip install 'recordkit[parquet]'" in capsys.readouterr().err
    assert not (tmp_path / "a.parquet").exists()


def test_output_extensions_come_from_the_registry():
    assert by_extension("x.parquet") == "parquet"
    assert by_extension("x.CBF") == "cbf" and by_extension("x.bin") == "cbf"
    assert by_extension("x.txt") == "ctf"
    assert by_extension("x.unknown") is None


def test_detection_by_content_for_each_registered_layout(tmp_path):
    from recordkit import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    streams = [StreamSpec("x", "dense", 2)]
    with CBFWriter(tmp_path / "a.bin", streams) as w:
        w.write({"x": np.ones((1, 2), np.float32)})
    assert sniff(tmp_path / "a.bin") == "cbf"
    parts = tmp_path / "parts"
    parts.mkdir()
    (tmp_path / "a.bin").rename(parts / "part-00000.cbf")
    assert sniff(parts) == "cbf"
    (tmp_path / "t.ctf").write_text("0 |x 1 2\n")
    assert sniff(tmp_path / "t.ctf") == "ctf"
    (tmp_path / "p.dat").write_bytes(b"PAR1" + b"\0" * 20 + b"PAR1")
    assert sniff(tmp_path / "p.dat") == "parquet"
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "state.json").write_text("{}")
    (hf / "dataset_info.json").write_text("{}")
    assert sniff(hf) == "hf"
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "shard.dat").write_bytes(b"")
    assert sniff(shard) == "singa" and sniff_format(shard) == "kvfile"
    empty = tmp_path / "empty"
    empty.mkdir()
    from recordkit.errors import NotADataSetError
    with pytest.raises(NotADataSetError, match="empty directory, not a data set"):
        sniff(empty)  # a directory is a data set only when it says so


def test_factories_get_only_the_options_they_name():
    seen = {}

    def writer(path, streams, *, parts=None, precision="float", checksums=False, **storage):
        seen.update(dict(parts=parts, precision=precision, checksums=checksums, storage=storage))
        return "w"

    assert registry._call(writer, "out", [], parts=3, precision="double", total_sequences=10, chunk_size=5,
                          storage_options={"anon": True}, cache_dir=None) == "w"
    assert seen == {"parts": 3, "precision": "double", "checksums": False, "storage": {"storage_options": {"anon": True}}}


@pytest.mark.parametrize("page", registry.MATRIX_FILES)
def test_command_matrices_of_the_docs_are_the_registrys(page):
    from recordkit.cli.main import COMMANDS
    matrix = registry.readme_matrix((ROOT / page).read_text(encoding="utf-8"))
    assert matrix is not None, f"{page} lacks the command matrix markers"
    assert matrix == registry.markdown_matrix(list(COMMANDS)), "run: python -m recordkit.formats.registry"
    for fmt in registry.FORMATS:
        assert f"| `{fmt}` |" in matrix
