"""CNTK BrainScript reader sections: parsing, normalization and CNTK's validation messages."""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import pytest

from recordkit.compat.brainscript import (
    ConfigArray,
    ConfigRecord,
    DeserializerConfig,
    ReaderConfig,
    StreamConfig,
    parse,
    reader_config,
)
from recordkit.errors import FormatError, RecordkitWarning

MiB32 = 32 * 1024 * 1024


def shared_dir() -> Path:
    env = os.environ.get("RECORDKIT_SHARED")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared"  # /work/shared


CORPUS = shared_dir() / "conformance" / "cntk"
CONFIG_DIR = CORPUS / "Config"


def position(text: str, needle: str, occurrence: int = 1) -> tuple[int, int]:
    """1-based (line, column) of the n-th occurrence of ``needle`` in ``text``."""
    at = -1
    for _ in range(occurrence):
        at = text.index(needle, at + 1)
    line = text.count("\n", 0, at) + 1
    return line, at - (text.rfind("\n", 0, at) + 1) + 1


def raises_at(text: str, needle: str, match: str, occurrence: int = 1, **kw) -> FormatError:
    """reader_config(text) fails with ``match`` located at ``needle``."""
    with pytest.raises(FormatError, match=match) as info:
        reader_config(text, **kw)
    assert (info.value.line, info.value.column) == position(text, needle, occurrence), str(info.value)
    return info.value


def ctf(body: str = "", inputs: str = "features = [ dim = 2; format = \"dense\" ]", outer: str = "") -> str:
    """A small old-style CTF reader config with extra reader keys ``body``."""
    return (f"{outer}\nreader = [\n    readerType = \"CNTKTextFormatReader\"\n    file = \"data.txt\"\n"
            f"{body}\n    input = [\n        {inputs}\n    ]\n]\n")


# ---------------------------------------------------------------------------------------------
# CNTK's documentation examples, verbatim (the docs' leading "..." ellipsis line left out)
# ---------------------------------------------------------------------------------------------

SEED_SIMPLE = r'''
reader = [
    readerType = "CNTKTextFormatReader"
    file = "c:\mydata\SampleInput.txt" # See the second example for Linux path example

    # IMPORTANT!
    # All inputs are grouped within "input" sub-section.
    input = [
        A = [
            dim = 5
            format = "dense"
        ]
        B = [
            dim = 1000000
            format = "sparse"
        ]
        C = [
            dim = 1
            format = "dense"
        ]
    ]
]
# the rest of the cntk config ...
'''

SEED_EXTENDED = r'''
precision="double"

reader = [
    readerType = "CNTKTextFormatReader"
    file = "/home/mydata/SampleInput.txt" # See the first example for Windows style path example
    randomize = true
    randomizationWindow = 30
    skipSequenceIds = false
    maxErrors = 100
    traceLevel = 2

    chunkSizeInBytes = 1024

    keepDataInMemory = true
    frameMode = false

    input = [
        Some_very_long_input_name = [
            alias = "a"
            dim = 3
            format = "dense"
        ]
        Some_other_also_very_long_input_name = [
            alias = "b"
            dim = 2
            format = "dense"
        ]
    ]
]
# the rest of the cntk config ...
'''

SEED_COMPOSITE = r'''
reader = {
        verbosity = 0 ;
        randomize = true;
        randomizationWindow=30
        deserializers = ({
            type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
            file = "/home/mydata/SampleInput.txt" # See the first example for Windows style path example
            maxErrors = 100
            skipSequenceIds = false
            traceLevel = 2
            input = {
                qu1fea = {alias = "qui"; dim = 95589; format = "sparse"}
                qu2fea = {alias = "quj"; dim = 95589; format = "sparse"}
                pairweight = {alias = "wij"; dim = 1; format = "dense"}
            }
        })
    }
'''

# The CBF document gives the reader keys and the `input = [ newName = [ alias = "nameInFile" ] ]` form.
SEED_CBF = r'''
reader = [
    readerType = "CNTKBinaryReader"
    file = "c:\mydata\corpus.bin"
    randomize = true
    randomizationSeed = 3
    randomizationWindow = 100000
    traceLevel = 2
    keepDataInMemory = true
    input = [
        features = [ alias = "featuresInFile" ]
        labels = [ ]
    ]
]
'''


def test_seed_simple_example_gives_one_ctf_deserializer_with_defaults():
    rc = reader_config(SEED_SIMPLE)
    assert rc == ReaderConfig(deserializers=(DeserializerConfig(
        type="CNTKTextFormatDeserializer",
        file=r"c:\mydata\SampleInput.txt",
        streams=(StreamConfig("A", "A", "dense", 5, False),
                 StreamConfig("B", "B", "sparse", 1000000, False),
                 StreamConfig("C", "C", "dense", 1, False)),
        precision="float", skip_sequence_ids=False, max_errors=0, trace_level=1,
        chunk_size=MiB32, keep_data_in_memory=False, cache_index=False),))
    assert rc.randomize is True and rc.randomization_window is None
    assert rc.sample_based_randomization_window is False and rc.composite is False


def test_seed_extended_example_reads_every_parameter_and_inherits_precision():
    rc = reader_config(SEED_EXTENDED)
    (d,) = rc.deserializers
    assert d.file == "/home/mydata/SampleInput.txt"
    assert d.precision == "double"  # from the enclosing top level
    assert (d.skip_sequence_ids, d.max_errors, d.trace_level, d.chunk_size, d.keep_data_in_memory) == \
        (False, 100, 2, 1024, True)
    assert d.streams == (StreamConfig("Some_very_long_input_name", "a", "dense", 3),
                         StreamConfig("Some_other_also_very_long_input_name", "b", "dense", 2))
    assert (rc.randomize, rc.randomization_window, rc.frame_mode, rc.trace_level) == (True, 30, False, 2)


def test_seed_composite_example_keeps_deserializer_keys_and_reader_level_window():
    rc = reader_config(SEED_COMPOSITE)
    assert rc.composite is True
    (d,) = rc.deserializers
    assert d.type == "CNTKTextFormatDeserializer"
    assert (d.max_errors, d.skip_sequence_ids, d.trace_level, d.precision) == (100, False, 2, "float")
    assert [(s.name, s.alias, s.format, s.dim) for s in d.streams] == [
        ("qu1fea", "qui", "sparse", 95589), ("qu2fea", "quj", "sparse", 95589), ("pairweight", "wij", "dense", 1)]
    # an explicit window keeps the composite default of being sample based
    assert (rc.verbosity, rc.randomize, rc.randomization_window, rc.sample_based_randomization_window) == \
        (0, True, 30, True)
    assert rc.max_errors == 0  # the deserializer's maxErrors is not the reader-level budget


def test_seed_cbf_section_renames_streams_through_alias():
    rc = reader_config(SEED_CBF)
    (d,) = rc.deserializers
    assert d.type == "CNTKBinaryDeserializer" and d.file == r"c:\mydata\corpus.bin"
    assert d.streams == (StreamConfig("features", "featuresInFile", None, None, False),
                         StreamConfig("labels", "labels", None, None, False))
    assert (rc.randomize, rc.randomization_seed, rc.randomization_window, d.trace_level,
            d.keep_data_in_memory) == (True, 3, 100000, 2, True)


def test_cbf_without_input_section_means_every_stream_of_the_file():
    rc = reader_config('reader = [ readerType = "CNTKBinaryReader"; file = "x.bin" ]')
    assert rc.deserializers[0].streams == ()


# ---------------------------------------------------------------------------------------------
# The conformance configs
# ---------------------------------------------------------------------------------------------

def _config_sections() -> list[tuple[str, str]]:
    if not CONFIG_DIR.is_dir():
        return []
    out = []
    for path in sorted(CONFIG_DIR.rglob("*.cntk")):
        root = parse(path.read_text(), source=str(path))
        out += [(str(path.relative_to(CONFIG_DIR)), name) for name, value in root.items()
                if isinstance(value, dict) and "reader" in value]
    return out


SECTIONS = _config_sections()
needs_corpus = pytest.mark.skipif(not CONFIG_DIR.is_dir(), reason=f"CNTK conformance corpus not found at {CORPUS}")


@needs_corpus
def test_conformance_configs_are_all_found():
    files = {f for f, _ in SECTIONS}
    assert files == {"CNTKBinaryReader/test.cntk", "CNTKTextFormatReader/dense.cntk",
                     "CNTKTextFormatReader/sparse.cntk", "CNTKTextFormatReader/edge_cases.cntk"}
    assert len(SECTIONS) >= 30


@needs_corpus
@pytest.mark.parametrize("file,section", SECTIONS, ids=[f"{f}:{s}" for f, s in SECTIONS])
@pytest.mark.parametrize("defmbsize", [None, "true"])
def test_every_conformance_section_normalizes(file, section, defmbsize):
    path = CONFIG_DIR / file
    overrides = {"defMBSize": defmbsize} if defmbsize else None
    rc = reader_config(path.read_text(), section=section, overrides=overrides, source=str(path))
    assert rc.deserializers and all(d.file for d in rc.deserializers)
    text = path.read_text()
    uses_var = "$defMBSize$" in text.split(f"\n{section} = [", 1)[1].split("\n]\n", 1)[0]
    defining = [s.name for d in rc.deserializers for s in d.streams if s.defines_mb_size]
    assert len(defining) == (1 if (uses_var and defmbsize) else 0)


def _cases_rows() -> list[dict]:
    cases = CORPUS / "CASES.md"
    if not cases.exists():
        return []
    text = cases.read_text()
    block = text.split("## Config sections used", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in block.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 7 or "/" not in cells[0] or cells[0].startswith("section"):
            continue
        rows.append(dict(zip(["section", "prec", "file", "randomize", "chunk", "other", "streams"], cells)))
    return rows


CASE_ROWS = _cases_rows()
CASE_FILES = {"dense": "CNTKTextFormatReader/dense.cntk", "sparse": "CNTKTextFormatReader/sparse.cntk",
              "edge": "CNTKTextFormatReader/edge_cases.cntk", "cbf": "CNTKBinaryReader/test.cntk"}


def _expected_streams(cell: str) -> list[tuple]:
    default = re.search(r"\((?:all )?(dense|sparse)\)\s*$", cell)
    cell = re.sub(r"\s*\([^)]*\)", "", cell)
    out = []
    for item in cell.split(", "):
        star = item.endswith("*")
        name, alias, dim, *fmt = item.rstrip("*").split(":")
        out.append((name, alias, int(dim), fmt[0] if fmt else (default.group(1) if default else None), star))
    return out


@needs_corpus
def test_cases_table_is_found():
    assert len(CASE_ROWS) >= 30


@needs_corpus
@pytest.mark.parametrize("row", CASE_ROWS, ids=[r["section"] for r in CASE_ROWS])
def test_config_section_matches_cases_table(row):
    kind, section = row["section"].split("/", 1)
    path = CONFIG_DIR / CASE_FILES[kind]
    rc = reader_config(path.read_text(), section=section, overrides={"defMBSize": "true"}, source=str(path))
    ds = rc.deserializers
    assert {d.precision for d in ds} == {row["prec"]}
    assert [d.file for d in ds] == [f.split(" ")[0] for f in row["file"].split(" + ")]
    assert rc.randomize is row["randomize"].startswith("T")
    chunk = row["chunk"].split(" ")[0]
    if chunk == "32Mi":
        assert all(d.chunk_size == MiB32 for d in ds)
    elif chunk.isdigit() and kind != "cbf":  # for CBF the column counts chunks in the file
        assert all(d.chunk_size == int(chunk) for d in ds)
    assert all(d.keep_data_in_memory is ("keep" in row["other"].split()) for d in ds)
    for key, value in re.findall(r"(\w+)=(\w+)", row["other"]):
        attr = {"traceLevel": "trace_level", "skipSequenceIds": "skip_sequence_ids", "maxErrors": "max_errors"}[key]
        assert str(getattr(ds[0], attr)).lower() == value.lower()
    if kind == "cbf":
        assert all(d.streams == () for d in ds)  # streams come from the file
    else:
        got = [(s.name, s.alias, s.dim, s.format, s.defines_mb_size) for d in ds for s in d.streams]
        want = _expected_streams(row["streams"])
        assert [g[:3] + (g[4],) for g in got] == [w[:3] + (w[4],) for w in want]
        assert all(w[3] is None or g[3] == w[3] for g, w in zip(got, want))


@needs_corpus
def test_composite_conformance_section_gets_chunk_based_default_window():
    path = CONFIG_DIR / "CNTKTextFormatReader/dense.cntk"
    rc = reader_config(path.read_text(), section="5x10_and_5x5_jagged_composite")
    assert rc.composite and len(rc.deserializers) == 2
    assert (rc.randomization_window, rc.sample_based_randomization_window) == (128, False)
    assert [d.precision for d in rc.deserializers] == ["double", "double"]


@needs_corpus
def test_conformance_cbf_alias_section_renames_five_inputs():
    path = CONFIG_DIR / "CNTKBinaryReader/test.cntk"
    rc = reader_config(path.read_text(), section="5_inputs_100x10_jagged_mixed")
    assert [(s.name, s.alias) for s in rc.deserializers[0].streams] == [
        ("features1", "a"), ("features2", "b"), ("features3", "c"), ("features4", "d"), ("features5", "e")]


@needs_corpus
def test_legacy_2016_configs_normalize_with_warnings_for_obsolete_parameters():
    legacy = sorted((CORPUS / "legacy" / "Config").glob("*.cntk"))
    assert legacy
    obsolete_seen = []
    for path in legacy:
        text = path.read_text()
        for name, value in parse(text).items():
            if isinstance(value, dict) and "reader" in value:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    rc = reader_config(text, section=name, source=path.name)
                assert rc.deserializers[0].type == "CNTKTextFormatDeserializer"
                assert all(issubclass(w.category, RecordkitWarning) for w in caught)
                obsolete_seen += [str(w.message) for w in caught]
    assert any("parameter 'chunkSize' is obsolete" in m for m in obsolete_seen)


def test_obsolete_ctf_parameter_warns_with_its_location():
    text = ctf("    numChunksToCache = 5")
    with pytest.warns(RecordkitWarning, match=r"<config>:%d:%d: reader parameter 'numChunksToCache' is obsolete"
                      % position(text, "numChunksToCache")):
        assert reader_config(text).deserializers[0].keep_data_in_memory is False


# ---------------------------------------------------------------------------------------------
# Syntax
# ---------------------------------------------------------------------------------------------

def test_parse_types_values_and_treats_brackets_and_braces_alike():
    cfg = parse('a = 1\nb = -2.5e3\nc = TRUE\nd = "quoted # not a comment"\ne = bare\n'
                'f = [ x = 1 ]\ng = { x = 1 }\nh = (1 : 2 : three)\ni = ({ x = 1 })\nj = ()\n')
    assert isinstance(cfg, dict) and isinstance(cfg, ConfigRecord)
    assert cfg == {"a": 1, "b": -2500.0, "c": True, "d": "quoted # not a comment", "e": "bare",
                   "f": {"x": 1}, "g": {"x": 1}, "h": [1, 2, "three"], "i": [{"x": 1}], "j": []}
    assert isinstance(cfg["h"], ConfigArray) and cfg["f"] == cfg["g"]


def test_unquoted_windows_path_is_one_bare_word_but_colon_splits_inside_parentheses():
    cfg = parse("file = c:\\mydata\\x.txt\narr = (a:b)\nchained = [ x = 1 ]:[ x = 2 ]\n")
    assert cfg["file"] == "c:\\mydata\\x.txt"
    assert cfg["arr"] == ["a", "b"]
    assert cfg["chained"] == [{"x": 1}, {"x": 2}]


def test_comments_run_to_end_of_line_but_not_inside_quotes_or_words():
    cfg = parse("# heading\na = 1 # trailing\nb = \"x # y\"\nc = data#1.txt\n  # indented\nd = 'single # quoted'\n")
    assert cfg == {"a": 1, "b": "x # y", "c": "data#1.txt", "d": "single # quoted"}


def test_semicolons_and_same_line_assignments_separate_parameters():
    cfg = parse("a = 1; b = 2 ;c=3\nr = [ x = 1 y = \"two\" z = [ w = 3 ] ]")
    assert cfg == {"a": 1, "b": 2, "c": 3, "r": {"x": 1, "y": "two", "z": {"w": 3}}}


def test_names_are_case_insensitive_and_keep_their_first_spelling():
    cfg = parse("Precision = float\nPRECISION = double\nInput = [ Features = [ dim = 1 ] ]")
    assert cfg["precision"] == "double" and "PRECISION" in cfg
    assert list(cfg) == ["Precision", "Input"]
    assert list(cfg["input"]) == ["Features"]


def test_later_assignment_overrides_and_records_merge():
    cfg = parse("a = 1\na = 2\nr = [ x = 1; y = 2 ]\nr = [ y = 3; z = 4 ]\ns = [ x = 1 ]\ns = plain")
    assert cfg == {"a": 2, "r": {"x": 1, "y": 3, "z": 4}, "s": "plain"}


def test_byte_order_mark_is_ignored():
    assert parse("\ufeffa = 1") == {"a": 1}


@pytest.mark.parametrize("text,needle,match", [
    ("a = 1\nb 2\n", "2", r"expected '=' after 'b'"),
    ("a = 1\nb = \"open\n", '"open', r"unterminated string"),
    ("a = [\n  x = 1\n", "", r"missing '\]' to close the '\[' opened at line 1, column 5"),
    ("a = [ x = 1 }\n", "}", r"unexpected '}' \(expected '\]'\)"),
    ("a = 1\n]\n", "]", r"unexpected '\]'"),
    ("a = (1 2)\n", "2", r"expected ':' or '\)' in the array opened at line 1, column 5"),
    ("a = hello world\n", "world", r"expected a new line or ';' after the value of 'a'"),
    ("a = \nb = 1\n", "\nb", r"expected a value for 'a'"),
    ("= 1\n", "=", r"expected a parameter name"),
    ("a = 1\n  x-y = 2\n", "x-y", r"expected a parameter name"),
])
def test_syntax_errors_point_at_the_offending_token(text, needle, match):
    with pytest.raises(FormatError, match=match) as info:
        parse(text, source="train.cntk")
    err = info.value
    assert err.path == "train.cntk"
    if needle:
        assert (err.line, err.column) == position(text, needle)
    else:  # end of input
        assert err.line == text.count("\n") + 1
    assert str(err).startswith(f"train.cntk:{err.line}:{err.column}: ")


def test_syntax_error_columns_count_bytes():
    text = 'a = "é" b\n'
    with pytest.raises(FormatError) as info:
        parse(text)
    assert (info.value.line, info.value.column) == (1, 10)


# ---------------------------------------------------------------------------------------------
# $variables$ and overrides
# ---------------------------------------------------------------------------------------------

def test_variables_resolve_outward_case_insensitively_with_their_type():
    cfg = parse("defMbSize = false\nS = [ reader = [ x = $defMBSize$ ] ]")
    assert cfg["S"]["reader"]["x"] is False


def test_variables_substitute_inside_strings_and_words():
    cfg = parse('RootDir = .\nn = 3\nfile = "$RootDir$/train.txt"\nw = x$n$y\nnum = $n$0')
    assert cfg["file"] == "./train.txt" and cfg["w"] == "x3y" and cfg["num"] == 30


def test_variable_referencing_a_section_copies_it():
    cfg = parse("common = [ readerType = CNTKTextFormatReader ]\nT = [ reader = $common$ ]")
    assert cfg["T"]["reader"] == {"readerType": "CNTKTextFormatReader"}
    assert cfg["T"]["reader"] is not cfg["common"]


def test_self_named_variable_refers_to_the_enclosing_scope():
    cfg = parse("dim = 7\ninput = [ dim = $dim$ ]")
    assert cfg["input"]["dim"] == 7


def test_variables_may_be_defined_after_use_and_dotted():
    cfg = parse("x = $later$\ny = $sec.inner$\nlater = 5\nsec = [ inner = 6 ]")
    assert (cfg["x"], cfg["y"]) == (5, 6)


def test_undefined_and_circular_variables_are_located_errors():
    text = "a = 1\nb = [ c = $nope$ ]\n"
    with pytest.raises(FormatError, match=r"undefined variable '\$nope\$'") as info:
        parse(text)
    assert (info.value.line, info.value.column) == position(text, "$nope$")
    with pytest.raises(FormatError, match="circular reference"):
        parse("a = $b$\nb = $a$\n")


def test_reader_config_only_resolves_what_the_reader_needs():
    text = 'modelPath = "$UndefinedOnThisCommandLine$/model.dnn"\n' + ctf()
    assert reader_config(text).deserializers[0].file == "data.txt"
    with pytest.raises(FormatError, match="undefined variable"):
        parse(text)


def test_override_changes_a_variable_used_by_the_reader():
    text = ctf(inputs="f = [ dim = 1; format = dense; definesMBSize = $defMBSize$ ]", outer="defMBSize = false")
    assert reader_config(text).deserializers[0].streams[0].defines_mb_size is False
    assert reader_config(text, overrides={"defMBSize": "true"}).deserializers[0].streams[0].defines_mb_size is True
    assert reader_config(text, overrides={"DEFMBSIZE": True}).deserializers[0].streams[0].defines_mb_size is True


def test_overrides_merge_records_and_accept_dotted_names():
    text = "S = [\n" + ctf(body="randomize = false") + "]\n"
    assert reader_config(text, section="S").randomize is False
    assert reader_config(text, section="S", overrides={"S": "[reader=[randomize=true]]"}).randomize is True
    rc = reader_config(text, section="S", overrides={"S.reader.chunkSizeInBytes": "4096"})
    assert rc.deserializers[0].chunk_size == 4096


def test_override_values_are_checked_and_located_in_the_override():
    with pytest.raises(FormatError, match="'randomize' must be true, false") as info:
        reader_config(ctf(), overrides={"reader.randomize": "sometimes"})
    assert info.value.path == "<override reader.randomize>"
    with pytest.raises(FormatError, match="unexpected"):
        reader_config(ctf(), overrides={"x": "1 2"})


# ---------------------------------------------------------------------------------------------
# Finding the reader section, inheritance, and defaults
# ---------------------------------------------------------------------------------------------

def test_reader_config_accepts_parsed_and_plain_dicts():
    expected = reader_config(SEED_EXTENDED)
    assert reader_config(parse(SEED_EXTENDED)) == expected
    plain = {"precision": "double", "reader": {
        "readerType": "CNTKTextFormatReader", "file": "/home/mydata/SampleInput.txt", "randomize": True,
        "randomizationWindow": 30, "skipSequenceIds": False, "maxErrors": 100, "traceLevel": 2,
        "chunkSizeInBytes": 1024, "keepDataInMemory": True, "frameMode": False,
        "input": {"Some_very_long_input_name": {"alias": "a", "dim": 3, "format": "dense"},
                  "Some_other_also_very_long_input_name": {"alias": "b", "dim": 2, "format": "dense"}}}}
    assert reader_config(plain) == expected


def test_missing_reader_section_lists_the_sections_that_have_one():
    text = "A = [\n" + ctf() + "]\nB = [\n" + ctf() + "]\n"
    with pytest.raises(FormatError, match=r"no 'reader' section .*pass section= one of: A, B"):
        reader_config(text)
    with pytest.raises(FormatError, match=r"no section 'C' in the config \(sections with a reader: A, B\)"):
        reader_config(text, section="C")


def test_keys_of_the_enclosing_training_config_are_not_flagged():
    text = ("command = train\ndeviceId = -1\nmodelPath = \"m.dnn\"\n"
            "train = [\n  action = train\n  SGD = [ epochSize = 0; minibatchSize = 25 ]\n"
            + ctf() + "]\n")
    assert reader_config(text, section="train").deserializers[0].file == "data.txt"


def test_old_path_inherits_precision_frame_mode_and_trace_level_from_enclosing_sections():
    text = "traceLevel = 0\nT = [\n  precision = double\n  frameMode = true\n" + ctf() + "]\n"
    rc = reader_config(text, section="T")
    assert rc.deserializers[0].precision == "double" and rc.frame_mode is True
    assert rc.trace_level == 0 and rc.deserializers[0].trace_level == 0
    # the reader's own value wins over the enclosing one
    assert reader_config(text.replace("file =", "traceLevel = 2\n    file ="), section="T").trace_level == 2


def test_composite_copies_reader_level_precision_and_trace_level_into_deserializers():
    text = '''precision = "double"
reader = [
    traceLevel = 0
    deserializers = ([
        type = "CNTKTextFormatDeserializer"; module = "CNTKTextFormatReader"; file = a.txt
        precision = "float"; traceLevel = 2
        input = [ x = [ dim = 1; format = dense ] ]
    ])
]'''
    (d,) = reader_config(text).deserializers
    assert (d.precision, d.trace_level) == ("double", 0)


def test_composite_deserializer_does_not_inherit_ctf_keys_from_the_reader_level():
    text = '''reader = [
    maxErrors = 5
    chunkSizeInBytes = 1048576
    deserializers = ([ type = "CNTKTextFormatDeserializer"; file = a.txt; input = [ x = [ dim = 1; format = dense ] ] ])
]'''
    rc = reader_config(text)
    assert rc.max_errors == 5 and rc.deserializers[0].max_errors == 0
    assert rc.deserializers[0].chunk_size == MiB32
    # but the reader-level chunk size sets the default window (4 GiB worth of chunks)
    assert (rc.randomization_window, rc.sample_based_randomization_window) == (4096, False)


def test_composite_with_only_cbf_randomizes_over_the_whole_data_by_default():
    rc = reader_config('reader = [ deserializers = ([ type = "CNTKBinaryDeserializer"; file = "x.bin" ]) ]')
    assert (rc.randomize, rc.randomization_window, rc.sample_based_randomization_window) == (True, None, True)
    assert rc.deserializers[0].streams == ()


@pytest.mark.parametrize("value,expected", [("none", False), ('"None"', False), ("auto", True), ('"auto"', True),
                                            ("true", True), ("false", False), ("FALSE", False)])
def test_randomize_accepts_booleans_auto_and_none(value, expected):
    assert reader_config(ctf(f"randomize = {value}")).randomize is expected


def test_parameter_values_are_case_insensitive_where_cntk_folds_them():
    text = ('READER = [ READERTYPE = "cntktextformatreader"; FILE = d.txt; PRECISION = "Double"\n'
            '  INPUT = [ Features = [ DIM = 3; FORMAT = "DENSE"; DefinesMbSize = TRUE ] ] ]')
    (d,) = reader_config(text).deserializers
    assert d.precision == "double"
    assert d.streams == (StreamConfig("Features", "Features", "dense", 3, True),)


def test_all_remaining_parameters_are_read():
    rc = reader_config(ctf("randomizationSeed = 7; sampleBasedRandomizationWindow = true; randomizationWindow = 99\n"
                           "cacheIndex = true; skipSequenceIds = true; verbosity = 2; truncated = true\n"
                           "truncationLength = 20; multiThreadedDeserialization = false"))
    d = rc.deserializers[0]
    assert (rc.randomization_seed, rc.sample_based_randomization_window, rc.randomization_window) == (7, True, 99)
    assert (d.cache_index, d.skip_sequence_ids, rc.verbosity) == (True, True, 2)
    assert (rc.truncated, rc.truncation_length, rc.multithreaded_deserialization) == (True, 20, False)


def test_composite_reader_level_keys_are_read():
    text = '''reader = [
    frameMode = true; maxErrors = 3; multiThreadedDeserialization = true; localTimeline = false
    useNumericSequenceKeys = true; hashSequenceKeys = false; randomize = false
    deserializers = ([ type = "CNTKBinaryDeserializer"; module = "CNTKBinaryReader"; file = "x.bin" ])
]'''
    rc = reader_config(text)
    assert (rc.frame_mode, rc.max_errors, rc.multithreaded_deserialization, rc.local_timeline) == (True, 3, True, False)
    assert (rc.use_numeric_sequence_keys, rc.hash_sequence_keys, rc.randomize) == (True, False, False)


# ---------------------------------------------------------------------------------------------
# Unknown parameters
# ---------------------------------------------------------------------------------------------

def test_unknown_reader_parameter_is_named_with_its_location_and_a_suggestion():
    text = ctf("    randomise = true")
    err = raises_at(text, "randomise", r"unknown reader parameter 'randomise' \(did you mean 'randomize'\?\)")
    assert err.message.startswith("unknown reader parameter 'randomise'")


def test_unknown_input_parameter_is_named_with_the_input():
    text = ctf(inputs="features = [ dims = 2; dim = 2; format = dense ]")
    raises_at(text, "dims", r"unknown input 'features' parameter 'dims' \(did you mean 'dim'\?\)")


def test_unknown_deserializer_parameter_is_flagged():
    text = ('reader = [ deserializers = ([ type = "CNTKTextFormatDeserializer"; file = a.txt\n'
            '  chunkSize = 10; input = [ x = [ dim = 1; format = dense ] ] ]) ]')
    raises_at(text, "chunkSize", r"unknown deserializer parameter 'chunkSize'")


def test_unknown_composite_reader_parameter_is_flagged():
    text = 'reader = [ randomizationWindo = 5\n  deserializers = ([ type = "CNTKBinaryDeserializer"; file = x ]) ]'
    raises_at(text, "randomizationWindo", r"unknown reader parameter 'randomizationWindo' \(did you mean "
                                          r"'randomizationWindow'\?\)")


def test_ctf_only_parameters_are_rejected_for_the_binary_reader():
    text = 'reader = [ readerType = "CNTKBinaryReader"; file = x.bin\n  skipSequenceIds = true ]'
    raises_at(text, "skipSequenceIds", r"reader parameter 'skipSequenceIds' is not supported by CNTKBinaryReader")
    text = 'reader = [ readerType = CNTKBinaryReader; file = x.bin; input = [ f = [ definesMBSize = true ] ] ]'
    raises_at(text, "definesMBSize", r"parameter 'definesMBSize' is not supported by CNTKBinaryReader")
    text = 'reader = [ deserializers = ([ type = "CNTKBinaryDeserializer"; file = x; cacheIndex = true ]) ]'
    raises_at(text, "cacheIndex", r"deserializer parameter 'cacheIndex' is not supported by CNTKBinaryReader")


# ---------------------------------------------------------------------------------------------
# Validation with CNTK's messages
# ---------------------------------------------------------------------------------------------

def test_missing_input_section():
    text = 'reader = [\n  readerType = "CNTKTextFormatReader"\n  file = "d.txt"\n]'
    raises_at(text, "[", r'CNTKTextFormatReader configuration does not contain "input" section\.')


def test_empty_input_section():
    raises_at(ctf(inputs=""), "[", r'CNTKTextFormatReader configuration contains an empty "input" section\.',
              occurrence=2)


@pytest.mark.parametrize("inputs", ["f = [ dim = 2 ]", "f = [ format = dense ]"])
def test_input_without_dim_or_format(inputs):
    raises_at(ctf(inputs=inputs), "f =",
              r"Input section for input 'f' does not specify all the required parameters, \"dim\" and \"format\"\.")


def test_bad_format():
    raises_at(ctf(inputs="f = [ dim = 2; format = \"csr\" ]"), '"csr"',
              r"'format' parameter must be set either to 'dense' or 'sparse'\.")


def test_bad_precision_is_reported_where_it_was_written_even_when_inherited():
    text = ctf(outer="precision = half")
    raises_at(text, "half", r"Not supported precision 'half'\. Expected 'double' or 'float'\.")


def test_empty_alias():
    raises_at(ctf(inputs='f = [ alias = ""; dim = 1; format = dense ]'), '""', r"Alias value for input 'f' is empty\.")


def test_duplicate_alias_names_the_input_it_is_already_mapped_to():
    inputs = 'f = [ alias = "A"; dim = 1; format = dense ]\n g = [ alias = "A"; dim = 1; format = dense ]'
    raises_at(ctf(inputs=inputs), '"A"', r"Alias A is already mapped to input f\.", occurrence=2)
    # an alias may also collide with another input's default alias (its name)
    inputs = 'f = [ dim = 1; format = dense ]\n g = [ alias = f; dim = 1; format = dense ]'
    raises_at(ctf(inputs=inputs), "f;", r"Alias f is already mapped to input f\.")


def test_more_than_one_stream_defining_the_minibatch_size():
    inputs = ("a = [ dim = 1; format = dense; definesMBSize = true ]\n"
              " b = [ dim = 1; format = dense; definesMBSize = true ]")
    raises_at(ctf(inputs=inputs), "true", r"Only a single stream is allowed to define the minibatch size, "
                                          r"but 2 found: a, b\.", occurrence=2)


def test_more_than_one_deserializer_defining_the_minibatch_size():
    d = '[ type = "CNTKTextFormatDeserializer"; file = {f}; input = [ {n} = [ dim = 1; format = dense; definesMBSize = true ] ] ]'
    text = f"reader = [ deserializers = ( {d.format(f='a', n='x')} :\n {d.format(f='b', n='y')} ) ]"
    with pytest.raises(FormatError, match=r"Only a single deserializer is allowed to define minibatch size, "
                                          r"at least two found\."):
        reader_config(text)


def test_frame_mode_and_truncation_are_mutually_exclusive():
    raises_at(ctf("frameMode = true; truncated = true; truncationLength = 5"), "true;", 
              r"frameMode and truncated BPTT are mutually exclusive\.", occurrence=2)


def test_truncation_length_zero():
    raises_at(ctf("truncated = true"), "true", r"Truncation length cannot be 0\.")
    raises_at(ctf("truncated = true; truncationLength = 0"), "0", r"Truncation length cannot be 0\.")


def test_sample_based_window_without_window_in_the_composite_path():
    text = ('reader = [ sampleBasedRandomizationWindow = true\n'
            '  deserializers = ([ type = "CNTKTextFormatDeserializer"; file = a; input = [ x = [ dim = 1; format = dense ] ] ]) ]')
    raises_at(text, "true", r"'sampleBasedRandomizationWindow' \(== 'true'\) requires that the "
                            r"'randomizationWindow' is explicitly specified\.")
    # fine with an explicit window, and in the old path
    assert reader_config(text.replace("= true", "= true; randomizationWindow = 10")).randomization_window == 10
    assert reader_config(ctf("sampleBasedRandomizationWindow = true")).sample_based_randomization_window is True


def test_composite_structure_errors():
    raises_at("reader = [ deserializers = () ]", "()", r"Could not find deserializers in the reader config\.")
    raises_at('reader = [ deserializers = ([ type = "HTKFeatureDeserializer"; file = x ]) ]', '"HTK',
              r"deserializer type 'HTKFeatureDeserializer' is not supported")
    raises_at('reader = [ deserializers = ([ type = "CNTKBinaryDeserializer"; module = "CNTKTextFormatReader"; '
              'file = x ]) ]', '"CNTKTextFormatReader"', r"Cannot create deserializer\. Please check module and type")
    raises_at('reader = [ deserializers = ([ file = x ]) ]', "[ file", r"deserializer #1 does not specify its 'type'")
    raises_at('reader = [ readerType = CNTKTextFormatReader\n deserializers = ([ type = "CNTKBinaryDeserializer"; file = x ]) ]',
              "CNTKTextFormatReader", r"readerType 'CNTKTextFormatReader' cannot be combined with 'deserializers'")


def test_binary_deserializer_must_be_primary_and_numeric():
    ctf_d = '[ type = "CNTKTextFormatDeserializer"; file = a; input = [ x = [ dim = 1; format = dense ] ] ]'
    text = f'reader = [ deserializers = ( {ctf_d} : [ type = "CNTKBinaryDeserializer"; file = b ] ) ]'
    raises_at(text, '"CNTKBinaryDeserializer"', r"Binary deserializer can only be used as a primary\.")
    text = 'reader = [ useNumericSequenceKeys = false; deserializers = ([ type = "CNTKBinaryDeserializer"; file = b ]) ]'
    raises_at(text, "false", r"Binary deserializer does not support non-numeric sequence keys\.")


def test_reader_type_and_file_are_required_and_checked():
    raises_at('reader = [ readerType = "HTKMLFReader"; file = x ]', '"HTK', r"readerType 'HTKMLFReader' is not supported")
    raises_at('reader = [ file = x ]', "[", r"specifies neither 'readerType' nor 'deserializers'")
    raises_at('reader = [ readerType = CNTKBinaryReader ]', "[",
              r"CNTKBinaryReader configuration does not specify the required parameter 'file'")


@pytest.mark.parametrize("body,needle,match", [
    ("maxErrors = -1", "-1", r"'maxErrors' must be a non-negative integer, not -1"),
    ("chunkSizeInBytes = 0", "0", r"'chunkSizeInBytes' must be a positive integer, not 0"),
    ("traceLevel = high", "high", r"'traceLevel' must be a non-negative integer, not 'high'"),
    ("keepDataInMemory = maybe", "maybe", r"'keepDataInMemory' must be true or false, not 'maybe'"),
    ("randomize = sometimes", "sometimes", r"'randomize' must be true, false, \"auto\" or \"none\""),
    ("randomizationWindow = 1.5", "1.5", r"'randomizationWindow' must be a non-negative integer"),
])
def test_badly_typed_values_are_located(body, needle, match):
    raises_at(ctf(body), needle, match)


def test_dim_must_be_a_positive_integer_and_sparse_dim_fit_int32():
    raises_at(ctf(inputs="f = [ dim = 0; format = dense ]"), "0", r"'dim' must be a positive integer, not 0")
    raises_at(ctf(inputs="f = [ dim = 2147483648; format = sparse ]"), "2147483648",
              r"Sample dimension \(2147483648\) for sparse input 'f' exceeds the maximum allowed value \(2147483647\)\.")


def test_input_entries_must_be_sections():
    raises_at(ctf(inputs="f = 3"), "3", r"input 'f' must be a section")


def test_numeric_strings_from_quotes_are_accepted_like_cntk():
    rc = reader_config(ctf('maxErrors = "5"', inputs='f = [ dim = "4"; format = dense; alias = 7 ]'))
    assert rc.deserializers[0].max_errors == 5
    assert rc.deserializers[0].streams[0] == StreamConfig("f", "7", "dense", 4)
