"""Hand-edited data set descriptions (MDS ``index.json``, HF ``state.json`` / ``dataset_info.json``,
``__recordkit__.json``, OFRecord ``_recordkit_streams.json``): every field recordkit reads, set to a
value of the wrong JSON type or one no data set can have, makes every command that reads the
description exit non-zero with one error line naming the file and the field: never a traceback,
never an allocation sized by the claim (the commands run under an address-space limit). So does a
description that lists fewer or more shards than its directory holds, or names a shard twice.

The table is generated from small valid data sets written by ``recordkit convert`` itself: each
field in turn is replaced by wrong values. The commands run in this process (hundreds of runs)."""
import contextlib
import io
import json
import os

import numpy as np
import pytest

from helpers import address_space_limit
from recordkit.cli.main import main

SOURCE = "0 |a 1 2 |b 3:1\n0 |a 3 4\n1 |a 5 6 |b 0:2 4:1\n2 |a 7 8\n2 |a 9 10 |b 1:1\n3 |a 1 1\n"
STREAMS = ["--stream", "a=dense:2", "--stream", "b=sparse:5"]
DESCRIPTIONS = {"mds": ["index.json"], "hf": ["state.json", "dataset_info.json"],
                "webdataset": ["__recordkit__.json"], "tfrecord": ["__recordkit__.json"],
                "ofrecord": ["_recordkit_streams.json"]}
COMMANDS = {"cat": ["cat", "{d}"], "read": ["read", "{d}", "--randomize", "--mb-size", "2"],
            "stats": ["stats", "{d}"], "validate": ["validate", "{d}"], "convert": ["convert", "{d}", "{out}"]}
# OFRecord's declarations are read where records become streams (cat, stats and validate show the
# records themselves; read takes no OFRecord data set)
READERS = {"ofrecord": ["convert"]}

# fields no recordkit reader reads (MosaicML's and datasets' own bookkeeping): any value goes
UNREAD = {"shards.*.hashes", "shards.*.raw_data.hashes", "shards.*.size_limit", "shards.*.version",
          "shards.*.zip_data", "_fingerprint", "_format_columns", "_format_kwargs", "_format_type",
          "_output_all_columns", "_split", "citation", "description", "features", "homepage", "license",
          "key_feature"}
# fields where null is valid: no alias (the name), no recorded precision, no compression, variable size
NULLABLE = {"streams.*.alias", "streams.*.precision", "recordkit.streams.*.alias",
            "recordkit.streams.*.precision", "shards.*.compression", "shards.*.column_sizes.*"}
# a data set's total count: bookkeeping that no reader reads, so only its type is checked
TOTALS = {"sequences", "recordkit.sequences"}
NAMES = {"shards.*.raw_data.basename", "shards.*.name", "recordkit.shards.*.name", "_data_files.*.filename"}
SPECIAL = {"format": ["ragged", "xsv"], "precision": ["int"], "compression": ["zstd"]}


@contextlib.contextmanager
def captured():
    """stdout (binary underneath, as ``cat`` writes) and stderr captured: yields a function giving
    their text so far."""
    out, err = io.TextIOWrapper(io.BytesIO(), write_through=True), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield lambda: (out.buffer.getvalue().decode("utf-8", "replace"), err.getvalue())


@pytest.fixture(scope="module")
def originals(tmp_path_factory):
    """Each format's small data set (two shards), written by recordkit convert."""
    root = tmp_path_factory.mktemp("originals")
    src = root / "src.ctf"
    src.write_text(SOURCE)
    for fmt in DESCRIPTIONS:
        with captured():
            assert main(["convert", str(src), str(root / fmt), "--to", fmt, *STREAMS, "--parts", "2"]) == 0
    return {fmt: root / fmt for fmt in DESCRIPTIONS}


@pytest.fixture(autouse=True)
def one_parser_per_command(monkeypatch):
    """Each command's argument parser built once for the hundreds of runs (building it is most of
    a refused run's time); parsing and everything after it are main's own."""
    from recordkit.cli import main as cli_main
    built, build = {}, cli_main.build_parser

    def cached(argv=None, **kw):
        if not argv or kw:
            return build(argv, **kw)
        if argv[0] not in built:
            built[argv[0]] = build(argv)
        return built[argv[0]]
    monkeypatch.setattr(cli_main, "build_parser", cached)


def run(argv):
    """(exit code, error lines) of the CLI run in this process: stderr's ``recordkit: error:`` lines,
    and the problems ``validate`` lists on stdout. An exception escaping main (a MemoryError from the
    address-space limit included) is what the user would see as a traceback."""
    with captured() as text:
        try:
            with address_space_limit():
                code = main([str(a) for a in argv])
        except BaseException as e:  # noqa: BLE001 - reported as the traceback it would be
            return "traceback", [f"Traceback: {type(e).__name__}: {e}"[:300]]
        out, err = text()
    lines = [ln for ln in err.splitlines() if ln.startswith("recordkit: error:") or "Traceback" in ln]
    if argv[0] == "validate":
        lines += out.splitlines()
    return code, lines


# -- the table --------------------------------------------------------------------------------------
def pattern(path) -> str:
    return ".".join("*" if isinstance(k, int) else k for k in path)


def located(path) -> str:
    """How an error names the field at ``path`` (``shards[1].samples``); in a stream declaration,
    the declaration (``streams[1]``)."""
    text = ""
    for k in path:
        text += f"[{k}]" if isinstance(k, int) else f".{k}" if text else k
        if isinstance(k, int) and "streams" in path:
            break
    return text


def leaves(value, path=()):
    """(path, value) of every field a reader may read; of a list, its last item stands for all."""
    if pattern(path) in UNREAD:
        return
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, path + (k,))
    elif isinstance(value, list) and value:
        yield from leaves(value[-1], path + (len(value) - 1,))


def get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def edited(doc, path, value):
    if not path:
        return value
    doc = json.loads(json.dumps(doc))
    get(doc, path[:-1])[path[-1]] = value
    return doc


def wrong_values(path, value, doc):
    """Values of the wrong JSON type for ``value``, and values of its type no data set can have."""
    if isinstance(value, bool):
        bad = [None, 1, "true"]
    elif isinstance(value, int):
        bad = [None, True, -1, 1.5, str(value), [value], 10**12, 2**64]
    elif isinstance(value, str):
        bad = [None, 7, "", [value]] + SPECIAL.get(path[-1], [])
        if pattern(path) in NAMES:
            at = max(i for i, k in enumerate(path) if isinstance(k, int))  # the shard's place in its list
            first = get(doc, path[:at] + (0,) + path[at + 1:])  # the first shard's name: listed twice
            bad += ["../" + value, "/tmp/" + value, "missing-" + value, first]
    elif isinstance(value, list):
        bad = [None, {}, "x", 1]
    elif isinstance(value, dict):
        bad = [None, [], "x", 1]
    else:  # null
        bad = [7, "x", []] + SPECIAL.get(path[-1], [])
    if pattern(path) in NULLABLE:
        bad = [b for b in bad if b is not None]
    if pattern(path) in TOTALS:
        bad = [b for b in bad if b != 10**12]
    return bad


def listing_edits(fmt, name, doc):
    """(what, edited document): the shard list cut short (a shard file not listed), repeating a
    shard, and (MDS) grown by a shard that is not there."""
    key = "_data_files" if name == "state.json" else "shards"
    if key not in doc:
        return
    for path in [(key,)] + ([("recordkit", "shards")] if fmt == "mds" else []):
        items = get(doc, path)
        yield f"{pattern(path)} one shard not listed", edited(doc, path, items[:-1])
        yield f"{pattern(path)} a shard listed twice", edited(doc, path, items + [items[0]])
    if fmt == "mds":  # both of its lists name the shard
        grown = json.loads(json.dumps(doc))
        last = grown["shards"][-1]
        grown["shards"].append(dict(last, raw_data=dict(last["raw_data"], basename="shard.00007.mds")))
        grown["recordkit"]["shards"].append(dict(grown["recordkit"]["shards"][-1], name="shard.00007.mds"))
        yield "a listed shard missing", grown


def table(doc, fmt, name):
    """(what was edited, the field the error must name or "", the edited document)."""
    for path, value in leaves(doc):
        for bad in wrong_values(path, value, doc):
            yield f"{pattern(path) or '<document>'}={json.dumps(bad)}", located(path), edited(doc, path, bad)
    for what, edit in listing_edits(fmt, name, doc):
        yield what, "", edit


def commands(fmt, d, out):
    for name in READERS.get(fmt, list(COMMANDS)):
        yield name, [a.format(d=d, out=out) for a in COMMANDS[name]]


@pytest.mark.parametrize("fmt", list(DESCRIPTIONS))
def test_the_unedited_data_sets_read_with_every_command(originals, tmp_path, fmt):
    for name, argv in commands(fmt, originals[fmt], tmp_path / "out.ctf"):
        assert run(argv) == (0, []), name


@pytest.mark.parametrize("fmt,name", [(f, n) for f, ns in DESCRIPTIONS.items() for n in ns])
def test_every_edited_field_is_one_located_error_from_every_command(originals, tmp_path, fmt, name):
    target = originals[fmt] / name
    original = target.read_bytes()
    failures, runs = [], 0
    try:
        for i, (what, field, doc) in enumerate(table(json.loads(original), fmt, name)):
            target.write_text(json.dumps(doc))
            for command, argv in commands(fmt, originals[fmt], tmp_path / f"out{i}.ctf"):
                code, errors = run(argv)
                runs += 1
                if code in (0, "traceback") or len(errors) != 1 or name not in errors[0] or field not in errors[0]:
                    failures.append(f"{command} with {what}: exit {code}: {' | '.join(errors)[:300]}")
    finally:
        target.write_bytes(original)
    assert runs > 20
    assert not failures, f"{len(failures)} of {runs} runs:\n" + "\n".join(failures)


def test_a_data_file_linked_from_outside_the_data_set_is_refused(originals, tmp_path):
    import shutil
    d = tmp_path / "hf"
    shutil.copytree(originals["hf"], d)
    outside = tmp_path / "elsewhere.arrow"
    os.replace(d / "data-00001-of-00002.arrow", outside)
    os.symlink(outside, d / "data-00001-of-00002.arrow")
    code, errors = run(["cat", d])
    assert code == 1 and len(errors) == 1, errors
    assert f"state.json: _data_files[1].filename: data-00001-of-00002.arrow resolves to {outside}, outside" \
        in errors[0]
    os.unlink(d / "data-00001-of-00002.arrow")
    os.symlink(os.path.relpath(outside, d), d / "data-00001-of-00002.arrow")  # relative: the same
    assert run(["cat", d])[1] == errors
    os.replace(outside, d / "inside.bin")  # a link within the directory is one of its files
    os.unlink(d / "data-00001-of-00002.arrow")
    os.symlink("inside.bin", d / "data-00001-of-00002.arrow")
    assert run(["cat", d]) == (0, [])


def test_a_count_beyond_the_shard_bytes_names_the_field_and_the_shard(originals):
    """The message shows the arithmetic: the claimed count and the bytes it would need to fit in."""
    target = originals["mds"] / "index.json"
    original = target.read_bytes()
    doc = json.loads(original)
    doc["shards"][1]["samples"] = 10**12
    size = os.path.getsize(originals["mds"] / "shard.00001.mds")
    try:
        target.write_text(json.dumps(doc))
        code, errors = run(["read", originals["mds"], "--randomize", "--mb-size", "2"])
    finally:
        target.write_bytes(original)
    assert code == 1 and errors == [f"recordkit: error: {target}: shards[1].samples: 1000000000000 samples cannot "
                                    f"fit in {size} bytes of shard.00001.mds"]


def test_the_address_space_limit_turns_a_huge_allocation_into_a_memory_error():
    """The guard the table runs under works: what it is there to catch fails inside it."""
    with pytest.raises(MemoryError):
        with address_space_limit():
            np.ones(16 << 30, dtype=np.uint8)


@pytest.mark.parametrize("fmt,name", [(f, n) for f, ns in DESCRIPTIONS.items() for n in ns])
def test_a_description_nested_too_deeply_for_the_json_parser_is_refused(originals, tmp_path, fmt, name):
    target = originals[fmt] / name
    original = target.read_bytes()
    try:
        target.write_text("[" * 100_000)
        code, errors = run(["convert", originals[fmt], tmp_path / "out.ctf"])
    finally:
        target.write_bytes(original)
    assert code == 1 and len(errors) == 1 and errors[0].startswith(f"recordkit: error: {target}: "), errors
    assert "not a description: lists or objects nested too deeply" in errors[0], errors
