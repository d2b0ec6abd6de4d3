"""The public face: `recordkit.open` for every format, `verify` and `validate` as functions, the
thin `recordkit.readers` / `recordkit.writers` modules, and `recordkit verify` on every
self-describing format."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import recordkit
from recordkit.errors import RecordkitError, UsageError

STREAMS = ["x=dense:3:x", "y=sparse:7:y"]
CTF = "".join(f"{k} |x {k} {k + 0.5} -1 |y {k % 7}:1\n" for k in range(40))
TARGETS = ["cbf", "parquet", "hf", "webdataset", "tfrecord", "mds", "ofrecord"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("public")
    (d / "a.ctf").write_text(CTF)
    out = {"ctf": d / "a.ctf"}
    for to in TARGETS:
        out[to] = d / f"a_{to}"
        recordkit.convert(d / "a.ctf", out[to], to=to, streams=STREAMS)
    return out


@pytest.mark.parametrize("fmt", ["ctf", *TARGETS])
def test_open_gives_every_formats_reader_with_the_same_values(data, fmt):
    streams = STREAMS if fmt in ("ctf", "ofrecord") else None
    with recordkit.open(data[fmt], streams) as reader:
        seqs = list(reader)
    assert len(seqs) == 40
    assert np.array_equal(seqs[7]["x"], [[7, 7.5, -1]])
    assert seqs[7]["y"].toarray()[0, 0] == 1


def test_open_names_a_format_and_refuses_an_unknown_one(data):
    with recordkit.open(data["cbf"], format="cbf") as reader:
        assert len(reader.chunks) >= 1
    with pytest.raises(UsageError, match="unknown format 'nope'"):
        recordkit.open(data["cbf"], format="nope")


def test_open_of_undescribed_text_asks_for_streams(data):
    with pytest.raises(UsageError, match="streams declared"):
        recordkit.open(data["ctf"])


def test_open_of_a_missing_path_is_an_error_naming_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.cbf"):
        recordkit.open(tmp_path / "nothing.cbf")


@pytest.mark.parametrize("fmt", TARGETS)
def test_verify_proves_each_conversion(data, fmt):
    result = recordkit.verify(data["ctf"], data[fmt], streams=STREAMS)
    assert result.equal and result.sequences == 40


def test_verify_finds_a_difference(data, tmp_path):
    changed = tmp_path / "b.ctf"
    changed.write_text(CTF.replace("|x 5 5.5", "|x 5 5.25"))
    result = recordkit.verify(changed, data["parquet"], streams=STREAMS)
    assert not result.equal and result.differing == 1


def test_validate_yields_located_problems(tmp_path, data):
    assert list(recordkit.validate(data["cbf"])) == []
    bad = tmp_path / "bad.ctf"
    bad.write_text("0 |x 1 2 a\n")
    problems = list(recordkit.validate(bad, streams=["x=dense:3"]))
    assert problems and problems[0].line == 1 and problems[0].column == 10


def test_readers_and_writers_modules_resolve_every_name_lazily():
    import recordkit.readers
    import recordkit.writers
    for module in (recordkit.readers, recordkit.writers):
        for name in module.__all__:
            assert getattr(module, name).__name__ == name
        with pytest.raises(AttributeError):
            getattr(module, "NoSuchReader")
    code = "import sys, recordkit, recordkit.readers, recordkit.writers; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("fmt", ["parquet", "hf", "webdataset", "tfrecord", "mds"])
def test_the_verify_command_opens_self_describing_formats_on_either_side(data, fmt):
    for a, b in ((data["cbf"], data[fmt]), (data[fmt], data["cbf"])):
        out = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "verify", str(a), str(b)],
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert "identical" in out.stderr + out.stdout


def test_errors_are_recordkit_errors():
    assert issubclass(UsageError, RecordkitError)


def _public_functions():
    """(qualified name, function) for every public function of the public face: ``recordkit``'s,
    and every public method (and ``__init__``) of its classes and of ``recordkit.readers`` /
    ``recordkit.writers``'s."""
    import inspect

    import recordkit.readers
    import recordkit.writers
    named = [(name, getattr(module, name)) for module in (recordkit.readers, recordkit.writers)
             for name in module.__all__]
    named += [(name, getattr(recordkit, name)) for name in recordkit.__all__ if not name.startswith("__")]
    for name, obj in named:
        if inspect.isclass(obj):
            for member, fn in inspect.getmembers(obj, inspect.isfunction):
                if member == "__init__" or not member.startswith("_"):
                    yield f"{name}.{member}", fn
        elif inspect.isfunction(obj):
            yield name, obj


def test_every_public_function_and_method_is_annotated():
    import inspect
    missing = []
    for name, fn in _public_functions():
        try:
            sig = inspect.signature(fn)
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            continue
        params = [p for p in sig.parameters.values() if p.name not in ("self", "cls")
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        if (any(p.annotation is inspect.Parameter.empty for p in params)
                or (sig.return_annotation is inspect.Signature.empty and fn.__name__ != "__init__")):
            missing.append(name)
    assert not missing, f"{len(missing)} public function(s) without full annotations: {sorted(set(missing))}"
