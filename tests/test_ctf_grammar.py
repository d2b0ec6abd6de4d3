"""The CTF grammar: samples, comments, delimiters, line ends, ids and modes."""
import numpy as np
import pytest

from helpers import dense, read_all, sparse, write


def test_seed_simple_example_with_comments_and_escaped_pipe(tmp_path):
    text = ("|B 100:3 123:4 |C 8 |A 0 1 2 3 4 |# a CTF comment\n"
            "|# another comment |A 0 1.1 22 0.3 54 |C 123917 |B 1134:1.911 13331:0.014\n"
            "|C -0.001 |# a comment with an escaped pipe: '|#' |A 3.9 1.11 121.2 99.13 0.04 |B 999:0.001 918918:-9.19\n")
    p = write(tmp_path, text)
    seqs, _, warns = read_all(p, [dense("A", 5), sparse("B", 1000000), dense("C", 1)])
    assert [k for k, _ in seqs] == [0, 1, 2]  # line mode: 0-based line numbers
    np.testing.assert_array_equal(seqs[2][1]["A"], np.array([[3.9, 1.11, 121.2, 99.13, 0.04]], dtype=np.float32))
    b = seqs[1][1]["B"]
    assert b.indices.tolist() == [1134, 13331]
    assert b.data.tolist() == pytest.approx([1.911, 0.014])
    assert seqs[2][1]["C"][0, 0] == np.float32(-0.001)
    assert warns == []


def test_seed_extended_example_sequences_and_aliases(tmp_path):
    text = ("100 |a 1 2 3 |b 100 200\n100 |a 4 5 6 |b 101 201\n100 |b 102983 14532 |a 7 8 9\n100 |a 7 8 9\n"
            "200 |b 300 400 |a 10 20 30\n333 |b 500 100\n333 |b 600 -900\n400 |a 1 2 3 |b 100 200\n"
            "|a 4 5 6 |b 101 201\n|a 4 5 6 |b 101 201\n500 |a 1 2 3 |b 100 200\n")
    p = write(tmp_path, text)
    streams = [dense("Some_very_long_input_name", 3, "a"), dense("Some_other_also_very_long_input_name", 2, "b")]
    seqs, _, _ = read_all(p, streams, precision="double")
    assert [k for k, _ in seqs] == [100, 200, 333, 400, 500]
    a = {k: d["Some_very_long_input_name"] for k, d in seqs}
    assert a[100].shape == (4, 3) and a[400].shape == (3, 3)
    # sequence 333 has no 'a' samples: read with that stream empty (CNTK 2.7 would bail out)
    assert a[333].shape == (0, 3)
    assert seqs[2][1]["Some_other_also_very_long_input_name"].tolist() == [[500, 100], [600, -900]]


def test_first_line_without_id_makes_every_line_a_sequence(tmp_path):
    p = write(tmp_path, "|a 1 2 3 |b 100 200\n100 |a 4 5 6 |b 101 201\n200 |b 102983 14532 |a 7 8 9\n")
    seqs, _, _ = read_all(p, [dense("a", 3), dense("b", 2)])
    assert [k for k, _ in seqs] == [0, 1, 2]
    assert all(d["a"].shape == (1, 3) for _, d in seqs)


def test_skip_sequence_ids_forces_line_mode(tmp_path):
    p = write(tmp_path, "7 |a 1\n7 |a 2\n8 |a 3\n")
    seqs, _, _ = read_all(p, [dense("a", 1)], skip_sequence_ids=True)
    assert [k for k, _ in seqs] == [0, 1, 2]
    seqs, _, _ = read_all(p, [dense("a", 1)])
    assert [k for k, _ in seqs] == [7, 8]


def test_crlf_tabs_and_missing_final_newline(tmp_path):
    p = write(tmp_path, "1\t|a\t1\t2\r\n1 |a 3  4\r\n2|a 5 6")
    seqs, _, warns = read_all(p, [dense("a", 2)])
    assert [k for k, _ in seqs] == [1, 2]
    assert seqs[0][1]["a"].tolist() == [[1, 2], [3, 4]]
    assert seqs[1][1]["a"].tolist() == [[5, 6]]
    assert warns == []


def test_blank_and_comment_only_lines_are_ignored(tmp_path):
    p = write(tmp_path, "\n\n1 |a 1\n   \n\t\r\n1 |a 2\n|# just a comment\n2 |a 3\n\n")
    seqs, reader, warns = read_all(p, [dense("a", 1)])
    assert [(k, d["a"].ravel().tolist()) for k, d in seqs] == [(1, [1, 2]), (2, [3])]
    assert reader.errors_counted == 0 and warns == []


def test_blank_lines_in_line_mode_are_not_sequences(tmp_path):
    p = write(tmp_path, "|a 1\n\n|a 2\n")
    seqs, _, _ = read_all(p, [dense("a", 1)])
    assert [k for k, _ in seqs] == [0, 2]  # keys are physical 0-based line numbers


def test_utf8_bom_is_skipped(tmp_path):
    p = write(tmp_path, b"\xef\xbb\xbf0 |a 1\n1 |a 2\n")
    seqs, _, _ = read_all(p, [dense("a", 1)])
    assert [k for k, _ in seqs] == [0, 1]


def test_large_sequence_ids_up_to_2_64_minus_1(tmp_path):
    p = write(tmp_path, "18446744073709551615 |a 1\n18446744073709551614 |a 2\n0 |a 3\n")
    seqs, _, _ = read_all(p, [dense("a", 1)])
    assert [k for k, _ in seqs] == [2**64 - 1, 2**64 - 2, 0]


@pytest.mark.parametrize("tail", ["\n", ""], ids=["newline", "at_end_of_file"])
def test_sequence_ids_of_every_width_index_exactly(tmp_path, tail):
    """Ids of 1 to 20 digits (leading zeros too), short lines, the last within 8 bytes of the end:
    the index scanner reads ids of up to 7 digits 8 bytes at a time and longer ones byte by byte."""
    import random
    rnd = random.Random(3)
    ids = sorted({rnd.randrange(10 ** (width - 1), 10 ** width) for width in range(1, 20) for _ in range(3)}
                 | {2**64 - 1} - {5})
    lines = [f"{'0' * (k % 2)}{k}|a 1" for k in ids]  # every other one with a leading zero, no space
    lines.append("5|a 2")  # a short last line
    p = write(tmp_path, "\n".join(lines) + tail)
    seqs, reader, _ = read_all(p, [dense("a", 1)])
    assert reader.errors_counted == 0
    assert [k for k, _ in seqs] == ids + [5]


def test_stream_with_no_samples_in_a_sequence_is_empty(tmp_path):
    p = write(tmp_path, "0 |word 3:1 |class 1:1\n0 |word 5:1\n1 |word 2:1\n")
    seqs, _, _ = read_all(p, [sparse("word", 10), sparse("class", 4)])
    assert seqs[0][1]["class"].shape == (1, 4)
    assert seqs[1][1]["class"].shape == (0, 4)
    assert seqs[1][1]["word"].toarray().tolist() == [[0, 0, 1, 0, 0, 0, 0, 0, 0, 0]]


def test_sparse_indices_keep_file_order_and_duplicates(tmp_path):
    p = write(tmp_path, "|x 5:1 2:2 5:3\n|x\n|x 0:0.5\n")
    seqs, _, _ = read_all(p, [sparse("x", 6)])
    m = seqs[0][1]["x"]
    assert m.indices.tolist() == [5, 2, 5] and m.data.tolist() == [1, 2, 3]
    assert seqs[1][1]["x"].shape == (1, 6) and seqs[1][1]["x"].nnz == 0  # empty sparse sample is valid
    assert seqs[2][1]["x"].data.tolist() == [0.5]


@pytest.mark.parametrize("tail", ["\n", ""], ids=["newline", "at_end_of_file"])
def test_sparse_indices_of_every_width_and_signed_values_parse_exactly(tmp_path, tail):
    """Indices of 1 to 10 digits (leading zeros too) and values with '+', '-' or no sign, each
    also as the file's last bytes: the kernel reads short ones 8 bytes at a time and the rest
    byte by byte, and must agree with both (the last entries lie within 8 bytes of the end)."""
    rng = np.random.default_rng(7)
    dim = 2**31 - 1
    lines, want = [], []
    for width in range(1, 11):
        for _ in range(6):
            index = int(rng.integers(0, min(10**width, dim)))
            text = str(index).zfill(width)
            sign = ["", "-", "+"][int(rng.integers(0, 3))]
            mant = int(rng.integers(0, 10**6))
            value = f"{sign}{mant // 1000}.{mant % 1000:03d}"
            lines.append(f"|x {text}:{value}")
            want.append((index, np.float32(float(value))))
    p = write(tmp_path, "\n".join(lines) + tail)
    seqs, reader, _ = read_all(p, [sparse("x", dim)])
    got = [(int(d["x"].indices[0]), d["x"].data[0]) for _, d in seqs]
    assert reader.errors_counted == 0
    assert [g[0] for g in got] == [w[0] for w in want]
    assert all(g[1] == w[1] and np.signbit(g[1]) == np.signbit(w[1]) for g, w in zip(got, want))


def test_short_dense_sample_is_zero_padded_with_a_warning(tmp_path):
    p = write(tmp_path, "|a 1 2\n|a\n|a 1 2 3\n")
    seqs, reader, warns = read_all(p, [dense("a", 3)])
    assert seqs[0][1]["a"].tolist() == [[1, 2, 0]]
    assert seqs[1][1]["a"].tolist() == [[0, 0, 0]]
    assert len(warns) == 2 and "data.ctf:1:1: dense input 'a' has 2 of 3 values" in warns[0]
    assert reader.summary()["padded_samples"] == 2


def test_unknown_inputs_are_skipped_with_a_warning(tmp_path):
    p = write(tmp_path, "|a 1 |zzz 1 2 3 |this_is_a_long_name 4\n")
    seqs, reader, warns = read_all(p, [dense("a", 1)])
    assert seqs[0][1]["a"].tolist() == [[1]]
    assert any("input 'zzz' is not declared" in w for w in warns)
    assert reader.errors_counted == 0
    _, _, quiet = read_all(p, [dense("a", 1)], trace_level=0)
    assert quiet == []


def test_samples_order_within_a_line_does_not_matter(tmp_path):
    p = write(tmp_path, "|b 2 |a 1\n|a 3 |b 4\n")
    seqs, _, _ = read_all(p, [dense("a", 1), dense("b", 1)])
    assert [d["a"][0, 0] for _, d in seqs] == [1, 3]
    assert [d["b"][0, 0] for _, d in seqs] == [2, 4]


def test_definesmbsize_stream_sets_sequence_length(tmp_path):
    from recordkit.formats.ctf import CTFReader
    p = write(tmp_path, "0 |w 1 |c 1\n0 |w 2\n0 |w 3\n1 |w 4 |c 0\n")
    r = CTFReader(p, [dense("w", 1), dense("c", 1, defines_mb_size=True)])
    chunk = r.load_chunk(0)
    assert chunk.lengths.tolist() == [1, 1]
    r = CTFReader(p, [dense("w", 1), dense("c", 1)])
    assert r.load_chunk(0).lengths.tolist() == [3, 1]


def test_empty_file_is_an_error(tmp_path):
    from recordkit import FormatError
    from recordkit.formats.ctf import CTFReader
    p = write(tmp_path, "\n  \n|# nothing\n")
    with pytest.raises(FormatError, match="empty"):
        CTFReader(p, [dense("a", 1)])


def test_utf16_file_is_rejected_clearly(tmp_path):
    from recordkit import FormatError
    from recordkit.formats.ctf import CTFReader
    p = write(tmp_path, "|a 1\n".encode("utf-16"))
    with pytest.raises(FormatError, match="UTF-16"):
        CTFReader(p, [dense("a", 1)])
