"""SINGA record stores through the CLI: prepare, cat, convert to and from the other formats."""
import json

import numpy as np

from recordkit.cli.main import main
from recordkit.engine.source import MinibatchSource
from recordkit.formats.singa import records
from recordkit.formats.singa.deserializer import SingaRecordDeserializer
from test_singa_prepare import make_cifar


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def test_prepare_cifar10_then_cat_and_read_back(tmp_path, capsys):
    src, images = make_cifar(tmp_path, per_batch=2, test=1, seed=3)
    out = tmp_path / "out"
    run(capsys, "prepare", "cifar10", str(src), str(out))
    assert {p.name for p in out.iterdir()} == {"train_data.bin", "test_data.bin", "image_mean.bin"}
    lines = [json.loads(x) for x in run(capsys, "cat", str(out / "train_data.bin"), "--decode",
                                        "image-record").splitlines()]
    assert [x["key"] for x in lines] == [f"{i:05d}" for i in range(10)]
    deser = SingaRecordDeserializer(out / "train_data.bin", tuples_per_chunk=3)
    assert [c.num_sequences for c in deser.chunks] == [3, 3, 3, 1]
    src_mb = MinibatchSource(deser, randomize=False, max_sweeps=1)
    mb = src_mb.next_minibatch(100)
    assert mb["features"].data.shape == (10, 1, 3072) and mb.keys.tolist() == list(range(10))
    first = records.decode_record(__import__("base64").b64decode(lines[0]["value"]))
    np.testing.assert_array_equal(mb["features"].data[0, 0], first["pixel"].reshape(-1).astype(np.float32))
    assert mb["label"].data[0, 0, 0] == first["label"]


def test_singa_store_to_ctf_and_back_to_a_store(tmp_path, capsys):
    src, _ = make_cifar(tmp_path, per_batch=1, test=1, seed=9)
    out = tmp_path / "out"
    run(capsys, "prepare", "cifar10", str(src), str(out))
    ctf = tmp_path / "train.ctf"
    run(capsys, "convert", str(out / "train_data.bin"), str(ctf))
    recs = [json.loads(x) for x in run(capsys, "cat", str(ctf), "--stream", "features=dense:3072",
                                       "--stream", "label=dense:1").splitlines()]
    assert len(recs) == 5 and len(recs[0]["features"][0]) == 3072
    back = tmp_path / "back.bin"
    run(capsys, "convert", str(ctf), str(back), "--stream", "features=dense:3072", "--stream", "label=dense:1",
        "--to", "kvfile")
    again = SingaRecordDeserializer(back)
    first = again.load_chunk(0)
    assert first.columns["label"].values[:, 0].tolist() == [r["label"][0][0] for r in recs]
    np.testing.assert_array_equal(first.columns["features"].values[0], np.array(recs[0]["features"][0], np.float32))


def test_csv_store_converts_to_streams(tmp_path, capsys):
    csv = tmp_path / "d.csv"
    csv.write_text("1,0.5,2\n0,-1,3.25\n\n2,4,5\n")
    ctf = tmp_path / "d.ctf"
    run(capsys, "convert", str(csv), str(ctf), "--from", "csv", "--csv-dim", "2")
    recs = [json.loads(x) for x in run(capsys, "cat", str(ctf), "--stream", "features=dense:2",
                                       "--stream", "label=dense:1").splitlines()]
    assert [r["key"] for r in recs] == [0, 1, 3]
    assert [r["features"][0] for r in recs] == [[0.5, 2.0], [-1.0, 3.25], [4.0, 5.0]]
    assert [r["label"][0][0] for r in recs] == [1, 0, 2]


def test_csv_line_with_too_few_values_names_its_line(tmp_path):
    import pytest
    from recordkit import FormatError
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer
    csv = tmp_path / "d.csv"
    csv.write_text("1,0.5,2\n0,-1\n")
    with pytest.raises(FormatError, match=r"d.csv:2: too few fields"):
        SingaCSVDeserializer(csv, 2)


def test_deserializer_subtracts_the_mean_file_and_scales(tmp_path, capsys):
    src, _ = make_cifar(tmp_path, per_batch=1, test=1, seed=2)
    out = tmp_path / "out"
    run(capsys, "prepare", "cifar10", str(src), str(out))
    raw = SingaRecordDeserializer(out / "train_data.bin").load_chunk(0).columns["features"].values
    norm = SingaRecordDeserializer(out / "train_data.bin", mean=out / "image_mean.bin", std=64.0)
    got = norm.load_chunk(0).columns["features"].values
    mean = raw.astype(np.float64).mean(axis=0)  # image_mean.bin is the mean of the training images
    np.testing.assert_allclose(got, (raw - mean) / 64.0, rtol=1e-5, atol=1e-4)


def test_inspect_describes_a_singa_store(tmp_path, capsys):
    src, _ = make_cifar(tmp_path, per_batch=1, test=1, seed=4)
    out = tmp_path / "out"
    run(capsys, "prepare", "cifar10", str(src), str(out))
    info = json.loads(run(capsys, "inspect", str(out / "train_data.bin"), "--json"))
    assert info["store"] == "kvfile" and info["tuples"] == 5 and info["first_key"] == "00000"
    assert info["value_bytes"]["min"] == info["value_bytes"]["max"] == 3083
    assert main(["stats", str(out / "train_data.bin")]) == 0  # its records' streams, as any data set's
    assert "5 sequences" in capsys.readouterr().out
