"""Unit tests of the CNTK harness re-creation (no recordkit needed).

The randomizer, packer and writer are checked on tiny in-memory sequences whose
expected schedules and layouts are worked out by hand from NoRandomizer.cpp and
MBLayout::InitAsPackedSequences. Then the whole harness is checked end to end against
real CNTK control files, fed by a deliberately naive reference CTF parser (only for
well-formed files), so a failure of the recordkit conformance tests can be told apart
from a harness bug.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from . import cases as C
from .cntk_harness import (
    CTF_CONTROL_DIR, CTF_DATA_DIR, InMemorySource, Layout, LayoutMismatchError, NoRandomizer,
    SweepOrderRandomizer, cntk_corpus_dir, densify_sparse, epoch_minibatches, epoch_schedule, format_value, minibatch_lines,
    pack_layout, run_reader_test, shared_dir, token_mismatch, tokens,
)

# ---------------------------------------------------------------------------------------------
# pack_layout


def test_layout_first_fit_fills_rows_in_delivery_order():
    lay = pack_layout([3, 1, 2])
    # T=3; seq0 -> row0 [0,3); seq1 does not fit row0 -> row1 [0,1); seq2 fits after it -> row1 [1,3)
    assert (lay.num_rows, lay.num_steps) == (2, 3)
    assert lay.placements == ((0, 0), (1, 0), (1, 1))


def test_layout_columns_are_time_major_and_skip_gaps():
    lay = pack_layout([3, 1, 1])
    # rows: row0 = seq0 t0..2; row1 = seq1 t0, seq2 t1, gap at t2
    assert lay.columns() == [(0, 0), (1, 0), (0, 1), (2, 0), (0, 2)]


def test_layout_frame_mode_is_one_step_per_sequence():
    lay = pack_layout([1, 1, 1, 1])
    assert (lay.num_rows, lay.num_steps) == (4, 1)
    assert lay.columns() == [(0, 0), (1, 0), (2, 0), (3, 0)]


def test_layout_of_equal_sequences_is_rows_by_steps():
    lay = pack_layout([2, 2, 2])
    assert (lay.num_rows, lay.num_steps) == (3, 2)
    assert lay.columns() == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]


def test_layout_short_sequence_goes_to_first_row_with_room():
    # seq lengths [2,2,1] (empty_samples labels): third seq opens a third row, 5 columns
    lay = pack_layout([2, 2, 1])
    assert (lay.num_rows, lay.num_steps) == (3, 2)
    assert len(lay.columns()) == 5
    # [4,1,3,2,2]: T=4; 1 -> row1; 3 -> row1 after it; 2 -> row2; 2 -> row2
    lay = pack_layout([4, 1, 3, 2, 2])
    assert lay.placements == ((0, 0), (1, 0), (1, 1), (2, 0), (2, 2))


def test_layout_zero_length_sequence_contributes_no_column():
    lay = pack_layout([2, 0, 1])
    assert lay.placements[1] == (0, 2)
    assert sorted(k for k, _ in lay.columns()) == [0, 0, 2]


def test_layouts_compare_by_value():
    assert pack_layout([1, 2]) == pack_layout([1, 2])
    assert pack_layout([1, 2]) != pack_layout([2, 1])
    assert isinstance(pack_layout([]), Layout) and pack_layout([]).columns() == []


# ---------------------------------------------------------------------------------------------
# NoRandomizer and the shim


def test_one_sample_sequences_epochs_read_consecutive_samples():
    sched = epoch_schedule([1] * 10000, epoch_size=1000, mb_size=250, num_epochs=10)
    for e, batches in enumerate(sched):
        assert [len(b) for b in batches] == [250] * 4
        assert batches[0][0] == 1000 * e and batches[-1][-1] == 1000 * e + 999


def test_single_sequence_repeats_over_sweeps():
    # case 5: one 1-sample sequence, epochSize 2, mb 1, 3 epochs -> 6 minibatches of it
    assert epoch_schedule([1], 2, 1, 3) == [[[0], [0]]] * 3


def test_minibatch_is_capped_to_the_sweep():
    # no crossing of the sweep boundary: mb 3 on a 2-sample sweep
    assert epoch_schedule([1, 1], 3, 3, 1) == [[[0, 1], [0]]]


def test_minibatch_is_capped_to_the_epoch():
    # epoch 0 = [0, 3): the second request is min(3, 3-2) = 1 sample
    assert epoch_schedule([1, 1, 1, 1, 1], 3, 2, 2) == [[[0, 1], [2]], [[3, 4], [0]]]


def test_first_sequence_is_always_taken_later_ones_only_if_they_fit():
    assert epoch_schedule([5, 1], 6, 2, 1) == [[[0], [1]]]
    assert epoch_schedule([1, 2, 1], 4, 2, 1) == [[[0], [1], [2]]]
    assert epoch_schedule([1, 1, 2], 4, 3, 1) == [[[0, 1], [2]]]


def test_epoch_start_moves_forward_to_a_sequence_boundary():
    # epoch 1 starts at 4, inside seq 1 [3,6): first boundary at or after it is 6 (seq 2)
    r = NoRandomizer([3, 3, 3])
    r.start_epoch(4, 1)
    assert (r.position, r.seq) == (6, 2)
    # epoch end 8: the first sequence is taken although it ends at 9
    assert r.next_minibatch(10) == ([2], True)


def test_epoch_start_inside_last_sequence_moves_to_next_sweep():
    r = NoRandomizer([2, 2])
    r.start_epoch(3, 1)
    assert (r.position, r.seq) == (4, 0)
    assert list(epoch_minibatches(r, 10)) == [[0]]


def test_epoch_start_in_a_later_sweep():
    r = NoRandomizer([1, 2, 3])
    r.start_epoch(7, 1)  # position 7 = sweep 1, offset 1 = start of seq 1
    assert (r.position, r.seq) == (7, 1)


def test_at_most_ten_minibatches_are_written_per_epoch():
    sched = epoch_schedule([1] * 100, 100, 1, 2)
    assert [len(e) for e in sched] == [10, 10]
    assert sched[1][0] == [0]  # epoch 1 starts at sample 100 = sweep 1


def test_shim_stops_after_the_minibatch_flagged_end_of_epoch():
    r = NoRandomizer([1, 1, 1])
    r.start_epoch(2, 0)
    assert list(epoch_minibatches(r, 5)) == [[0, 1]]
    assert r.next_minibatch(5) == ([], True)


def test_multi_worker_can_get_an_empty_non_final_minibatch():
    r = NoRandomizer([1, 1, 1, 1], workers=2, rank=1)
    r.start_epoch(4, 0)
    assert r.next_minibatch(1) == ([], False)      # seq 0 belongs to rank 0: quirk of 5.1
    assert r.next_minibatch(1) == ([1], False)


def test_zero_samples_is_an_error():
    with pytest.raises(ValueError, match="number of successfully read samples was 0"):
        NoRandomizer([0, 0])


# ---------------------------------------------------------------------------------------------
# SweepOrderRandomizer: the old-path BlockRandomizer bookkeeping over given sweep orders


def test_identity_sweep_order_gives_the_no_randomizer_schedule():
    lengths = [1, 3, 2, 2, 1, 4]
    ident = lambda k: range(len(lengths))  # noqa: E731
    for epoch_size, mb, epochs in [(5, 3, 4), (7, 2, 3), (13, 13, 2), (3, 10, 5)]:
        assert (epoch_schedule(lengths, epoch_size, mb, epochs, sweep_order=ident)
                == epoch_schedule(lengths, epoch_size, mb, epochs))


def test_each_sweep_is_read_in_its_own_order_and_not_crossed():
    orders = {0: [2, 0, 1], 1: [1, 2, 0], 2: [0, 1, 2]}
    # 1-sample sequences, sweep 3; epoch 4, mb 2: [2 0] [1] | sweep 1: [1 2] [0] ... capped at the sweep end
    sched = epoch_schedule([1, 1, 1], 4, 2, 2, sweep_order=orders.__getitem__)
    assert sched == [[[2, 0], [1], [1]], [[2, 0], [0, 1]]]


def test_epoch_start_moves_to_a_boundary_of_the_sweeps_order():
    # lengths [3, 1, 2]; sweep 0 order [2, 1, 0]: offsets 0 (seq 2), 2 (seq 1), 3 (seq 0)
    r = SweepOrderRandomizer([3, 1, 2], lambda k: [2, 1, 0])
    r.start_epoch(2, 1)  # position 2 is the boundary of seq 1; epoch [2, 4)
    assert (r.position, r.cursor) == (2, 1)
    assert r.next_minibatch(5) == ([1], False)  # seq 0 (3 samples) does not fit the 2 left
    assert r.next_minibatch(5) == ([0], True)   # first sequence of a request: taken, ends at 6 > 4
    r.start_epoch(1, 1)  # position 1 is inside seq 2 [0,2): moved to 2, which is already the epoch end
    assert (r.position, r.cursor) == (2, 1)
    assert r.next_minibatch(5) == ([], True)
    r.start_epoch(4, 1)  # position 4 is inside seq 0 [3,6), the last one: moved to the next sweep
    assert (r.position, r.cursor) == (6, 3)
    assert r.next_minibatch(1) == ([2], True)  # sweep 1 starts with its order's first sequence (2 samples)


def test_sweep_order_must_be_a_permutation():
    with pytest.raises(ValueError, match="not a permutation"):
        SweepOrderRandomizer([1, 1], lambda k: [0, 0]).start_epoch(1, 0)


def test_run_reader_test_uses_the_sweep_order():
    src = InMemorySource.from_sequences([{"x": [1]}, {"x": [2]}, {"x": [3]}])
    out = run_reader_test(src, ["x"], epoch_size=4, mb_size=2, num_epochs=1,
                          sweep_order=lambda k: [[2, 1, 0], [0, 2, 1]][k])
    assert out == "3\n2\n1\n1\n"  # [3 2] [1] (sweep end) [1] (sweep 1, epoch end)


# ---------------------------------------------------------------------------------------------
# writer


@pytest.mark.parametrize("value, text", [
    (-0.138918023895589, "-0.138918"), (1e-05, "1e-05"), (-6.4265e+20, "-6.4265e+20"),
    (-1.07905e+08, "-1.07905e+08"), (0.0, "0"), (-0.0, "-0"), (np.float32(0.1), "0.1"),
    (np.float32(-1.15459e-09), "-1.15459e-09"), (123456789.0, "1.23457e+08"), (100000.0, "100000"),
    (1e6, "1e+06"), (0.0001, "0.0001"),
])
def test_values_print_like_cpp_ostream(value, text):
    assert format_value(value) == text


def test_sparse_densify_keeps_last_duplicate():
    out = densify_sparse(np.array([1.0, 2.0, 3.0, 4.0]), np.array([2, 0, 2, 1]), np.array([0, 3, 4]), 3)
    assert out.tolist() == [[2.0, 0.0, 3.0], [0.0, 4.0, 0.0]]
    assert densify_sparse(np.zeros(0), np.zeros(0, int), np.array([0, 0]), 2).tolist() == [[0, 0]]


def _two_stream_source():
    return InMemorySource.from_sequences([
        {"f": [[1, 2], [3, 4]], "l": [[9]]},
        {"f": [[5, 6]], "l": [[8], [7]]},
    ])


def test_shared_layout_requires_identical_layouts():
    src = _two_stream_source()
    with pytest.raises(LayoutMismatchError):
        minibatch_lines(src, [0, 1], ["f", "l"], shared_layout=True)


def test_separate_layouts_write_each_stream_time_major():
    src = _two_stream_source()
    lines = minibatch_lines(src, [0, 1], ["f", "l"], shared_layout=False)
    # f: lengths [2,1] -> P=2,T=2: (s0,t0) (s1,t0) (s0,t1);  l: lengths [1,2] -> row0 seq0, row1 seq1
    assert lines == ["1 2", "5 6", "3 4", "9", "8", "7"]


def test_run_reader_test_writes_epochs_back_to_back():
    src = InMemorySource.from_sequences([{"x": [1]}, {"x": [2]}, {"x": [3]}])
    assert run_reader_test(src, ["x"], epoch_size=2, mb_size=1, num_epochs=2) == "1\n2\n3\n1\n"


def test_lengths_follow_the_defining_stream():
    src = InMemorySource.from_sequences([{"a": [1, 2, 3], "b": [4]}], defines_mb_size="b")
    assert src.lengths == [1]
    assert InMemorySource.from_sequences([{"a": [1, 2, 3], "b": [4]}]).lengths == [3]


def test_token_comparison_ignores_whitespace_only():
    assert tokens("1 2\n3\n") == tokens("1\n2 3")
    assert token_mismatch(["1", "2"], ["1", "2"]) is None
    msg = token_mismatch(["1", "2", "4"], ["1", "2", "3"])
    assert "first difference at token 2" in msg
    assert "3 tokens written, control has 2" in token_mismatch(["1", "2", "3"], ["1", "2"])


def test_shared_dir_honours_env_override(monkeypatch, tmp_path):
    monkeypatch.setenv("RECORDKIT_SHARED", str(tmp_path))
    assert shared_dir() == tmp_path.resolve()
    assert cntk_corpus_dir() == tmp_path.resolve() / "conformance" / "cntk"
    monkeypatch.delenv("RECORDKIT_SHARED")
    assert shared_dir().name == "shared"


def test_case_table_is_consistent():
    ids = [c.id for c in C.CASES]
    assert len(ids) == len(set(ids))
    for c in C.CASES:
        assert c.kind in ("control", "special", "pending")
        if c.kind == "pending":
            assert c.pending
        if c.kind == "control":
            assert c.section is not None and c.control and c.written
            assert c.epoch_size > 0 and c.mb_size > 0 and c.epochs > 0
            names = [s.name for s in c.section.streams]
            assert set(c.written) <= set(names)
            if "defMBSize" in c.variants:
                assert sum(s.mb for s in c.section.streams) == 1
            if c.section.randomize:
                # single sequence in a single chunk (order fixed), or the BlockRandomizer's order
                assert (c.section.expected_chunks == 1 and "one sequence" in c.note) or "BlockRandomizer" in c.note
        if c.kind == "special" and c.compare_section is not None:
            assert c.section.composite and c.compare_section.composite


# ---------------------------------------------------------------------------------------------
# End to end against real controls, with a naive reference parser (well-formed files only)


def reference_parse(path, section: C.Section, variant: str) -> InMemorySource:
    """A deliberately simple CTF reader for the well-formed corpus files.

    Id mode if the first line starts with a digit (unless skipSequenceIds); a line
    without a leading id continues the current sequence. Samples split on '|'; '#'
    pieces are comments; unknown names are ignored; short dense samples are zero-padded.
    """
    dtype = np.float32 if section.precision == "float" else np.float64
    by_alias = {s.alias: s for s in section.streams}
    text = path.read_bytes().decode("utf-8-sig")
    lines = [ln for ln in text.split("\n") if ln.strip()]
    id_mode = not section.skip_sequence_ids and bool(re.match(r"\d", lines[0]))
    seqs, cur_id = [], None
    for ln in lines:
        m = re.match(r"\d+", ln)
        ident = m.group(0) if m else None
        body = ln[m.end():] if m else ln
        if not id_mode or not seqs or (ident is not None and ident != cur_id):
            seqs.append({s.name: [] for s in section.streams})
            cur_id = ident
        for piece in body.split("|")[1:]:
            if piece.startswith("#"):
                continue
            name, _, rest = (piece.replace("\t", " ") + " ").partition(" ")
            spec = by_alias.get(name)
            if spec is None:
                continue
            row = np.zeros(spec.dim, dtype=dtype)
            if spec.format == "dense":
                vals = [float(v) for v in rest.split()]
                row[:len(vals)] = vals
            else:
                for pair in rest.split():
                    i, _, v = pair.partition(":")
                    row[int(i)] = float(v)
            seqs[-1][spec.name].append(row)
    data = [{k: np.array(v, dtype=dtype).reshape(len(v), by_alias[a].dim)
             for (a, k), v in zip(((s.alias, s.name) for s in section.streams), seq.values())} for seq in seqs]
    mb = [s.name for s in section.streams if s.mb and variant == "defMBSize"]
    lengths = [d[mb[0]].shape[0] if mb else max(a.shape[0] for a in d.values()) for d in data]
    return InMemorySource(lengths, data)


# File order throughout (no recordkit here, so no BlockRandomizer order): valid for the randomized
# controls too, because 7, 8, 10 and 11 consist of identical sequences and 23b's sweep-0 order
# (seed 0) is file order (test_cntk_ctf_conformance checks both facts).
REFERENCE_CASES = [pytest.param(c, v, id=f"{c.pytest_id}[{v}]")
                   for c in C.control_cases() if c.expected_tokens is None for v in c.variants]


@pytest.mark.parametrize("case, variant", REFERENCE_CASES)
def test_harness_reproduces_control_from_reference_parse(case, variant):
    corpus = cntk_corpus_dir()
    if not corpus.is_dir():
        pytest.skip(f"CNTK conformance corpus not found at {corpus} (set RECORDKIT_SHARED)")
    src = reference_parse(corpus / CTF_DATA_DIR / case.section.data, case.section, variant)
    out = run_reader_test(src, case.written, case.epoch_size, case.mb_size, case.epochs, case.shared_layout)
    control = (corpus / CTF_CONTROL_DIR / case.control).read_text()
    problem = token_mismatch(tokens(out), tokens(control))
    assert problem is None, problem
