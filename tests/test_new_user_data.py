"""What a new user trips over with their own data.

1. A declared stream that never occurs (a mistyped alias) is an error at the end, not a file
   whose stream is empty everywhere; ``--allow-empty-stream`` / ``allow_empty_streams=`` allow it.
2. ``convert --to ofrecord --parts N`` keeps file order (contiguous parts) unless round robin is asked.
3. OFRecord data sets record their stream declarations, so converting back needs no ``--stream``.
10. CTF sequence ids through CBF become 0..N-1: ``convert`` says so.
"""
from __future__ import annotations

import itertools
import json
import os
import warnings

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit.cli.main import main
from recordkit.engine.presence import EmptyStreamError
from recordkit.errors import FormatError, UsageError
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.formats.ctf import CTFReader


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def lowercase_ctf(tmp_path, n=300, name="demo.ctf"):
    """A file whose inputs are 'f' (dense 4) and 't' (sparse 12), like the demo corpus."""
    rng = np.random.default_rng(3)
    lines = []
    for i in range(n):
        for _ in range(int(rng.integers(1, 4))):
            vals = " ".join(f"{v:g}" for v in rng.integers(-8, 8, size=4) / 4)  # as CTFWriter prints them
            lines.append(f"{i * 10}\t|f {vals}\t|t {int(rng.integers(0, 12))}:1")
    return write(tmp_path, "\n".join(lines) + "\n", name)


def quietly(fn, *a, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **kw)


def leftovers(directory, name):
    """Anything under ``name`` or a hidden temporary of it in ``directory``."""
    return [e for e in os.listdir(directory) if e == name or (e.startswith(f".{name}") and e != name)]


# -- 1. a declared stream with no sample in the whole input ----------------------------------------

def test_convert_with_mistyped_header_alias_fails_and_writes_nothing(tmp_path, capsys):
    src = lowercase_ctf(tmp_path)
    header = write(tmp_path, "features F dense 4\n", "h.txt")
    code, _, err = run(capsys, "convert", src, tmp_path / "o.cbf", "--header", header)
    assert code == 1
    line = [ln for ln in err.splitlines() if ln.startswith("recordkit: error:")]
    assert len(line) == 1 and "declared 'F', the file has 'f'" in line[0]
    assert f"{src}:1:" in line[0]                      # located at the first 'f'
    assert "--allow-empty-stream features" in line[0]
    assert leftovers(tmp_path, "o.cbf") == []          # nothing under the output name, no temporary


@pytest.mark.parametrize("output", ["o.ctf", "o.cbf", "o_dir"])
def test_convert_with_mistyped_alias_leaves_no_output_in_any_format(tmp_path, capsys, output):
    src = lowercase_ctf(tmp_path)
    extra = ["--to", "ofrecord"] if output == "o_dir" else []
    code, _, err = run(capsys, "convert", src, tmp_path / output, "--stream", "features=dense:4:F",
                       "--stream", "tag=sparse:12:t", *extra)
    assert code == 1 and "declared 'F', the file has 'f'" in err
    assert leftovers(tmp_path, output) == []


def test_allow_empty_stream_lets_the_conversion_through(tmp_path, capsys):
    src = lowercase_ctf(tmp_path)
    out = tmp_path / "o.cbf"
    code, _, err = run(capsys, "convert", src, out, "--stream", "features=dense:4:F", "--stream", "tag=sparse:12:t",
                       "--allow-empty-stream", "features", "--trace-level", "0")
    assert code == 0, err
    with CBFReader(out, allow_empty_streams=["features"]) as r:
        chunks = list(r.iter_chunks())
    assert sum(c.columns["features"].num_samples for c in chunks) == 0
    assert sum(c.columns["tag"].num_samples for c in chunks) > 0


@pytest.mark.parametrize("command", ["cat", "stats"])
def test_cat_and_stats_fail_at_the_end_on_a_stream_that_never_occurs(tmp_path, capsys, command):
    src = lowercase_ctf(tmp_path)
    code, out, err = run(capsys, command, src, "--stream", "features=dense:4:F", "--stream", "tag=sparse:12:t",
                         "--trace-level", "0")
    assert code == 1 and "declared 'F', the file has 'f'" in err
    code, out, err = run(capsys, command, src, "--stream", "features=dense:4:F", "--stream", "tag=sparse:12:t",
                         "--trace-level", "0", "--allow-empty-stream", "F")  # an alias names the stream too
    assert code == 0 and err == ""


def test_allow_empty_stream_with_an_unknown_name_is_an_argument_error(tmp_path, capsys):
    src = lowercase_ctf(tmp_path)
    code, _, err = run(capsys, "cat", src, "--stream", "features=dense:4:f", "--allow-empty-stream", "feature")
    assert code == 2 and "no stream 'feature' is declared" in err


def test_ctf_reader_raises_at_the_end_of_the_sweep(tmp_path):
    src = lowercase_ctf(tmp_path)
    streams = [dense("features", 4, "F"), sparse("tag", 12, "t")]
    reader = CTFReader(src, streams, chunk_size=2048, trace_level=0)
    assert len(reader.chunks) > 3
    seen = []
    with pytest.raises(EmptyStreamError) as err:
        for seq in reader:
            seen.append(seq.key)
    assert len(seen) == 300                     # every sequence was delivered before the error
    assert err.value.streams == ["features"] and err.value.line == 1
    reader.close()                              # reported once: closing does not raise again
    with CTFReader(src, streams, chunk_size=2048, trace_level=0, allow_empty_streams=["features"]) as ok:
        assert sum(1 for _ in ok) == 300


@pytest.mark.parametrize("threads", [1, 2])
def test_ctf_reader_raises_on_close_when_every_chunk_was_read_without_finishing(tmp_path, threads):
    src = lowercase_ctf(tmp_path)
    reader = CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], chunk_size=2048, trace_level=0)
    list(itertools.islice(reader.iter_chunks(threads=threads), len(reader.chunks)))  # the generator never ends
    with pytest.raises(EmptyStreamError):
        reader.close()


def test_ctf_reader_raises_when_load_chunk_reads_the_last_unread_chunk(tmp_path):
    src = lowercase_ctf(tmp_path)
    reader = CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], chunk_size=2048, trace_level=0)
    n = len(reader.chunks)
    for i in reversed(range(1, n)):
        reader.load_chunk(i)
    reader.load_chunk(1)  # again: nothing new
    with pytest.raises(EmptyStreamError):
        reader.load_chunk(0)
    reader.close()


def test_a_partly_read_file_is_not_judged(tmp_path):
    src = lowercase_ctf(tmp_path)
    with CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], chunk_size=2048, trace_level=0) as r:
        r.load_chunk(0)  # the rest of the file might hold 'F': no error on close


def test_an_error_in_the_with_block_is_not_hidden(tmp_path):
    src = lowercase_ctf(tmp_path)
    with pytest.raises(KeyError):
        with CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], trace_level=0) as r:
            list(itertools.islice(r.iter_chunks(), len(r.chunks)))
            raise KeyError("mine")


def test_minibatch_source_raises_at_the_end_of_a_randomized_sweep(tmp_path):
    from recordkit.engine.source import MinibatchSource
    src = lowercase_ctf(tmp_path)
    reader = CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], chunk_size=2048, trace_level=0)
    source = MinibatchSource(reader, randomize=True, seed=1, max_sweeps=1)
    with pytest.raises(EmptyStreamError) as err:
        while source.next_minibatch(64) is not None:
            pass
    assert (err.value.line, err.value.column) == (1, 3)  # "0\t|f": the earliest 'f', whichever chunk was read first


def test_the_near_miss_may_be_the_stream_name_or_a_close_spelling(tmp_path):
    p = write(tmp_path, "|labels 1\t|featurs 1 2\n|labels 0\t|featurs 3 4\n")
    with pytest.raises(EmptyStreamError, match="declared 'features', the file has 'featurs'"):
        quietly(lambda: list(CTFReader(p, [dense("features", 2), dense("y", 1, "labels")])))
    with pytest.raises(EmptyStreamError, match="declared 'L', the file has 'labels'"):
        quietly(lambda: list(CTFReader(p, [dense("labels", 1, "L"), dense("x", 2, "featurs")])))


def test_no_near_miss_lists_the_undeclared_inputs(tmp_path):
    p = write(tmp_path, "|a 1 |zz 5\n|a 2 |zz 6\n")
    with pytest.raises(EmptyStreamError) as err:
        quietly(lambda: list(CTFReader(p, [dense("a", 1), dense("q", 1, "Q")])))
    assert "stream 'q' (input 'Q') has no sample in the whole input (undeclared inputs skipped: 'zz')" in str(err.value)


def test_extra_undeclared_inputs_beside_present_streams_are_no_error(tmp_path):
    """Reading a subset of a file's inputs is ordinary (CNTK conformance case 31)."""
    p = write(tmp_path, "|a 1 |b 2 |c 3\n|a 4 |b 5 |c 6\n")
    seqs = quietly(lambda: list(CTFReader(p, [dense("a", 1)])))
    assert len(seqs) == 2


def test_a_stream_empty_in_some_sequences_only_is_fine(tmp_path):
    p = write(tmp_path, "|a 1\n|a 2 |b 3\n|a 4\n")
    assert len(list(CTFReader(p, [dense("a", 1), dense("b", 1)]))) == 3


def test_sequences_all_dropped_for_tolerated_errors_are_reported_as_errors_only(tmp_path):
    p = write(tmp_path, "|a 1 x\n")
    reader = CTFReader(p, [dense("a", 2)], max_errors=1)
    assert quietly(lambda: list(reader)) == [] and reader.errors_counted == 1


def test_ctf_to_cbf_fast_path_checks_before_publishing(tmp_path):
    from recordkit.formats.cbf import from_ctf
    src = lowercase_ctf(tmp_path)
    reader = CTFReader(src, [dense("features", 4, "F"), sparse("tag", 12, "t")], chunk_size=2048, trace_level=0)
    with pytest.raises(EmptyStreamError):
        from_ctf.convert(reader, tmp_path / "x.cbf", chunk_size=1000)
    assert leftovers(tmp_path, "x.cbf") == []


def _cbf_with_empty_stream(tmp_path):
    src = lowercase_ctf(tmp_path)
    streams = [dense("features", 4, "F"), sparse("tag", 12, "t")]
    out = tmp_path / "o.cbf"
    with CTFReader(src, streams, trace_level=0, allow_empty_streams=["features"]) as r, \
            CBFWriter(out, streams, chunk_size=1000) as w:
        for chunk in r.iter_chunks():
            w.write_chunk(chunk)
    return out


def test_cbf_reader_raises_on_a_stream_empty_in_the_whole_file(tmp_path, capsys):
    out = _cbf_with_empty_stream(tmp_path)
    with pytest.raises(EmptyStreamError, match="stream 'features' has no sample in the whole input"):
        with CBFReader(out) as r:
            assert len(r.chunks) > 3
            list(r.iter_chunks(threads=2))
    with CBFReader(out, [sparse("tag", 12)]) as r:  # not selected: not judged
        list(r)
    code, _, err = run(capsys, "stats", out)
    assert code == 1 and "--allow-empty-stream features" in err
    code, _, err = run(capsys, "stats", out, "--allow-empty-stream", "features")
    assert code == 0


def test_allow_empty_streams_rejects_unknown_names(tmp_path):
    p = write(tmp_path, "|a 1\n")
    with pytest.raises(UsageError):
        CTFReader(p, [dense("a", 1)], allow_empty_streams=["b"])
    assert issubclass(EmptyStreamError, FormatError)


# -- 2. convert --to ofrecord --parts N keeps file order -------------------------------------------

DEMO_STREAMS = ["--stream", "features=dense:4:f", "--stream", "tag=sparse:12:t"]


def ofrecord_keys(directory):
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    with OFRecordDeserializer(directory, [dense("features", 4, "f")]) as r:
        per_part = {}
        for info in r.chunks:
            part = r._where[info.id][0]
            per_part.setdefault(os.path.basename(part), []).extend(int(k) for k in r.load_chunk(info.id).keys)
    return [k for _, keys in sorted(per_part.items()) for k in keys], per_part


def test_convert_to_ofrecord_parts_are_contiguous_by_default(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=100)
    code, _, err = run(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord", "--parts", "3", *DEMO_STREAMS)
    assert code == 0, err
    keys, per_part = ofrecord_keys(tmp_path / "of")
    assert keys == [10 * i for i in range(100)]                      # file order when read back
    assert [len(v) for v in per_part.values()] == [34, 33, 33]       # balanced runs
    assert per_part["part-00001"][0] == 340


def test_round_robin_parts_are_an_explicit_option(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=10)
    code, _, err = run(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord", "--parts", "3",
                       "--part-order", "round-robin", *DEMO_STREAMS)
    assert code == 0, err
    keys, _ = ofrecord_keys(tmp_path / "of")
    assert keys == [0, 30, 60, 90, 10, 40, 70, 20, 50, 80]


def test_contiguous_parts_tolerate_sequences_dropped_by_the_error_budget(tmp_path, capsys):
    p = write(tmp_path, "".join(f"{i} |f {'x' if i == 2 else 1} 2 3 4\n" for i in range(7)))
    code, _, err = run(capsys, "convert", p, tmp_path / "of", "--to", "ofrecord", "--parts", "3",
                       "--stream", "features=dense:4:f", "--max-errors", "1")
    assert code == 0, err
    keys, per_part = ofrecord_keys(tmp_path / "of")
    assert keys == [0, 1, 3, 4, 5, 6] and len(per_part) == 3


def test_convert_help_says_which_part_order(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--part-order {contiguous,round-robin}" in help_text
    assert "contiguous (default)" in help_text and "reading the parts in name order gives file order" in help_text


def test_ray_engine_refuses_round_robin(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=5)
    code, _, err = run(capsys, "convert", src, tmp_path / "of", "--engine", "ray", "--to", "ofrecord",
                       "--part-order", "round-robin", *DEMO_STREAMS)
    assert code == 2 and "--part-order round-robin needs the local engine" in err


# -- 3. stream declarations recorded in the OFRecord data set ---------------------------------------

def test_ctf_to_ofrecord_and_back_needs_no_stream_and_is_identical(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=50)
    of = tmp_path / "of"
    assert run(capsys, "convert", src, of, "--to", "ofrecord", "--parts", "2", *DEMO_STREAMS)[0] == 0
    recorded = json.loads((of / "_recordkit_streams.json").read_text())
    assert [(s["name"], s["alias"], s["format"], s["dim"]) for s in recorded["streams"]] == [
        ("features", "f", "dense", 4), ("tag", "t", "sparse", 12)]
    code, _, err = run(capsys, "convert", of, tmp_path / "back.ctf")
    assert code == 0, err
    assert (tmp_path / "back.ctf").read_bytes() == src.read_bytes()   # names, aliases, ids and order survive
    # a stream given by its name finds the feature its alias named
    code, _, err = run(capsys, "convert", of, tmp_path / "back2.ctf", "--stream", "features=dense:4",
                       "--stream", "tag=sparse:12")
    assert code == 0, err
    assert (tmp_path / "back2.ctf").read_bytes() == src.read_bytes()


def test_ofrecord_to_cbf_uses_the_recorded_names_and_precision(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=20)
    of = tmp_path / "of"
    assert run(capsys, "convert", src, of, "--to", "ofrecord", "--precision", "double", *DEMO_STREAMS)[0] == 0
    assert run(capsys, "convert", of, tmp_path / "o.cbf")[0] == 0
    with CBFReader(tmp_path / "o.cbf") as r:
        assert [(s.name, s.format, s.dim, str(s.dtype)) for s in r.streams] == [
            ("features", "dense", 4, "float64"), ("tag", "sparse", 12, "float64")]
        with CTFReader(src, [dense("features", 4, "f"), sparse("tag", 12, "t")], precision="double") as c:
            a, b = next(iter(r)), next(iter(c))
        np.testing.assert_array_equal(a["features"], b["features"])


def test_cbf_to_ofrecord_and_back_round_trips_names(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=20)
    assert run(capsys, "convert", src, tmp_path / "a.cbf", *DEMO_STREAMS)[0] == 0
    assert run(capsys, "convert", tmp_path / "a.cbf", tmp_path / "of", "--to", "ofrecord")[0] == 0
    assert run(capsys, "convert", tmp_path / "of", tmp_path / "b.cbf")[0] == 0
    assert (tmp_path / "a.cbf").read_bytes() == (tmp_path / "b.cbf").read_bytes()


def test_ofrecord_without_declarations_asks_for_stream(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(tmp_path / "of", 1) as w:
        w.write({"x": np.ones(3, np.float32)})
    code, _, err = run(capsys, "convert", tmp_path / "of", tmp_path / "o.ctf")
    assert code == 2 and "records no stream declarations" in err and "--stream" in err
    assert run(capsys, "convert", tmp_path / "of", tmp_path / "o.ctf", "--stream", "x=dense:3")[0] == 0


def test_rewriting_without_streams_removes_the_old_declarations(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    src = lowercase_ctf(tmp_path, n=5)
    of = tmp_path / "of"
    assert run(capsys, "convert", src, of, "--to", "ofrecord", *DEMO_STREAMS)[0] == 0
    (of / "README").write_text("mine")
    with OFRecordWriter(of, 1) as w:
        w.write({"y": np.ones(2, np.float32)})
    assert sorted(os.listdir(of)) == ["README", "part-00000"]


def test_recorded_declarations_are_checked(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=5)
    of = tmp_path / "of"
    assert run(capsys, "convert", src, of, "--to", "ofrecord", *DEMO_STREAMS)[0] == 0
    code, _, err = run(capsys, "convert", of, tmp_path / "o.ctf", "--stream", "features=dense:5")
    assert code == 2 and "records it as dense dim 4" in err
    (of / "_recordkit_streams.json").write_text("{not json")
    code, _, err = run(capsys, "convert", of, tmp_path / "o.ctf")
    assert code == 1 and "_recordkit_streams.json" in err and "unreadable stream declarations" in err


def test_oneflow_part_discovery_ignores_the_declarations(tmp_path, capsys):
    from recordkit.formats.ofrecord.dataset import part_paths
    from recordkit.formats.ofrecord.reader import OFRecordReader
    src = lowercase_ctf(tmp_path, n=5)
    assert run(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord", *DEMO_STREAMS)[0] == 0
    assert [os.path.basename(p) for p in part_paths(tmp_path / "of")] == ["part-00000"]
    assert sum(1 for _ in OFRecordReader(str(tmp_path / "of"), batch_size=1, epochs=1)) == 5


# -- 10. CTF sequence ids through CBF -----------------------------------------------------------------

def notes(err):
    return [ln for ln in err.splitlines() if ln.startswith("recordkit: note:")]


def test_convert_notes_that_cbf_renumbers_ids(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=20)   # ids 0, 10, 20, ...
    code, _, err = run(capsys, "convert", src, tmp_path / "o.cbf", *DEMO_STREAMS)
    assert code == 0
    assert notes(err) == [f"recordkit: note: CBF has no sequence ids: the sequences of {src} (ids 0..190) are "
                          f"keyed by position 0..N-1 in {tmp_path / 'o.cbf'}; CTF and OFRecord output keep the ids"]


def test_no_note_when_ids_are_already_positions_or_absent(tmp_path, capsys):
    ordinal = write(tmp_path, "0 |f 1 2 3 4\n0 |f 1 2 3 4\n1 |f 5 6 7 8\n2 |f 0 0 0 1\n", "ordinal.ctf")
    lines = write(tmp_path, "|f 1 2 3 4\n\n|f 5 6 7 8\n", "lines.ctf")
    for p in (ordinal, lines):
        code, _, err = run(capsys, "convert", p, tmp_path / (p.stem + ".cbf"), "--stream", "features=dense:4:f")
        assert code == 0 and notes(err) == [], err
    assert run(capsys, "convert", ordinal, tmp_path / "o.ctf", "--stream", "features=dense:4:f")[0] == 0
    assert notes(capsys.readouterr().err) == []


def test_note_when_a_dropped_sequence_renumbers_the_rest(tmp_path, capsys):
    p = write(tmp_path, "0 |f 1 2 3 4\n1 |f x 2 3 4\n2 |f 5 6 7 8\n")
    code, _, err = run(capsys, "convert", p, tmp_path / "o.cbf", "--stream", "features=dense:4:f", "--max-errors", "1")
    assert code == 0 and len(notes(err)) == 1


def test_note_on_the_general_path_from_ofrecord_ids(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=8)
    assert run(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord", *DEMO_STREAMS)[0] == 0
    code, _, err = run(capsys, "convert", tmp_path / "of", tmp_path / "o.cbf")
    assert code == 0 and len(notes(err)) == 1 and "(ids 0..70)" in err
    # from CBF (keys are positions) through OFRecord and back: nothing to say
    assert run(capsys, "convert", tmp_path / "o.cbf", tmp_path / "of2", "--to", "ofrecord")[0] == 0
    code, _, err = run(capsys, "convert", tmp_path / "of2", tmp_path / "o2.cbf")
    assert code == 0 and notes(err) == []


def test_reshard_carries_the_declarations_over(tmp_path, capsys):
    src = lowercase_ctf(tmp_path, n=12)
    assert run(capsys, "convert", src, tmp_path / "of", "--to", "ofrecord", "--parts", "2", *DEMO_STREAMS)[0] == 0
    assert run(capsys, "reshard", tmp_path / "of", tmp_path / "of5", "--parts", "5")[0] == 0
    assert (tmp_path / "of5" / "_recordkit_streams.json").read_bytes() == \
        (tmp_path / "of" / "_recordkit_streams.json").read_bytes()
    assert run(capsys, "convert", tmp_path / "of5", tmp_path / "back.ctf")[0] == 0
    assert (tmp_path / "back.ctf").read_bytes() == src.read_bytes()
