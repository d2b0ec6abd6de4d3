"""Bad input: located errors (file:line:column), the maxErrors budget, what gets dropped."""
import pytest

from helpers import dense, read_all, sparse, write
from recordkit import FormatError
from recordkit.errors import ErrorBudgetExceeded
from recordkit.formats.ctf import CTFReader


def fails(tmp_path, text, streams, **kw):
    p = write(tmp_path, text)
    with pytest.raises(FormatError) as e:
        read_all(p, streams, **kw)
    return e.value


@pytest.mark.parametrize("text,line,col,what", [
    ("|a 1\n|a 2,0\n", 2, 5, "unexpected ',' after a number"),
    ("|a 1\n|a x\n", 2, 4, "expected a number, found 'x'"),
    ("|a .5\n", 1, 4, "expected a number, found '.'"),
    ("|a inf\n", 1, 4, "expected a number, found 'i'"),
    ("|a -\n", 1, 5, "expected a digit after the sign, found end of line"),
    ("|a 1e\n", 1, 6, "expected exponent digits"),
    ("|a 1e+\n", 1, 7, "expected exponent digits"),
    ("|a 1.e5\n", 1, 6, "unexpected 'e' after a number"),
    ("|a 2.0f\n", 1, 7, "unexpected 'f' after a number"),
    ("|a 2#0\n", 1, 5, "unexpected '#' after a number"),
    ("|a 1 2 3\n", 1, 8, "too many values for dense input 'a'"),
    ("|a 1 |a 2\n", 1, 6, "input 'a' appears twice on one line"),
])
def test_malformed_dense_values_name_file_line_and_column(tmp_path, text, line, col, what):
    err = fails(tmp_path, text, [dense("a", 2)])
    assert (err.line, err.column) == (line, col)
    assert what in str(err)
    assert str(err).startswith(str(tmp_path / "data.ctf") + f":{line}:{col}: ")


@pytest.mark.parametrize("text,col,what", [
    ("|s 10:1\n", 4, "sparse index 10 in input 's' is out of range: expected 0 <= index < dim 10"),
    ("|s -2:1\n", 4, "expected INDEX:VALUE"),
    ("|s 2 \n", 5, "expected ':' after index 2, found ' '"),
    ("|s 2::2\n", 6, "expected a number, found ':'"),
    ("|s 2.0:2.0\n", 5, "expected ':' after index 2, found '.'"),
    ("|s 1:2:3\n", 7, "unexpected ':' after a number"),
    ("|s 99999999999999999999999:1\n", 4, "does not fit in 64 bits"),
])
def test_malformed_sparse_values(tmp_path, text, col, what):
    err = fails(tmp_path, text, [sparse("s", 10)])
    assert (err.line, err.column) == (1, col) and what in str(err)


@pytest.mark.parametrize("tail", ["", "\t", " ", "     "])
def test_input_name_without_values_at_end_of_file_is_an_error(tmp_path, tail):
    err = fails(tmp_path, "|A 1\n|A" + tail, [dense("A", 1)])
    assert "has no values" in str(err) and err.line == 2


@pytest.mark.parametrize("tail", [" -", " +", " 12.+", " 12.+e", " 1:"])
def test_cut_off_numbers_at_end_of_file_are_errors(tmp_path, tail):
    fails(tmp_path, "|A" + tail, [dense("A", 1)])


def test_stray_text_and_nameless_bar_are_errors(tmp_path):
    err = fails(tmp_path, "|a 1\noops |a 2\n", [dense("a", 1)])
    assert "unexpected 'o': expected '|' followed by an input name" in str(err) and (err.line, err.column) == (2, 1)
    err = fails(tmp_path, "|a 1 oops |b 2\n", [dense("a", 1), dense("b", 1)])
    assert "malformed value in input 'a': expected a number, found 'o'" in str(err) and err.column == 6
    err = fails(tmp_path, "|a 1 | 3\n", [dense("a", 1)])
    assert "'|' is followed by ' ': expected an input name" in str(err)


def test_sequence_id_reused_non_consecutively_is_an_error(tmp_path):
    err = fails(tmp_path, "100 |a 1\n200 |a 2\n100 |a 3\n", [dense("a", 1)])
    assert (err.line, err.column) == (3, 1)
    assert "sequence id 100 was already used by the sequence starting on line 1" in str(err)


def test_sequence_id_overflow_is_an_error(tmp_path):
    err = fails(tmp_path, "18446744073709551616 |a 1\n", [dense("a", 1)])
    assert "does not fit in 64 bits" in str(err) and err.line == 1


def test_error_budget_drops_bad_sequences_and_keeps_reading(tmp_path):
    text = "1 |a 1 |b 1\n1 |a 2 |b 2\n2 |a x |b 3\n2 |a 4 |b 4\n3 |a 5 |b 5\n4 |a 6 |b 99\n5 |a 7 |b 7\n"
    p = write(tmp_path, text)
    seqs, reader, warns = read_all(p, [dense("a", 1), dense("b", 1)], max_errors=2)
    # sequence 2 (bad value) and 4 (too many values? no: b has dim 1, 99 is one value) ...
    assert [k for k, _ in seqs] == [1, 3, 4, 5]
    assert reader.errors_counted == 1
    assert any(":3:6: malformed value in input 'a'" in w and "sequence 2 skipped" in w for w in warns)
    # features and labels of a kept sequence stay paired
    assert dict(seqs)[1]["a"].ravel().tolist() == dict(seqs)[1]["b"].ravel().tolist() == [1, 2]


def test_the_error_after_the_budget_fails_and_counts(tmp_path):
    text = "|a x\n|a 1\n|a y\n|a 2\n|a z\n"
    p = write(tmp_path, text)
    seqs, reader, warns = read_all(p, [dense("a", 1)], max_errors=3)
    assert [k for k, _ in seqs] == [1, 3] and reader.errors_counted == 3 and len(warns) == 3
    with pytest.raises(ErrorBudgetExceeded) as e:
        read_all(p, [dense("a", 1)], max_errors=2)
    assert e.value.line == 5 and e.value.errors_seen == 3 and "maxErrors=2" in str(e.value)


def test_stray_sample_is_skipped_alone_under_a_budget(tmp_path):
    p = write(tmp_path, "|a 1 | 5 |b 2\n")
    seqs, reader, _ = read_all(p, [dense("a", 1), dense("b", 1)], max_errors=1)
    assert seqs[0][1]["a"].tolist() == [[1]] and seqs[0][1]["b"].tolist() == [[2]]
    assert reader.errors_counted == 1


def test_duplicate_id_under_budget_skips_the_repeated_sequence(tmp_path):
    p = write(tmp_path, "1 |a 1\n2 |a 2\n1 |a 3\n1 |a 4\n3 |a 5\n")
    seqs, reader, _ = read_all(p, [dense("a", 1)], max_errors=1)
    assert [k for k, _ in seqs] == [1, 2, 3] and dict(seqs)[1].get("a").ravel().tolist() == [1]


def test_id_alone_on_a_line_is_an_error(tmp_path):
    err = fails(tmp_path, "1 |a 1\n1\n", [dense("a", 1)])
    assert err.line == 2 and "sequence id with no samples" in str(err)


def test_errors_are_counted_once_even_when_a_chunk_is_read_again(tmp_path):
    p = write(tmp_path, "|a 1\n|a x\n|a 2\n")
    r = CTFReader(p, [dense("a", 1)], max_errors=1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = r.load_chunk(0)
        second = r.load_chunk(0)
    assert r.errors_counted == 1 and first.keys.tolist() == second.keys.tolist() == [0, 2]


def test_bad_stream_declarations_are_rejected():
    from recordkit import StreamSpec
    with pytest.raises(ValueError, match="format must be"):
        StreamSpec("a", "dens", 3)
    with pytest.raises(ValueError, match="positive"):
        StreamSpec("a", "dense", 0)
    with pytest.raises(ValueError, match="exceeds 2147483647"):
        StreamSpec("a", "sparse", 2**31)
    with pytest.raises(ValueError, match="already mapped"):
        from recordkit.engine.streams import check_streams
        check_streams([StreamSpec("a", "dense", 1, "x"), StreamSpec("b", "dense", 1, "x")])
    with pytest.raises(ValueError, match="NAME=FORMAT:DIM"):
        StreamSpec.parse("features:dense:3")


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        CTFReader(tmp_path / "nope.ctf", [dense("a", 1)])


@pytest.mark.parametrize("text", ["", "\n\n", "|# only a comment\n"])
def test_a_file_without_sequences_is_an_error_at_its_start(tmp_path, text):
    e = fails(tmp_path, text, [dense("a", 1)])
    assert (e.line, e.column) == (1, 1) and "input file is empty" in str(e)
    assert str(e).startswith(f"{e.path}:1:1:")


def test_errors_past_the_recording_cap_point_at_their_piece(tmp_path):
    """A parsed piece of a chunk records the details of its first 256 errors; the rest are still
    counted, and located at the first line of the piece they came from."""
    lines = ["|a 1"] * 10 + ["|a x"] * 3000
    p = write(tmp_path, "\n".join(lines) + "\n")
    seqs, reader, warns = read_all(p, [dense("a", 1)], max_errors=5000)
    assert len(seqs) == 10 and reader.errors_counted == 3000 and len(warns) == 3000
    further = [w for w in warns if "details not recorded" in w]
    assert further, "expected errors beyond the recording cap"
    assert all(w.split(":")[2] == "1" and " further errors in chunk 0 at or after this line" in w
               for w in further), further[0]
    assert all(1 <= int(w.split(":")[1]) <= 3010 for w in further)
    with pytest.raises(ErrorBudgetExceeded) as e:
        read_all(p, [dense("a", 1)], max_errors=2990)
    assert e.value.line is not None and e.value.column == 1


def test_sequence_id_errors_past_the_recording_cap_are_located_after_the_last_recorded_one(tmp_path):
    import warnings as _w
    from recordkit.formats.ctf import CTFReader as _Reader
    p = tmp_path / "dups.ctf"
    # ids 0..399, then every id again: 400 non-adjacent duplicates, more than the index records
    p.write_text("".join(f"{k} |x 1\n" for k in range(400)) * 2)
    with _w.catch_warnings(record=True) as caught:
        _w.simplefilter("always")
        r = _Reader(p, [dense("x", 1)], max_errors=1000)
    messages = [str(w.message) for w in caught]
    further = [m for m in messages if "further sequence id errors after this line" in m]
    assert further and r.errors_counted == 400
    last_line = max(int(m.split(":")[1]) for m in messages if "further" not in m and m.startswith(str(p)))
    assert all(m.startswith(f"{p}:{last_line}:1: further sequence id errors") for m in further)


def test_an_error_inside_iter_chunks_shuts_its_parse_threads_down_at_once(tmp_path):
    """Not whenever the garbage collector gets to them: a pool shut down from inside the GC can
    deadlock with a thread that is starting (seen once in CI after an error in a chunk)."""
    import gc
    import threading
    from recordkit.formats.ctf import CTFReader as _Reader
    p = tmp_path / "late_error.ctf"
    p.write_text("".join(f"{k} |x {k}\n" for k in range(2000)) + "2000 |x oops\n")
    reader = _Reader(p, [dense("x", 1)], chunk_size=1000)
    kept = None
    gc.disable()
    try:
        try:
            list(reader.iter_chunks(threads=2, prefetch=2))
        except FormatError as e:
            kept = e  # held (with its traceback), as a caller reporting it would
        alive = [t.name for t in threading.enumerate() if t.name.startswith("recordkit-ctf")]
    finally:
        gc.enable()
    assert isinstance(kept, FormatError) and "2001:9" in str(kept)
    assert alive == []


def test_the_kernels_event_codes_are_the_ones_messages_py_words():
    """events.pxi is the one place the compiled parser's codes are written: messages.py has every one,
    with the same value, and words for each error (not the fallback "error code N")."""
    import re
    from pathlib import Path

    from recordkit.formats.ctf import messages as msg
    pxi = Path(msg.__file__).with_name("events.pxi").read_text()
    codes = {name: int(value) for name, value in re.findall(r"^DEF ([EW]_[A-Z_]+) = (\d+)", pxi, re.M)}
    assert len(codes) >= 15
    for name, value in codes.items():
        assert getattr(msg, name) == value, name
    defined = {n: v for n, v in vars(msg).items() if re.fullmatch(r"[EW]_[A-Z_]+", n)}
    assert defined == codes
    for name, value in codes.items():  # the warnings' words are the reader's (they carry counts)
        if name.startswith("E_"):
            assert not msg.error_message(value, "x", 65, 3).startswith("error code"), name
