"""The order-mixing metrics (engine.shuffle_quality) and ``recordkit read --report``."""
import json

import numpy as np
import pytest

from helpers import write
from recordkit.cli.main import main
from recordkit.engine.deserializer import ChunkInfo
from recordkit.engine.randomizer import SweepOrder
from recordkit.engine.shuffle_quality import (buffer_shuffle_order, correlation, displacement, file_positions,
                                              same_chunk, uniform_chunks, window_report)


def test_identity_order_has_no_displacement_and_correlation_one():
    n = 1000
    assert displacement(np.arange(n)) == 0.0
    assert correlation(np.arange(n)) == pytest.approx(1.0)


def test_reversed_order_has_displacement_one_half_and_correlation_minus_one():
    n = 1000
    assert displacement(np.arange(n)[::-1]) == pytest.approx(0.5, abs=1e-3)
    assert correlation(np.arange(n)[::-1]) == pytest.approx(-1.0)


def test_uniform_permutation_is_displaced_one_third_and_uncorrelated():
    rng = np.random.default_rng(7)
    orders = [rng.permutation(20000) for _ in range(5)]
    assert np.mean([displacement(o) for o in orders]) == pytest.approx(1 / 3, abs=0.01)
    assert abs(np.mean([correlation(o) for o in orders])) < 0.02


def test_correlation_of_positions_is_spearman():
    rng = np.random.default_rng(1)
    o = rng.permutation(500)
    ranks_d = np.arange(500)
    # Spearman by its definition: 1 - 6 sum d^2 / (n (n^2 - 1)) for rank data without ties
    spearman = 1 - 6 * ((o - ranks_d) ** 2).sum() / (500 * (500 ** 2 - 1))
    assert correlation(o) == pytest.approx(spearman)


def test_file_positions_count_the_sequences_of_earlier_chunks_in_id_order():
    chunks = [ChunkInfo(1, 2, 2), ChunkInfo(0, 3, 3)]  # listed out of id order
    order = SweepOrder(np.array([1, 0, 1, 0, 0]), np.array([1, 2, 0, 0, 1]))
    assert file_positions(order, chunks).tolist() == [4, 2, 3, 0, 1]


def test_same_chunk_counts_consecutive_deliveries_from_one_chunk():
    assert same_chunk([0, 0, 1, 1, 0]) == pytest.approx(0.5)


def test_buffer_shuffle_delivers_every_sequence_once():
    chunks = uniform_chunks(10, 30)
    o = buffer_shuffle_order(chunks, 45, seed=3)
    assert sorted(o.tolist()) == list(range(300))


def test_window_report_small_windows_keep_chunks_together_whole_window_does_not():
    rep = window_report(uniform_chunks(64, 100), seed=0, chosen=4)
    rows = {r["window"]: r for r in rep["windows"]}
    assert list(rows) == [1, 4, 16, None]  # 64 chunks of 64: the whole data set
    assert rows[4]["chosen"] and sum(r["chosen"] for r in rep["windows"]) == 1
    assert rows[1]["same_chunk"] > 0.9
    assert rows[None]["same_chunk"] < 3 * rep["uniform_same_chunk"]
    assert rows[1]["same_chunk"] > rows[4]["same_chunk"] > rows[16]["same_chunk"] > rows[None]["same_chunk"]
    assert rows[None]["displacement"] == pytest.approx(1 / 3, abs=0.02)


def test_window_report_without_randomization_reports_file_order():
    rep = window_report(uniform_chunks(8, 10), randomize=False)
    first = rep["windows"][0]
    assert first["window_unit"] == "file order" and first["chosen"]
    assert first["displacement"] == 0.0 and first["correlation"] == 1.0
    # windows of 16 and 64 chunks cover all 8: one row, the whole data set's
    assert [r["window"] for r in rep["windows"][1:]] == [1, 4, None]


CTF = "".join(f"{i} |x {i}\n" for i in range(2000))


def run_report(tmp_path, capsys, *extra):
    p = write(tmp_path, CTF)
    code = main(["read", str(p), "--stream", "x=dense:1", "--mb-size", "64", "--chunk-size", "1KB",
                 "--max-memory", "none", "--report", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_read_randomize_report_prints_a_row_per_window(tmp_path, capsys):
    out = run_report(tmp_path, capsys, "--randomize", "--window", "4")
    assert "2000 sequences in " in out and "shuffle quality of sweep 0 (seed 0)" in out
    lines = out.splitlines()
    chosen = [line for line in lines if line.endswith("<- this read")]
    assert len(chosen) == 1 and chosen[0].split()[:2] == ["4", "chunks"]
    assert any(line.split()[:3] == ["whole", "data", "set"] for line in lines)
    assert any(line.split()[:2] == ["1", "chunks"] for line in lines)


def test_read_report_json_includes_the_shuffle_quality(tmp_path, capsys):
    out = run_report(tmp_path, capsys, "--randomize", "--window", "4", "--json")
    rep = json.loads(out)["shuffle_quality"]
    assert rep["sequences"] == 2000 and rep["randomize"]
    assert rep["order"]["window"] == 4 and rep["order"]["window_unit"] == "chunks"
    assert 0.25 < rep["order"]["displacement"] < 0.4


def test_read_report_without_randomize_is_file_order(tmp_path, capsys):
    out = run_report(tmp_path, capsys, "--json")
    rep = json.loads(out)["shuffle_quality"]
    assert not rep["randomize"]
    assert rep["order"] == {"window": None, "window_unit": "file order", "displacement": 0.0,
                            "correlation": 1.0, "same_chunk": rep["order"]["same_chunk"]}
    assert rep["order"]["same_chunk"] > 0.9


def test_read_report_with_a_window_in_samples_lists_it_first(tmp_path, capsys):
    out = run_report(tmp_path, capsys, "--randomize", "--window-samples", "300", "--json")
    rep = json.loads(out)["shuffle_quality"]
    first = rep["windows"][0]
    assert first["chosen"] and first["window"] == 300 and first["window_unit"] == "samples"
    assert [r["window_unit"] for r in rep["windows"][1:]] == ["chunks"] * (len(rep["windows"]) - 1)


def test_window_report_chosen_row_measures_the_order_given():
    chunks = uniform_chunks(8, 10)
    reversed_order = SweepOrder(np.repeat(np.arange(8)[::-1], 10), np.tile(np.arange(10)[::-1], 8))
    rep = window_report(chunks, chosen=4, order=reversed_order)
    assert rep["order"]["correlation"] == pytest.approx(-1.0)
