"""The CNTK reader conformance cases, transcribed from ``conformance/cntk/CASES.md``.

Section parameters come from the CASES.md table and the BrainScript configs in
``Config/CNTKTextFormatReader/{dense,sparse,edge_cases}.cntk``, transcribed by hand.
The reader tests use this table as written; ``test_cntk_config_sections.py`` parses the
real ``.cntk`` files with ``recordkit.from_config`` and checks that both agree, so a
transcription slip and a config-parser bug cannot hide each other. Case numbers are the
row numbers of CASES.md.

Each case has a ``kind``:

* ``control``: run through the harness (``cntk_harness.run_reader_test``: NoRandomizer
  for ``randomize=false``, else CNTK's BlockRandomizer order from recordkit's
  ``engine.randomizer.BlockRandomizer``) and compare the output tokens with the control
  file (or with ``expected_tokens`` where recordkit deliberately differs from CNTK 2.7;
  the reason is in ``note``);
* ``special``: a dedicated test in ``test_cntk_ctf_conformance.py`` (error cases, the
  direct-parser cases 28-31, the composite self-consistency cases 34/35 and the
  two-worker case 36);
* ``pending``: not run; ``pending`` holds the reason (emitted as a skip).

Variants: ``plain`` runs the section as written; ``defMBSize`` sets ``defMBSize=true``,
which gives the stream marked ``mb=True`` (``*`` in CASES.md) ``definesMBSize``.
"""
from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
DEFAULT_CHUNK = 32 * MiB

BOTH = ("plain", "defMBSize")
PLAIN = ("plain",)


@dataclass(frozen=True)
class Stream:
    """One ``input`` entry: name, alias in the file, dim, format; ``mb``: carries definesMBSize=$defMBSize$."""

    name: str
    alias: str
    dim: int
    format: str
    mb: bool = False


@dataclass(frozen=True)
class Section:
    """A config section (its ``reader`` subsection, with inherited keys resolved)."""

    config: str                  # file under Config/CNTKTextFormatReader
    name: str
    precision: str               # "float" | "double"
    data: str                    # file under Data/CNTKTextFormatReader
    streams: tuple
    randomize: bool
    chunk_size: int = DEFAULT_CHUNK
    keep_in_memory: bool = False
    max_errors: int = 0
    skip_sequence_ids: bool = False
    trace_level: int = 1
    # chunks CNTK's Index.cpp makes for this file (CASES.md / spec 2.4); None: not stated
    expected_chunks: int | None = None
    # composite path (``deserializers = (...)``): one (data file, stream names) per deserializer,
    # in config order; empty for the old ``readerType`` path (one deserializer over ``data``)
    deserializers: tuple = ()
    # sequences / chunks visible in the data file: used to justify including randomize=T cases
    note: str = ""

    def stream_specs(self, variant: str) -> list[dict]:
        """Keyword arguments for recordkit ``StreamSpec`` in config order."""
        return [dict(name=s.name, format=s.format, dim=s.dim, alias=s.alias,
                     defines_mb_size=(variant == "defMBSize" and s.mb)) for s in self.streams]

    @property
    def composite(self) -> bool:
        return bool(self.deserializers)

    @property
    def default_window_chunks(self) -> int:
        """CNTK's chunk-based window when the config sets none: floor(2^32 / chunkSizeInBytes)
        (old CTF path; also the composite path with a CTF deserializer, with the reader-level
        chunk size, which no section here sets)."""
        return (1 << 32) // self.chunk_size

    def reader_kwargs(self) -> dict:
        return dict(precision=self.precision, max_errors=self.max_errors,
                    skip_sequence_ids=self.skip_sequence_ids, trace_level=self.trace_level,
                    chunk_size=self.chunk_size)


@dataclass(frozen=True)
class Case:
    id: str                      # CASES.md row: "1".."36", "23a", "23b"
    test: str                    # the CNTK unit test
    behaviour: str               # short slug used in pytest ids
    kind: str                    # "control" | "special" | "pending"
    section: Section | None = None
    control: str | None = None   # file under Control/CNTKTextFormatReader
    epoch_size: int = 0
    mb_size: int = 0
    epochs: int = 0
    shared_layout: bool = True
    variants: tuple = BOTH
    written: tuple = ()          # streams the helper writes, in order (features..., labels...)
    workers: int = 1             # numSubsets
    rank: int = 0                # subsetNum
    compare_section: Section | None = None  # 34/35: a second run that must reproduce the first
    expected_tokens: tuple | None = None  # overrides the control where recordkit deliberately differs
    pending: str | None = None
    note: str = ""

    @property
    def pytest_id(self) -> str:
        if self.id.startswith("cbf-"):
            return self.id
        return f"c{self.id.zfill(2) if self.id.isdigit() else self.id.zfill(3)}-{self.behaviour}"


def S(spec: str, mb: bool = False) -> Stream:
    """``name:alias:dim:format`` as in the CASES.md table."""
    name, alias, dim, fmt = spec.split(":")
    return Stream(name, alias, int(dim), fmt, mb)


# ---------------------------------------------------------------------------------------------
# Sections

D, SP, E = "dense.cntk", "sparse.cntk", "edge_cases.cntk"

SECTIONS = {
    # dense.cntk
    "dense/1x1": Section(D, "1x1", "double", "1x1_dense.txt", (S("features:F:10000:dense", True),), True,
                         expected_chunks=1, note="1 sequence (1 line, id 0), 1 chunk"),
    "dense/1x2": Section(D, "1x2", "double", "1x2_dense.txt", (S("features:F0:100:dense", True),), True,
                         expected_chunks=1, note="1 sequence (2 lines, id 0), 1 chunk"),
    "dense/1x10": Section(D, "1x10", "float", "1x10_dense.txt", (S("features:F0:10:dense", True),), True,
                          expected_chunks=1, note="1 sequence (10 lines, id 0), 1 chunk"),
    "dense/10x1_MI": Section(D, "10x1_MI", "float", "10x1_MI_dense.txt", (
        S("features1:F1:1:dense", True), S("features2:F2:10:dense"), S("features3:F3:100:dense"),
        S("features4:F4:1000:dense"), S("labels1:L1:1:dense"), S("labels2:L2:10:dense"), S("labels3:L3:100:dense"),
    ), True, chunk_size=50000, keep_in_memory=True, expected_chunks=3,
        note="line mode, 10 sequences in 3 chunks (4+4+2)"),
    "dense/10x10": Section(D, "10x10", "float", "10x10_dense.txt", (S("features:F0:5:dense", True),), False,
                           expected_chunks=1),
    "dense/100x1": Section(D, "100x1", "double", "100x1_dense.txt", (
        S("features:F:100:dense"), S("labels:L:100:dense", True),
    ), True, chunk_size=10000, keep_in_memory=True, expected_chunks=20,
        note="UTF-8 BOM; 100 one-line sequences in 20 chunks"),
    "dense/MNIST": Section(D, "MNIST", "double", "MNIST_dense.txt", (
        S("features:F:784:dense"), S("labels:L:10:dense", True),
    ), False, chunk_size=10000, keep_in_memory=True, expected_chunks=200,
        note="line mode (lines start with |L), 1000 sequences"),
    "dense/Simple": Section(D, "Simple", "float", "Simple_dense.txt", (
        S("features:F:2:dense", True), S("labels:L:2:dense"),
    ), False, expected_chunks=1),
    "dense/Simple_single_stream": Section(D, "Simple_single_stream", "float", "Simple_dense.txt", (
        S("features:F:2:dense", True),
    ), False, trace_level=0, expected_chunks=1, note="|L is an unknown input here"),
    "dense/50x20_jagged_sequences": Section(D, "50x20_jagged_sequences", "double",
                                            "50x20_jagged_sequences_dense.txt",
                                            (S("features:F0:3:dense", True),), False, expected_chunks=1),
    "dense/100x100x3_randomize_auto": Section(D, "100x100x3_randomize_auto", "double",
                                              "100x100x3_jagged_sequences_dense.txt", (
        S("features1:F0:10:dense", True), S("features2:F1:50:dense"), S("features3:F2:100:dense"),
    ), True, note="data file missing from every snapshot"),
    "dense/200x200x2_seq2seq": Section(D, "200x200x2_seq2seq", "double", "200x200x2_seq2seq_dense.txt", (
        S("features1:F0:5:dense"), S("features2:F1:50:dense"),
    ), True, note="data file missing from every snapshot"),
    "dense/5x10_and_5x5_jagged": Section(D, "5x10_and_5x5_jagged", "double", "5x10_and_5x5_jagged.txt", (
        S("features1:F0:10:dense"), S("features2:F1:5:dense"),
    ), True, expected_chunks=1, deserializers=(("5x10_and_5x5_jagged.txt", ("features1", "features2")),),
        note="composite reader (deserializers=...) with one CTF deserializer; 5 sequences, 40 rows"),
    "dense/5x10_and_5x5_jagged_composite": Section(
        D, "5x10_and_5x5_jagged_composite", "double", "5x10_jagged.txt", (
            S("features1:F0:10:dense"), S("features2:F1:5:dense"),
        ), True, expected_chunks=1,
        deserializers=(("5x10_jagged.txt", ("features1",)), ("5x5_jagged.txt", ("features2",))),
        note="composite reader, two CTF deserializers joined by sequence id (F0 from the first file, "
             "F1 from the second); the same 5 sequences as 5x10_and_5x5_jagged.txt"),
    # sparse.cntk
    "sparse/1x1": Section(SP, "1x1", "float", "1x1_sparse.txt", (S("features:F0:10000:sparse", True),), True,
                          expected_chunks=1, note="1 sequence (1 line, no id: line mode), 1 chunk"),
    "sparse/1x2": Section(SP, "1x2", "float", "1x2_sparse.txt", (S("features:F0:1000:sparse", True),), True,
                          expected_chunks=1, note="1 sequence (2 lines, id 0), 1 chunk"),
    "sparse/1x10": Section(SP, "1x10", "double", "1x10_sparse.txt", (S("features:F0:100:sparse", True),), True,
                           expected_chunks=1, note="1 sequence (10 lines, id 0), 1 chunk"),
    "sparse/10x10": Section(SP, "10x10", "double", "10x10_sparse.txt", (S("features:F0:100:sparse", True),),
                            False, expected_chunks=1),
    "sparse/3x5_MI": Section(SP, "3x5_MI", "float", "3x5_MI_sparse.txt", (
        S("features1:F0:2:sparse", True), S("features2:F1:20:sparse"), S("features3:F2:200:sparse"),
    ), False, expected_chunks=1),
    "sparse/20x10_MI_jagged_samples": Section(SP, "20x10_MI_jagged_samples", "float",
                                              "20x10_MI_jagged_samples_sparse.txt", (
        S("features1:F0:2:sparse", True), S("features2:F1:20:sparse"), S("features3:F2:200:sparse"),
    ), False, expected_chunks=1),
    "sparse/50x20_jagged_sequences": Section(SP, "50x20_jagged_sequences", "float",
                                             "50x20_jagged_sequences_sparse.txt",
                                             (S("features:F0:100:sparse"),), False, expected_chunks=1),
    "sparse/100x100_jagged": Section(SP, "100x100_jagged", "float", "100x100_jagged_sparse.txt",
                                     (S("features:F0:20:sparse"),), False, expected_chunks=1),
    # edge_cases.cntk (randomize defaults to true where the section does not set it)
    "edge/space_separated": Section(E, "space_separated", "double", "space_separated.txt", (
        S("features1:F1:15:dense", True), S("features2:F2:12:dense"), S("features3:F3:1:dense"),
    ), True, expected_chunks=1, note="1 sequence (2 lines, both id 1), 1 chunk"),
    "edge/missing_trailing_newline": Section(E, "missing_trailing_newline", "double",
                                             "missing_trailing_newline.txt",
                                             (S("features:features:1:dense", True),), True, expected_chunks=1,
                                             note="1 sequence (2 lines, both id 1, no final newline), 1 chunk"),
    "edge/blank_lines": Section(E, "blank_lines", "double", "contains_blank_lines.txt",
                                (S("features:features:1:dense", True),), True, skip_sequence_ids=True,
                                note="line mode; 2 content lines around a blank line"),
    "edge/blank_lines_ignored": Section(E, "blank_lines_ignored", "double", "contains_blank_lines.txt",
                                        (S("features:features:1:dense", True),), False, max_errors=2,
                                        expected_chunks=1),
    "edge/duplicate_inputs": Section(E, "duplicate_inputs", "double", "duplicate_inputs.txt", (
        S("features1:F1:1:dense", True), S("features2:F2:1:dense"),
    ), True, note="1 sequence; order is irrelevant to the expected error"),
    "edge/empty_samples": Section(E, "empty_samples", "float", "empty_samples.txt", (
        S("features:F0:10:dense", True), S("labels:F1:10:sparse"),
    ), False, expected_chunks=1),
    "edge/ref_data_with_escape_sequences": Section(E, "ref_data_with_escape_sequences", "float",
                                                   "ref_data_with_escape_sequences.txt", (
        S("features:F0:100:sparse", True), S("labels:F1:3:dense"),
    ), False, expected_chunks=1),
}

_MISSING = "data and control files are missing from every snapshot (CASES.md, 'Not obtainable')"


def _names(section: str) -> tuple:
    return tuple(s.name for s in SECTIONS[section].streams)


# ---------------------------------------------------------------------------------------------
# CNTKTextFormatReaderTests.cpp

CASES: list[Case] = [
    Case("1", "CNTKTextFormatReader_Simple_dense", "simple_dense_two_streams", "control",
         SECTIONS["dense/Simple"], "Simple_dense.txt", 1000, 250, 10, written=("features", "labels")),
    Case("2", "CNTKTextFormatReader_Simple_dense_single_stream", "unknown_input_skipped_single_stream", "control",
         SECTIONS["dense/Simple_single_stream"], "Simple_dense_single_stream.txt", 1000, 250, 10,
         written=("features",)),
    Case("3", "CNTKTextFormatReader_MNIST_dense", "mnist_line_mode_200_chunks", "control",
         SECTIONS["dense/MNIST"], "MNIST_dense.txt", 1000, 1000, 1, written=("features", "labels")),
    Case("4", "CNTKTextFormatReader_1x1_1_dense", "single_sample_dim_10000", "control",
         SECTIONS["dense/1x1"], "1x1_1_dense.txt", 1, 1, 1, written=("features",),
         note="randomize=true, but one sequence in one chunk: the order is fixed"),
    Case("5", "CNTKTextFormatReader_1x1_2_dense", "single_sample_repeated_over_sweeps", "control",
         SECTIONS["dense/1x1"], "1x1_2_dense.txt", 2, 1, 3, written=("features",),
         note="randomize=true, but one sequence in one chunk: the order is fixed"),
    Case("6", "CNTKTextFormatReader_1x10_dense", "one_ten_sample_sequence", "control",
         SECTIONS["dense/1x10"], "1x10_dense.txt", 10, 10, 1, written=("features",),
         note="randomize=true, but one sequence in one chunk: the order is fixed"),
    Case("7", "CNTKTextFormatReader_10x1_MI_2_dense", "multi_input_randomized_3_chunks", "control",
         SECTIONS["dense/10x1_MI"], "10x1_MI_2_dense.txt", 7, 3, 3, written=_names("dense/10x1_MI"),
         note="BlockRandomizer over 3 chunks (window 2^32 // 50000 = 85899 chunks); 21 samples = 2.1 sweeps, so the second "
              "epoch is cut at the sweep end and sweep 1 is re-randomized with seed 1"),
    Case("8", "CNTKTextFormatReader_1x10_MI_1_dense", "multi_input_randomized_mb1", "control",
         SECTIONS["dense/10x1_MI"], "10x1_MI_1_dense.txt", 10, 1, 3, written=_names("dense/10x1_MI"),
         note="BlockRandomizer over 3 chunks; each epoch is one sweep, seeds 0, 1, 2"),
    Case("9", "CNTKTextFormatReader_10x10_dense", "ten_sequences_time_major", "control",
         SECTIONS["dense/10x10"], "10x10_dense.txt", 100, 100, 1, written=("features",)),
    Case("10", "CNTKTextFormatReader_100x1_1_dense", "bom_20_chunks_rerandomized", "control",
         SECTIONS["dense/100x1"], "100x1_1_dense.txt", 10, 1, 10, written=("features", "labels"),
         note="BlockRandomizer over 20 chunks (window 429496 chunks: the whole sweep)"),
    Case("11", "CNTKTextFormatReader_100x1_2_dense", "bom_20_chunks_mb3", "control",
         SECTIONS["dense/100x1"], "100x1_2_dense.txt", 5, 3, 4, written=("features", "labels"),
         note="BlockRandomizer over 20 chunks; minibatches of 3+2 samples"),
    Case("12", "CNTKTextFormatReader_50x20_jagged_sequences_dense", "jagged_dense_first_fit_packing", "control",
         SECTIONS["dense/50x20_jagged_sequences"], "50x20_jagged_sequences_dense.txt", 508, 508, 1,
         written=("features",)),
    Case("13", "CNTKTextFormatReader_1x1_sparse", "single_sparse_sample_line_mode", "control",
         SECTIONS["sparse/1x1"], "1x1_sparse.txt", 1, 1, 1, written=("features",),
         note="randomize=true, but one sequence in one chunk; the control lacks its final newline"),
    Case("14", "CNTKTextFormatReader_1x2_sparse", "one_two_sample_sparse_sequence", "control",
         SECTIONS["sparse/1x2"], "1x2_sparse.txt", 2, 2, 1, written=("features",),
         note="randomize=true, but one sequence in one chunk: the order is fixed"),
    Case("15", "CNTKTextFormatReader_1x10_sparse", "one_ten_sample_sparse_sequence", "control",
         SECTIONS["sparse/1x10"], "1x10_sparse.txt", 10, 10, 1, written=("features",),
         note="randomize=true, but one sequence in one chunk: the order is fixed"),
    Case("16", "CNTKTextFormatReader_10x10_sparse", "ten_sparse_sequences", "control",
         SECTIONS["sparse/10x10"], "10x10_sparse.txt", 100, 100, 1, written=("features",)),
    Case("17", "CNTKTextFormatReader_3x5_MI_sparse", "sparse_multi_input", "control",
         SECTIONS["sparse/3x5_MI"], "3x5_MI_sparse.txt", 15, 15, 1, written=_names("sparse/3x5_MI")),
    Case("18", "CNTKTextFormatReader_20x10_MI_jagged_samples_sparse", "sparse_multi_input_jagged_samples",
         "control", SECTIONS["sparse/20x10_MI_jagged_samples"], "20x10_MI_jagged_samples_sparse.txt", 200, 200, 1,
         written=_names("sparse/20x10_MI_jagged_samples")),
    Case("19", "CNTKTextFormatReader_50x20_jagged_sequences_sparse", "jagged_sparse_sequences", "control",
         SECTIONS["sparse/50x20_jagged_sequences"], "50x20_jagged_sequences_sparse.txt", 564, 564, 1,
         variants=PLAIN, written=("features",)),
    Case("20", "CNTKTextFormatReader_100x100_jagged_sparse", "jagged_sparse_100_sequences", "control",
         SECTIONS["sparse/100x100_jagged"], "100x100_jagged_sparse.txt", 4887, 4887, 1,
         variants=PLAIN, written=("features",)),
    Case("21", "CNTKTextFormatReader_space_separated", "long_decimals_printed_with_6_digits", "control",
         SECTIONS["edge/space_separated"], "space_separated.txt", 2, 2, 1, written=_names("edge/space_separated"),
         note="randomize=true, but one sequence (both lines have id 1) in one chunk: the order is fixed"),
    Case("22", "CNTKTextFormatReader_missing_trailing_newline", "missing_trailing_newline_accepted", "control",
         SECTIONS["edge/missing_trailing_newline"], "missing_trailing_newline.txt", 2, 2, 1,
         written=("features",),
         note="randomize=true, but one sequence (both lines have id 1) in one chunk: the order is fixed"),
    Case("23a", "CNTKTextFormatReader_blank_lines", "blank_line_in_line_mode_ignored", "special",
         SECTIONS["edge/blank_lines"], "blank_lines.txt", 2, 2, 1, variants=PLAIN, written=("features",),
         note="CNTK throws (the blank line is an empty 1-row sequence, maxErrors=0); recordkit ignores "
              "blank lines (deliberate difference 3) and reads the 2 sequences"),
    Case("23b", "CNTKTextFormatReader_blank_lines", "blank_line_skipped_by_mb_stream_exact_order", "control",
         SECTIONS["edge/blank_lines"], "blank_lines.txt", 2, 2, 1, variants=("defMBSize",),
         written=("features",),
         note="BlockRandomizer over 2 sequences in 1 chunk (sweep 0 keeps file order); CNTK's index skips the "
              "blank line (no |features), recordkit ignores it: both read 2 sequences"),
    Case("24", "CNTKTextFormatReader_blank_lines_ignored", "blank_line_in_id_mode_ignored", "control",
         SECTIONS["edge/blank_lines_ignored"], "blank_lines.txt", 3, 3, 1, variants=PLAIN, written=("features",),
         expected_tokens=("1", "2", "1"),
         note="CNTK counts the blank line as an index row of sequence 1 (2 rows, 2 errors), so its sweep is "
              "3 samples and the 3-sample epoch is exactly sequences 1 and 2 (control `1 2`, P=2, T=1). "
              "recordkit ignores blank lines (deliberate difference 3): no errors, sequence 1 has length 1, "
              "the sweep is 2 samples, so the 3-sample epoch is the same first minibatch (P=2, T=1: `1 2`) "
              "plus a second minibatch that starts the next sweep with sequence 1 (`1`)."),
    Case("25", "CNTKTextFormatReader_duplicate_inputs", "duplicate_input_in_row_is_error", "special",
         SECTIONS["edge/duplicate_inputs"], None, 1, 1, 1, variants=PLAIN, written=("features1", "features2"),
         note="F2 has 2 samples on a 1-row sequence: an error under maxErrors=0 (order-independent)"),
    Case("26", "CNTKTextFormatReader_empty_samples", "empty_dense_and_sparse_samples_separate_layouts", "control",
         SECTIONS["edge/empty_samples"], "empty_samples.txt", 6, 6, 1, shared_layout=False,
         written=("features", "labels")),
    Case("27", "CNTKTextFormatReader_ref_data_with_escape_sequences", "comments_skipped_separate_layouts",
         "control", SECTIONS["edge/ref_data_with_escape_sequences"], "ref_data_with_escape_sequences.txt",
         9, 9, 1, shared_layout=False, written=("features", "labels")),
    Case("28", "CNTKTextFormatReader_invalid_inputs", "invalid_inputs_under_large_error_budget", "special",
         None, "invalid_inputs_Control.txt", variants=PLAIN,
         note="direct parser; streams A (dense 1) and B (sparse 10), maxErrors=99999, float"),
    Case("29", "CNTKTextFormatReader_no_trailing_newline_valid_input", "numbers_without_trailing_newline",
         "special", None, variants=PLAIN),
    Case("30", "CNTKTextFormatReader_no_trailing_newline_invalid_input", "truncated_input_at_eof_is_error",
         "special", None, variants=PLAIN),
    Case("31", "CNTKTextFormatReader_extra_input_should_be_ignored", "unknown_inputs_ignored", "special",
         None, variants=PLAIN),
    Case("32", "CNTKTextFormatReader_100x100x3", "randomize_auto_line_sorted", "pending",
         SECTIONS["dense/100x100x3_randomize_auto"], "100x100x3_jagged_sequences_dense_sorted.txt", 5476, 1000, 1,
         shared_layout=False, pending=_MISSING),
    Case("33", "CNTKTextFormatReader_200x200x2_seq2seq", "seq2seq_line_sorted", "pending",
         SECTIONS["dense/200x200x2_seq2seq"], "200x200x2_seq2seq_dense_sorted.txt", 14237, 5000, 1,
         shared_layout=False, variants=PLAIN,
         pending=_MISSING),
    Case("34", "CompositeCNTKTextFormatReader_5x5_and_5x10_jagged_minibatch_10", "composite_join_mb10",
         "special", SECTIONS["dense/5x10_and_5x5_jagged"], None, 40, 10, 3, shared_layout=False, variants=PLAIN,
         written=("features1", "features2"), compare_section=SECTIONS["dense/5x10_and_5x5_jagged_composite"],
         note="no control: run 1 (one file) writes its output, run 2 (two files joined by id) must match it"),
    Case("35", "CompositeCNTKTextFormatReader_5x5_and_5x10_jagged_minibatch_21", "composite_join_mb21",
         "special", SECTIONS["dense/5x10_and_5x5_jagged"], None, 413, 21, 3, shared_layout=False, variants=PLAIN,
         written=("features1", "features2"), compare_section=SECTIONS["dense/5x10_and_5x5_jagged_composite"],
         note="no control: run 1 (one file) writes its output, run 2 (two files joined by id) must match it"),
    Case("36", "CNTKTextFormatReaderNoFirstMinibatchData", "worker_without_chunks_gets_no_data", "special",
         SECTIONS["dense/1x2"], "NonExistent.txt", 10, 1, 10, variants=PLAIN, written=("features",),
         workers=2, rank=1,
         note="CNTK deals chunks to workers (chunk mod workers): one chunk, so rank 1 gets nothing (empty "
              "control). recordkit splits each sweep into sample-balanced runs (deliberate difference); "
              "here the single sequence cannot be split, so rank 1 is empty too"),
]

# ---------------------------------------------------------------------------------------------
# CNTKBinaryReaderTests.cpp: all six run in test_cntk_cbf_conformance.py (its own table there)

CBF_CASES: list[Case] = []

BY_ID = {c.id: c for c in CASES + CBF_CASES}


def control_cases() -> list[Case]:
    return [c for c in CASES if c.kind == "control"]


def pending_cases() -> list[Case]:
    return [c for c in CASES + CBF_CASES if c.kind == "pending"]


# ---------------------------------------------------------------------------------------------
# Direct-parser cases 29-31: inline strings of the C++ test, written out under generated/

NO_TRAILING_NEWLINE_VALID = [  # (file, text after "|A ", expected value)
    ("generated/no_trailing_newline_valid/0.no_trailing_newline.txt", "1", 1.0),
    ("generated/no_trailing_newline_valid/1.no_trailing_newline.txt", "-123", -123.0),
    ("generated/no_trailing_newline_valid/2.no_trailing_newline.txt", "45.", 45.0),
    ("generated/no_trailing_newline_valid/3.no_trailing_newline.txt", "6.78", 6.78),
    ("generated/no_trailing_newline_valid/4.no_trailing_newline.txt", "9.10e-11", 9.10e-11),
]

NO_TRAILING_NEWLINE_INVALID = [  # (file, what follows "|A" at the end of the file)
    ("generated/no_trailing_newline_invalid/case0.txt", ""),
    ("generated/no_trailing_newline_invalid/case1.txt", "\t"),
    ("generated/no_trailing_newline_invalid/case2.txt", " "),
    ("generated/no_trailing_newline_invalid/case3.txt", "     "),
    ("generated/no_trailing_newline_invalid/case4.txt", " -"),
    ("generated/no_trailing_newline_invalid/case5.txt", " +"),
    ("generated/no_trailing_newline_invalid/case6.txt", " 12.+"),
    ("generated/no_trailing_newline_invalid/case7.txt", " 12.+e"),
    ("generated/no_trailing_newline_invalid/case8.txt", " 1:"),
]

EXTRA_INPUT = [  # (file, content, value of A)
    ("generated/extra_input/case0.txt", "|A 1 |B 1 2 3", 1.0),
    ("generated/extra_input/case1.txt", "|A 2 |this_input_is_supposed_to_be_also_ignored 1 2 3", 2.0),
]
