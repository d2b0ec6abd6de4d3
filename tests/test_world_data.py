"""Files TensorFlow wrote (tests/data/world/, made by tools/bridge/world_tf.py with
``tf.io.TFRecordWriter`` and ``tf.train.Example``): recordkit reads them with no ``--stream``, every
value equal to what the writer was given, the bytes feature (an encoded image) as a bytes stream, and
``recordkit verify`` proves each conversion of them lossless."""
import json
import os

import numpy as np
import pytest

from bridge_corpus import cat_records, cli

WORLD = os.path.join(os.path.dirname(__file__), "data", "world")
TRUTH = json.load(open(os.path.join(WORLD, "tf_example_truth.json")))["files"]
IMAGE_STREAMS = ["--stream", "label=dense:1", "--stream", "x=dense:2"]

pytest.importorskip("crc32c")


def test_tensorflows_examples_read_without_streams_every_value_as_written(capsys):
    got = cat_records(capsys, os.path.join(WORLD, "tf_example.tfrecord"))
    want = TRUTH["tf_example.tfrecord"]
    assert len(got) == len(want) == 40
    for g, w in zip(got, want):
        assert set(g) == {"key", "x", "label", "weight", "id"}
        for name in ("x", "label", "weight", "id"):
            assert np.float32(g[name][0]).tolist() == np.float32(w[name]).tolist(), name
        assert g["label"][0] == w["label"] and g["id"][0] == w["id"]  # integers (up to 2^24) exactly


def test_tensorflows_image_examples_read_without_streams_the_image_as_bytes(capsys):
    path = os.path.join(WORLD, "tf_example_image.tfrecord")
    from recordkit import open as rk_open
    want = TRUTH["tf_example_image.tfrecord"]
    with rk_open(path) as reader:
        assert {s.name: s.format for s in reader.streams} == {"image": "bytes", "label": "dense", "x": "dense"}
        chunk = reader.load_chunk(0)
    images = list(chunk.columns["image"].values)
    assert [len(v) for v in images] == [w["image_bytes"] for w in want]
    assert all(v.startswith(b"\x89PNG") or v.startswith(b"\xff\xd8") for v in images)
    got = cat_records(capsys, path, *IMAGE_STREAMS)
    assert [g["label"][0] for g in got] == [w["label"] for w in want]
    assert [np.float32(g["x"][0]).tolist() for g in got] == [np.float32(w["x"]).tolist() for w in want]


@pytest.mark.parametrize("name, streams", [("tf_example.tfrecord", []),
                                           ("tf_example_image.tfrecord", IMAGE_STREAMS),
                                           ("tf_example_image.tfrecord", [])])
@pytest.mark.parametrize("to", ["tfrecord", "webdataset"])
def test_verify_proves_each_conversion_of_tensorflows_files_lossless(tmp_path, capsys, name, streams, to):
    src = os.path.join(WORLD, name)
    out = tmp_path / "out"
    assert cli(capsys, "convert", src, out, "--to", to, *streams)[0] == 0
    code, _, err = cli(capsys, "verify", src, out, *streams)
    assert code == 0 and "identical" in err
    assert cat_records(capsys, out) == cat_records(capsys, src, *streams)
