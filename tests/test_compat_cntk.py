"""recordkit.compat.cntk: a cntk.io data-reading script runs after swapping the import."""
import json

import numpy as np
import pytest

from helpers import write
from recordkit.compat.cntk import (FULL_DATA_SWEEP, INFINITELY_REPEAT, CBFDeserializer, CTFDeserializer,
                                   MinibatchSource, StreamDef, StreamDefs)


def corpus(tmp_path, n=12):
    text = "".join(f"{k} |x {k} {k + 0.5} |y {k % 3}:1\n" + (f"{k} |x {k} 1\n" if k % 2 else "") for k in range(n))
    return write(tmp_path, text)


def streams():
    return StreamDefs(features=StreamDef(field="x", shape=2, is_sparse=False),
                      labels=StreamDef(field="y", shape=3, is_sparse=True))


def test_cntk_style_script_runs_unchanged(tmp_path):
    # --- what a CNTK 2.7 user wrote, only the import differs
    mb_source = MinibatchSource(CTFDeserializer(str(corpus(tmp_path)), streams()), randomize=False,
                                max_sweeps=1)
    features_si = mb_source.streams.features
    labels_si = mb_source["labels"]
    seen = 0
    while True:
        mb = mb_source.next_minibatch(5)
        if not mb:
            break
        f, l = mb[features_si], mb[labels_si]
        assert f.num_sequences == l.num_sequences and f.num_samples >= l.num_samples
        assert f.asarray().shape[0] == f.num_sequences and f.asarray().shape[2] == 2
        assert all(s.shape[1] == 3 for s in l.as_sequences())
        seen += f.num_sequences
    assert seen == 12
    assert mb_source.stream_info("features") is features_si and features_si.shape == (2,)
    assert features_si.is_sparse is False and labels_si.is_sparse is True


def test_input_map_keys_the_result(tmp_path):
    src = MinibatchSource(CTFDeserializer(str(corpus(tmp_path)), streams()), randomize=False)
    mb = src.next_minibatch(3, input_map={"f": src.streams.features})
    assert list(mb) == ["f"] and mb["f"].num_samples <= 3


def test_stream_without_field_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="stream name for key features must be specified"):
        CTFDeserializer(str(corpus(tmp_path)), StreamDefs(features=StreamDef(shape=2)))


def test_max_samples_and_max_sweeps_exclusive(tmp_path):
    with pytest.raises(ValueError, match="mutually exclusive"):
        MinibatchSource(CTFDeserializer(str(corpus(tmp_path)), streams()), max_samples=3, max_sweeps=2)


def test_full_data_sweep_and_infinitely_repeat(tmp_path):
    src = MinibatchSource(CTFDeserializer(str(corpus(tmp_path)), streams()), max_samples=FULL_DATA_SWEEP)
    total = 0
    while (mb := src.next_minibatch(4)):
        total += mb[src.streams.features].num_sequences
    assert total == 12
    src = MinibatchSource(CTFDeserializer(str(corpus(tmp_path)), streams()), max_sweeps=INFINITELY_REPEAT)
    assert sum(src.next_minibatch(100)[src.streams.features].num_sequences for _ in range(3)) > 12


def test_deserializer_dict_keys_are_honoured(tmp_path):
    p = write(tmp_path, "|x 1 2 |y 0:1\n|x bad 2 |y 0:1\n|x 3 4 |y 1:1\n")
    d = CTFDeserializer(str(p), streams())
    d["maxErrors"] = 1
    with pytest.warns(Warning):
        src = MinibatchSource(d, randomize=False, max_sweeps=1)
        mb = src.next_minibatch(10)
    assert mb[src.streams.features].num_sequences == 2


def test_checkpoint_round_trip(tmp_path):
    make = lambda: MinibatchSource(CTFDeserializer(str(corpus(tmp_path, 30)), streams()),
                                   randomization_window_in_chunks=2, max_sweeps=3)
    ref = [m[s].asarray().tolist() for src in [make()] for m in iter(lambda: src.next_minibatch(4), {})
           for s in [src.streams.features]]
    src = make()
    for _ in range(7):
        src.next_minibatch(4)
    state = json.loads(json.dumps(src.get_checkpoint_state()))
    again = make()
    again.restore_from_checkpoint(state)
    rest = [m[again.streams.features].asarray().tolist() for m in iter(lambda: again.next_minibatch(4), {})]
    assert rest == ref[7:]


def test_ctf_and_cbf_sources_give_identical_minibatches(tmp_path):
    from recordkit.formats.cbf import CBFWriter
    from recordkit.formats.ctf import CTFReader
    from recordkit import StreamSpec
    path = corpus(tmp_path, 20)
    specs = [StreamSpec("features", "dense", 2, "x"), StreamSpec("labels", "sparse", 3, "y")]
    cbf = tmp_path / "c.cbf"
    with CBFWriter(cbf, specs) as w:
        for c in CTFReader(path, specs).iter_chunks():
            w.write_chunk(c)
    a = MinibatchSource(CTFDeserializer(str(path), streams()), randomize=False, max_sweeps=1)
    in_file = StreamDefs(features=StreamDef(field="features", shape=2),
                         labels=StreamDef(field="labels", shape=3, is_sparse=True))
    b = MinibatchSource(CBFDeserializer(str(cbf), in_file), randomize=False, max_sweeps=1)
    while True:
        ma, mb = a.next_minibatch(5), b.next_minibatch(5)
        assert bool(ma) == bool(mb)
        if not ma:
            break
        for name in ("features", "labels"):
            np.testing.assert_array_equal(ma[a.streams[name]].asarray(), mb[b.streams[name]].asarray())


def test_defines_mb_size_counts_label_samples(tmp_path):
    text = "".join(f"{k} |f 1 |l 1\n{k} |f 2\n{k} |f 3\n" for k in range(5))
    p = write(tmp_path, text)
    defs = StreamDefs(f=StreamDef(field="f", shape=1), l=StreamDef(field="l", shape=1, defines_mb_size=True))
    src = MinibatchSource(CTFDeserializer(str(p), defs), randomize=False)
    mb = src.next_minibatch(2)
    assert mb[src.streams.l].num_sequences == 2 and mb[src.streams.f].num_samples == 6
