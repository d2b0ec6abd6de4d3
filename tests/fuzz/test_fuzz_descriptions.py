"""Fuzz tests: mutated data set descriptions (MDS ``index.json``, HF ``state.json`` and
``dataset_info.json``, the ``__recordkit__.json`` of WebDataset and TFRecord, OFRecord's
``_recordkit_streams.json``) never crash a command and never make it allocate by a claim.

Contract: ``recordkit read --randomize`` (it opens the data set, sizes its sweep by the described
counts and loads every chunk; ``convert`` for OFRecord) reads the data set or exits with an error
message: no exception escapes ``main``, which runs under an address-space limit. Inputs are the
descriptions recordkit's own ``convert`` writes, with fields replaced by random JSON values,
deleted, or lists cut short and repeated.
"""
from __future__ import annotations

import atexit
import contextlib
import io
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import address_space_limit
from recordkit.cli.main import main

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SOURCE = "0 |a 1 2 |b 3:1\n0 |a 3 4\n1 |a 5 6 |b 0:2 4:1\n2 |a 7 8\n3 |a 1 1 |b 1:1\n"
CASES = [("mds", "index.json"), ("hf", "state.json"), ("hf", "dataset_info.json"),
         ("webdataset", "__recordkit__.json"), ("tfrecord", "__recordkit__.json"),
         ("ofrecord", "_recordkit_streams.json")]
SPECIAL = [0, 1, -1, 2**31, 2**32, 2**62, 2**63, 2**64, 10**12, "", "..", "../x", "/etc/passwd", "dense", "sparse",
           "float", "shard.00000.mds", "shard-000000.tar", "part-00000.tfrecord", "data-00000-of-00002.arrow"]
_TMP = Path(tempfile.mkdtemp(prefix="rk-fuzz-descriptions-"))
atexit.register(shutil.rmtree, _TMP, True)


@contextlib.contextmanager
def quiet():
    out, err = io.TextIOWrapper(io.BytesIO(), write_through=True), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield err


def data_set(fmt: str) -> Path:
    """A small data set of ``fmt`` with two shards, written by recordkit convert (once)."""
    d = _TMP / fmt
    if not d.exists():
        src = _TMP / "src.ctf"
        src.write_text(SOURCE)
        with quiet():
            assert main(["convert", str(src), str(d), "--to", fmt, "--stream", "a=dense:2", "--stream", "b=sparse:5",
                         "--parts", "2"]) == 0
    return d


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=6) | st.sampled_from(SPECIAL),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6)


def places(doc, path=()):
    yield path
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from places(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from places(v, path + (i,))


@st.composite
def mutated(draw, doc):
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(list(places(doc))))
        op = draw(st.sampled_from(["replace", "replace", "delete", "cut", "repeat"]))
        if not path:
            doc = draw(json_values) if op == "replace" else doc
            continue
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        value = parent[path[-1]]
        if op == "replace":
            parent[path[-1]] = draw(json_values)
        elif op == "delete":
            del parent[path[-1]]
        elif op == "cut" and isinstance(value, list):
            del value[draw(st.integers(0, len(value))):]
        elif op == "repeat" and isinstance(value, list) and value:
            value.append(json.loads(json.dumps(value[draw(st.integers(0, len(value) - 1))])))
    return doc


@pytest.mark.parametrize("fmt,name", CASES)
@SETTINGS
@given(data=st.data())
def test_a_mutated_description_is_read_or_refused(memory_guard, fmt, name, data):
    d = data_set(fmt)
    target = d / name
    original = target.read_bytes()
    doc = data.draw(mutated(json.loads(original)), label="description")
    argv = (["convert", str(d), str(_TMP / "out.ctf")] if fmt == "ofrecord"
            else ["read", str(d), "--randomize", "--mb-size", "2"])
    try:
        target.write_text(json.dumps(doc))
        with quiet() as err, address_space_limit():
            code = main(argv)
    finally:
        target.write_bytes(original)
    assert code in (0, 1, 2), err.getvalue()
    assert code == 0 or err.getvalue().count("recordkit: error:") == 1, err.getvalue()
