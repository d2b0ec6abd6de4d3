"""OFRecord <-> CTF/CBF through the engine's protocol, and OFRecord data feeding MinibatchSource."""
import json
import os

import numpy as np
import pytest

from helpers import dense, sparse, write
from recordkit import FormatError
from recordkit.cli.main import main
from recordkit.engine.source import MinibatchSource
from recordkit.formats.ofrecord import codec
from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
from recordkit.formats.ofrecord.writer import OFRecordWriter

CTF = "".join(f"{k * 10} |x {k} {k + 0.5}\n{k * 10} |x 1 2 |y {k % 4}:1.5 {k % 3}:2\n" for k in range(7)) + \
    "99 |y\n"
ARGS = ["--stream", "x=dense:2", "--stream", "y=sparse:4"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


def records(capsys, path, *extra):
    return [json.loads(line) for line in run(capsys, "cat", str(path), *extra).splitlines()]


def test_ctf_to_ofrecord_and_back_keeps_sequences_and_keys(tmp_path, capsys):
    src = write(tmp_path, CTF)
    out = tmp_path / "ofr"
    run(capsys, "convert", str(src), str(out), *ARGS, "--to", "ofrecord", "--parts", "3")
    assert sorted(os.listdir(out)) == ["_recordkit_streams.json", "part-00000", "part-00001", "part-00002"]
    back = tmp_path / "back.ctf"
    run(capsys, "convert", str(out), str(back), *ARGS)
    a = records(capsys, src, *ARGS)
    b = records(capsys, back, *ARGS)
    assert sorted(a, key=lambda r: r["key"]) == sorted(b, key=lambda r: r["key"])


def test_record_layout_of_dense_and_sparse_streams(tmp_path, capsys):
    src = write(tmp_path, CTF)
    out = tmp_path / "ofr"
    run(capsys, "convert", str(src), str(out), *ARGS, "--to", "ofrecord")
    first = records(capsys, out)[0]
    assert first["key"] == {"kind": "int64_list", "values": [0]}
    assert first["x"] == {"kind": "float_list", "values": [0.0, 0.5, 1.0, 2.0]}   # 2 samples x dim 2
    assert first["y:indices"]["values"] == [0, 0] and first["y:values"]["values"] == [1.5, 2.0]
    assert first["y:nnz"]["values"] == [2]


def test_ofrecord_to_cbf_and_minibatches(tmp_path, capsys):
    d = tmp_path / "ofr"
    with OFRecordWriter(d, 2) as w:
        for k in range(9):
            w.write({"x": np.arange(2 * (k % 3 + 1), dtype=np.float32), "label": np.array([k % 2], np.int64)})
    streams = [dense("x", 2), dense("label", 1)]
    src = MinibatchSource(OFRecordDeserializer(d, streams), randomize=False, max_sweeps=1)
    mbs = list(src.minibatches(4))
    assert sum(m.num_sequences for m in mbs) == 9 and mbs[0]["x"].data.shape[2] == 2
    run(capsys, "convert", str(d), str(tmp_path / "o.cbf"), "--stream", "x=dense:2", "--stream", "label=dense:1")
    info = json.loads(run(capsys, "inspect", str(tmp_path / "o.cbf"), "--json"))
    assert info["sequences"] == 9 and info["samples"] == sum(k % 3 + 1 for k in range(9))


def test_mapping_errors_name_the_feature_and_record(tmp_path):
    d = tmp_path / "ofr"
    with OFRecordWriter(d, 1) as w:
        w.write({"x": np.arange(4, dtype=np.float32)})
        w.write({"x": np.arange(3, dtype=np.float32)})
        w.write({"z": 1})
    deser = OFRecordDeserializer(d, [dense("x", 2)], records_per_chunk=1)
    deser.load_chunk(0)
    with pytest.raises(FormatError, match=r"feature 'x' has 3 values, not a multiple of dim 2 \(record 1\)"):
        deser.load_chunk(1)
    with pytest.raises(FormatError, match=r"feature 'x' is missing \(record 2\)"):
        deser.load_chunk(2)


def _ofrecord_source(directory):
    return MinibatchSource(OFRecordDeserializer(directory, [dense("images", 4), dense("labels", 1)]),
                           randomize=True, seed=3, max_sweeps=1)


def test_ofrecord_data_feeds_the_pytorch_dataset(tmp_path):
    torch = pytest.importorskip("torch")
    import functools
    from torch.utils.data import DataLoader
    from recordkit.integrations.torch import MinibatchDataset
    d = tmp_path / "ofr"
    with OFRecordWriter(d, 3) as w:
        for k in range(20):
            w.write({"images": np.full(4, k, np.float32), "labels": np.array([k], np.int64)})
    ds = MinibatchDataset(functools.partial(_ofrecord_source, str(d)), 5)
    batches = list(DataLoader(ds, batch_size=None, num_workers=2))
    labels = torch.cat([b["labels"].reshape(-1) for b in batches]).tolist()
    assert sorted(int(x) for x in labels) == list(range(20))  # every record once across both workers
    assert all(torch.equal(b["images"][:, 0, 0], b["labels"].reshape(-1)) for b in batches)
