"""The case table (``cases.py``, transcribed by hand) against the real CNTK configs.

Every config-driven case's section is read from the corpus' ``.cntk`` file with
``recordkit.compat.brainscript.reader_config`` and built with ``recordkit.from_config``
(``base_dir`` = the Data directory, as the C++ tests' working directory), in each
variant the case runs (``defMBSize=true`` given as an override, like the C++ helper's
extra parameter). The result must agree with the table: streams (name, alias, format,
dim, definesMBSize), precision, data files, chunk size and chunk count, randomization
and its default window, error budget, keepDataInMemory. So a slip in the table and a bug
in the config parser cannot hide each other. The CBF sections are checked against the
CBF test table the same way.
"""
from __future__ import annotations

import warnings

import pytest

from . import cases as C
from .cntk_harness import CTF_DATA_DIR, cntk_corpus_dir

CORPUS = cntk_corpus_dir()
if not (CORPUS / "CASES.md").is_file():
    pytest.skip(f"CNTK conformance corpus not found at {CORPUS}: set RECORDKIT_SHARED", allow_module_level=True)

try:
    from recordkit import RecordkitWarning, from_config
    from recordkit.compat.brainscript import reader_config
    from recordkit.compat.config_source import default_window
except ModuleNotFoundError as exc:
    if exc.name and exc.name.startswith("recordkit"):
        pytest.skip(f"recordkit not importable ({exc})", allow_module_level=True)
    raise

CTF_CONFIG_DIR = CORPUS / "Config/CNTKTextFormatReader"
CBF_CONFIG = CORPUS / "Config/CNTKBinaryReader/test.cntk"
CBF_DATA_DIR = CORPUS / "Data/CNTKBinaryReader"
FOUR_GIB = 1 << 32


def _overrides(variant: str):
    return {"defMBSize": "true"} if variant == "defMBSize" else None


# every (section, variant) some config-driven case runs, plus the composite comparison sections
def _section_variants():
    seen = {}
    for case in C.CASES:
        for section in (case.section, case.compare_section):
            if section is None:
                continue
            for variant in case.variants:
                seen.setdefault((section.config, section.name, variant), (section, variant, case.id))
    return list(seen.values())


SECTION_PARAMS = [pytest.param(s, v, id=f"{s.config.split('.')[0]}/{s.name}[{v}]") for s, v, _ in _section_variants()]


def _expected_files(section: C.Section) -> list[tuple[str, tuple]]:
    if section.composite:
        return [(f, tuple(names)) for f, names in section.deserializers]
    return [(section.data, tuple(s.name for s in section.streams))]


@pytest.mark.parametrize("section, variant", SECTION_PARAMS)
def test_config_section_agrees_with_case_table(section: C.Section, variant: str):
    text = (CTF_CONFIG_DIR / section.config).read_text()
    cfg = reader_config(text, section=section.name, overrides=_overrides(variant), source=section.config)

    assert cfg.composite == section.composite
    assert cfg.randomize == section.randomize
    assert cfg.randomization_seed == 0
    files = [(d.file, tuple(s.name for s in d.streams)) for d in cfg.deserializers]
    assert files == _expected_files(section)
    streams = [dict(name=s.name, format=s.format, dim=s.dim, alias=s.alias, defines_mb_size=s.defines_mb_size)
               for d in cfg.deserializers for s in d.streams]
    assert streams == section.stream_specs(variant)
    for d in cfg.deserializers:
        assert d.type == "CNTKTextFormatDeserializer"
        assert d.precision == section.precision            # inherited from the enclosing section
        assert d.chunk_size == section.chunk_size
        assert d.keep_data_in_memory == section.keep_in_memory
        assert d.max_errors == section.max_errors
        assert d.skip_sequence_ids == section.skip_sequence_ids
        assert d.trace_level == section.trace_level
        assert not d.cache_index
    assert not cfg.frame_mode and not cfg.truncated        # no section sets them (CASES.md)
    if section.randomize:
        # old path: floor(2^32 / chunkSizeInBytes) chunks; composite path with CTF: the same with the
        # reader-level chunk size (32 MiB here): 128 chunks
        assert default_window(cfg) == (section.default_window_chunks, False)
        assert FOUR_GIB // section.chunk_size == section.default_window_chunks


BUILDABLE = [p for p in SECTION_PARAMS
             if all((CORPUS / CTF_DATA_DIR / f).is_file() for f, _ in _expected_files(p.values[0]))]
MISSING = [p for p in SECTION_PARAMS if p not in BUILDABLE]


@pytest.mark.parametrize("section, variant", BUILDABLE)
def test_from_config_builds_the_tabled_reader(section: C.Section, variant: str):
    text = (CTF_CONFIG_DIR / section.config).read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordkitWarning)
        mbs = from_config(text, section=section.name, overrides=_overrides(variant),
                          base_dir=str(CORPUS / CTF_DATA_DIR), source=section.config)
    with mbs:
        got = [dict(name=s.name, format=s.format, dim=s.dim, alias=s.alias, defines_mb_size=s.defines_mb_size)
               for s in mbs.streams]
        assert got == section.stream_specs(variant)
        parts = getattr(mbs.deserializer, "parts", [mbs.deserializer])
        assert len(parts) == len(_expected_files(section))
        for reader, (file, _) in zip(parts, _expected_files(section)):
            assert reader.path.endswith(file)
            assert reader.dtype.name == {"float": "float32", "double": "float64"}[section.precision]
            assert reader.chunk_size == section.chunk_size
            assert reader.keep_data_in_memory == section.keep_in_memory
        if section.expected_chunks is not None:
            assert len(mbs.deserializer.chunks) == section.expected_chunks
        expected = ({"randomize": True, "window": section.default_window_chunks, "sample_based": False, "seed": 0}
                    if section.randomize else {"randomize": False})
        assert mbs.randomizer.describe() == expected


@pytest.mark.parametrize("section, variant", MISSING)
def test_from_config_reports_the_missing_data_file(section: C.Section, variant: str):
    """32/33: the config parses (previous test), the data file is not in the corpus."""
    text = (CTF_CONFIG_DIR / section.config).read_text()
    with pytest.raises((FileNotFoundError, OSError)):
        from_config(text, section=section.name, overrides=_overrides(variant),
                    base_dir=str(CORPUS / CTF_DATA_DIR), source=section.config)


# ---------------------------------------------------------------------------------------------
# CBF sections (Config/CNTKBinaryReader/test.cntk) against the CBF test table

def _cbf_table():
    from . import test_cntk_cbf_conformance as cbf
    return cbf.CASES


CBF_KEEP = {"MNIST_dense"}  # keepDataInMemory = true (CASES.md)
CBF_SECTION = {"Simple_dense": "Simple", "MNIST_dense": "MNIST"}  # other sections are named like the case


@pytest.mark.parametrize("name", ["Simple_dense", "MNIST_dense", "10x10_dense", "50x20_jagged_sequences_dense",
                                  "10x10_sparse", "50x20_jagged_sequences_sparse"])
def test_cbf_config_section_agrees_with_cbf_table(name: str):
    binfile, precision, *_ = _cbf_table()[name]
    section = CBF_SECTION.get(name, name)
    cfg = reader_config(CBF_CONFIG.read_text(), section=section, source="test.cntk")
    assert not cfg.composite and not cfg.randomize
    (d,) = cfg.deserializers
    assert d.type == "CNTKBinaryDeserializer"
    assert d.file == binfile and d.precision == precision
    assert d.keep_data_in_memory == (name in CBF_KEEP)
    assert d.streams == ()  # stream names come from the file
    with from_config(CBF_CONFIG.read_text(), section=section, base_dir=str(CBF_DATA_DIR), source="test.cntk") as mbs:
        assert mbs.randomizer.describe() == {"randomize": False}
        assert mbs.deserializer.dtype.name == {"float": "float32", "double": "float64"}[precision]
