"""CompositeDeserializer: several files read as one, joined by sequence id or position."""
import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit import FormatError
from recordkit.engine.composite import CompositeDeserializer
from recordkit.engine.source import MinibatchSource
from recordkit.formats.ctf import CTFReader


def test_join_by_sequence_id_pairs_the_right_sequences(tmp_path):
    a = write(tmp_path, "".join(f"{k} |a {k}\n" for k in (3, 1, 2, 0)), "a.ctf")
    b = write(tmp_path, "".join(f"{k} |b {k * 10}\n{k} |b {k * 10 + 1}\n" for k in (0, 1, 2, 3)), "b.ctf")
    comp = CompositeDeserializer([CTFReader(a, [dense("a", 1)]), CTFReader(b, [dense("b", 1)], chunk_size=20)])
    assert comp.join == "key"
    seqs = [comp.load_chunk(c.id) for c in comp.chunks]
    for chunk in seqs:
        for i in range(len(chunk)):
            s = chunk.sequence(i)
            assert s["b"][:, 0].tolist() == [s.key * 10, s.key * 10 + 1] and s["a"][0, 0] == s.key
            assert chunk.lengths[i] == 2  # the longest stream


def test_join_by_position_when_files_have_no_ids(tmp_path):
    a = write(tmp_path, "".join(f"|a {k}\n" for k in range(5)), "a.ctf")
    b = write(tmp_path, "".join(f"|b {k % 3}:1\n" for k in range(5)), "b.ctf")
    comp = CompositeDeserializer([CTFReader(a, [dense("a", 1)], chunk_size=8), CTFReader(b, [sparse("b", 3)])])
    assert comp.join == "position"
    src = MinibatchSource(comp, randomize=False, max_sweeps=1)
    mb = src.next_minibatch(10)
    assert mb["a"].data[:, 0, 0].tolist() == [0, 1, 2, 3, 4]
    assert [m.indices.tolist() for m in mb["b"].as_sequences()] == [[0], [1], [2], [0], [1]]


def test_count_mismatch_is_a_clear_error(tmp_path):
    a = write(tmp_path, "|a 1\n|a 2\n", "a.ctf")
    b = write(tmp_path, "|b 1\n", "b.ctf")
    with pytest.raises(FormatError, match="has 1 sequences, but .*a.ctf has 2"):
        CompositeDeserializer([CTFReader(a, [dense("a", 1)]), CTFReader(b, [dense("b", 1)])])


def test_missing_key_is_a_clear_error(tmp_path):
    a = write(tmp_path, "1 |a 1\n2 |a 2\n", "a.ctf")
    b = write(tmp_path, "1 |b 1\n3 |b 2\n", "b.ctf")
    comp = CompositeDeserializer([CTFReader(a, [dense("a", 1)]), CTFReader(b, [dense("b", 1)])])
    with pytest.raises(FormatError, match=r"no sequence with key\(s\) \[2\]"):
        comp.load_chunk(0)


def test_duplicate_stream_names_are_rejected(tmp_path):
    a = write(tmp_path, "|a 1\n", "a.ctf")
    with pytest.raises(ValueError, match="more than one deserializer"):
        CompositeDeserializer([CTFReader(a, [dense("a", 1)]), CTFReader(a, [dense("a", 1)])])


def test_closing_a_composite_closes_every_deserializer_it_joins(tmp_path):
    a = write(tmp_path, "".join(f"{k} |a {k}\n" for k in range(4)), "a.ctf")
    b = write(tmp_path, "".join(f"{k} |b {k}\n" for k in range(4)), "b.ctf")
    parts = [CTFReader(a, [dense("a", 1)]), CTFReader(b, [dense("b", 1)])]
    with CompositeDeserializer(parts) as comp:
        assert len(comp.load_chunk(comp.chunks[0].id)) == 4
    for part in parts:
        with pytest.raises(ValueError, match="reader is closed"):
            part.load_chunk(0)
    comp.close()  # a second close is harmless
