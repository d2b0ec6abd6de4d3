"""recordkit.compat.oneflow: OneFlow 0.9's data API (``import recordkit.compat.oneflow as flow``).

The differential tests against OneFlow itself are in test_compat_oneflow_golden.py; these check
the behaviour around them: OneFlow's documented recipes running with only the imports changed,
the reader's parameters, the tensor surface, the random streams, and errors.
"""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
import warnings
import weakref
from pathlib import Path

import numpy as np
import pytest

import recordkit.compat.oneflow as flow
from recordkit.compat.oneflow import _random, record_pb2
from recordkit.errors import FormatError, RecordkitWarning

REPO = Path(__file__).resolve().parents[1]


def _write_part(path, records):
    with open(path, "wb") as f:
        for rec in records:
            data = rec.SerializeToString()
            f.write(struct.pack("q", len(data)))
            f.write(data)


def _labels_dataset(directory, parts, per_part, suffix="-1"):
    os.makedirs(directory, exist_ok=True)
    k = 0
    for p in range(parts):
        name = f"part-{p}" if suffix == "-1" else f"part-{p:0{suffix}d}"
        recs = []
        for _ in range(per_part):
            recs.append(record_pb2.OFRecord(feature={
                "label": record_pb2.Feature(int64_list=record_pb2.Int64List(value=[k])),
                "v": record_pb2.Feature(float_list=record_pb2.FloatList(value=[k, k + 0.5]))}))
            k += 1
        _write_part(os.path.join(directory, name), recs)
    return k


# OneFlow's documentation recipe (docs "The OFRecord Data Format", ofrecord_to_string.py, and reading the
# data set with flow.nn), with its imports in ONEFLOW_IMPORTS.
DOCS_SCRIPT = """
{imports}
import random
import struct

random.seed(0)

def int64_feature(value):
    if not isinstance(value, (list, tuple)):
        value = [value]
    return ofrecord.Feature(int64_list=ofrecord.Int64List(value=value))

def float_feature(value):
    if not isinstance(value, (list, tuple)):
        value = [value]
    return ofrecord.Feature(float_list=ofrecord.FloatList(value=value))

obserations = 28 * 28
with open("./dataset/part-0", "wb") as f:
    for loop in range(0, 3):
        image = [random.random() for x in range(0, obserations)]
        label = [random.randint(0, 9)]
        topack = {{"images": float_feature(image), "labels": int64_feature(label)}}
        ofrecord_features = ofrecord.OFRecord(feature=topack)
        serilizedBytes = ofrecord_features.SerializeToString()
        length = ofrecord_features.ByteSize()
        f.write(struct.pack("q", length))
        f.write(serilizedBytes)

with open("./dataset/part-0", "rb") as f:
    for loop in range(0, 3):
        length = struct.unpack("q", f.read(8))
        serilizedBytes = f.read(length[0])
        ofrecord_features = ofrecord.OFRecord.FromString(serilizedBytes)
        assert len(ofrecord_features.feature["images"].float_list.value) == 784

reader = flow.nn.OFRecordReader("./dataset", batch_size=2, data_part_num=1, part_name_suffix_length=-1)
images = flow.nn.OFRecordRawDecoder("images", shape=(784,), dtype=flow.float32)
labels = flow.nn.OFRecordRawDecoder("labels", shape=(1,), dtype=flow.int64)
out = []
for _ in range(3):
    records = reader()
    x, y = images(records), labels(records)
    assert x.dtype == flow.float32 and y.dtype == flow.int64
    out.append((tuple(x.shape), tuple(y.shape), y.numpy().ravel().tolist(), float(x.numpy().sum())))
print(out)
"""
RECORDKIT_IMPORTS = ("import recordkit.compat.oneflow as flow\n"
                     "import recordkit.compat.oneflow.core.record.record_pb2 as ofrecord")


def test_docs_recipe_runs_with_only_imports_changed(tmp_path):
    """OneFlow's docs recipe: write with record_pb2 + struct.pack("q", ByteSize()), read back with FromString
    and with flow.nn.OFRecordReader + OFRecordRawDecoder (batches of 2 over 3 records wrap around)."""
    (tmp_path / "dataset").mkdir()
    script = tmp_path / "script.py"
    script.write_text(DOCS_SCRIPT.format(imports=RECORDKIT_IMPORTS))
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    p = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    out = eval(p.stdout)  # noqa: S307 (our own script's repr)
    assert [o[:2] for o in out] == [((2, 784), (2, 1))] * 3
    labels = [o[2] for o in out]
    assert labels[1][1] == labels[0][0] and labels[2] == [labels[0][1], labels[1][0]]  # 0 1 | 2 0 | 1 2


def test_record_pb2_is_oneflows_schema():
    """record_pb2's classes are the OFRecord schema recordkit's codec reads; also at OneFlow's module path."""
    from recordkit.compat.oneflow.core.record import record_pb2 as deep
    from recordkit.formats.ofrecord import codec, schema
    for name in ("OFRecord", "Feature", "BytesList", "FloatList", "DoubleList", "Int32List", "Int64List"):
        assert getattr(record_pb2, name) is getattr(schema, name) is getattr(deep, name)
    rec = record_pb2.OFRecord(feature={"d": record_pb2.Feature(double_list=record_pb2.DoubleList(value=[1.5])),
                                       "i": record_pb2.Feature(int32_list=record_pb2.Int32List(value=[-3]))})
    got = codec.decode(rec.SerializeToString())
    assert got["d"].kind == "double_list" and got["d"].value.tolist() == [1.5]
    assert got["i"].kind == "int32_list" and got["i"].value.tolist() == [-3]


def test_dtypes_are_oneflows():
    assert flow.float is flow.float32 and flow.double is flow.float64
    assert repr(flow.int8) == "oneflow.int8" and str(flow.uint8) == "oneflow.uint8"
    for d, np_dtype in ((flow.float32, np.float32), (flow.float64, np.float64), (flow.int8, np.int8),
                        (flow.uint8, np.uint8), (flow.int32, np.int32), (flow.int64, np.int64)):
        assert flow.tensor([1], dtype=d).dtype is d
        assert flow.tensor([1], dtype=d).numpy().dtype == np_dtype


def test_reader_is_endless_and_batches_cross_epoch_ends(tmp_path):
    _labels_dataset(tmp_path, parts=2, per_part=3)
    reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=4, data_part_num=2)
    dec = flow.nn.OFRecordRawDecoder("label", (), flow.int64)
    got = np.concatenate([dec(reader()).numpy() for _ in range(5)])
    assert got.tolist() == [0, 1, 2, 3, 4, 5] * 3 + [0, 1]


def test_reader_default_data_part_num_reads_part_0_only(tmp_path):
    """OneFlow's default data_part_num=1 reads part-0 alone, whatever else the directory holds."""
    _labels_dataset(tmp_path, parts=3, per_part=2)
    dec = flow.nn.OFRecordRawDecoder("label", (), flow.int64)
    reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=3)
    assert dec(reader()).numpy().tolist() == [0, 1, 0]


def test_reader_names_parts_like_oneflow(tmp_path):
    _labels_dataset(tmp_path, parts=2, per_part=1, suffix="5")
    reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=2, data_part_num=2, part_name_suffix_length=5)
    assert flow.nn.OFRecordRawDecoder("label", (), flow.int64)(reader()).numpy().tolist() == [0, 1]
    with pytest.raises(FileNotFoundError, match="part-0"):
        flow.nn.OFRecordReader(str(tmp_path), data_part_num=2)  # part-0, part-1 do not exist


def test_reader_splits_parts_by_rank_from_the_environment(tmp_path, monkeypatch):
    """Under oneflow.distributed.launch (RANK, WORLD_SIZE) each rank reads its contiguous run of parts."""
    _labels_dataset(tmp_path, parts=4, per_part=2)
    monkeypatch.setenv("WORLD_SIZE", "2")
    seen = {}
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=4, data_part_num=4)
        seen[rank] = flow.nn.OFRecordRawDecoder("label", (), flow.int64)(reader()).numpy().tolist()
    assert seen == {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}


def test_seeded_shuffle_is_reproducible_and_unseeded_is_not(tmp_path):
    _labels_dataset(tmp_path, parts=1, per_part=40)
    dec = flow.nn.OFRecordRawDecoder("label", (), flow.int64)

    def order(**kw):
        reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=40, random_shuffle=True, shuffle_buffer_size=16, **kw)
        return dec(reader()).numpy().tolist()

    assert order(random_seed=3) == order(random_seed=3) != order(random_seed=4)
    assert order() != order()  # -1 (the default) draws a fresh seed, as OneFlow's NewRandomSeed


def test_libstdcxx_random_streams():
    """Draws of minstd_rand0 seeded by seed_seq with uniform_int_distribution, and std::shuffle over
    std::mt19937, equal those of libstdc++ (GCC 12.2; tools/oracle/libstdcxx_random.cpp printed them)."""
    expected = {7: [2, 0, 2, 933], 0: [2, 0, 1, 102], 123456789: [0, 0, 3, 529], -5: [0, 0, 6, 893],
                5000000000: [0, 0, 0, 384]}
    for seed, draws in expected.items():
        e = _random.MinStdRand0(seed)
        assert [e.uniform_int(0, n - 1) for n in (3, 1, 7, 1000)] == draws, seed
    shuffles = {(11, 1): [4, 0, 3, 1, 7, 5, 2, 6, 10, 8, 9], (11, 2): [4, 6, 5, 10, 1, 0, 3, 7, 8, 9, 2],
                (6, 1): [1, 2, 3, 0, 5, 4], (6, 2): [2, 4, 1, 3, 0, 5],
                (100000, 1): [15619, 51867, 3774, 5047, 93102, 8032, 49021, 83009, 51167, 4861, 99740, 27554]}
    for (n, epoch), head in shuffles.items():
        v = list(range(n))
        _random.std_shuffle(v, _random.MT19937(_random.ONEFLOW_DATASET_SEED + epoch))
        assert v[:12] == head, (n, epoch)
    assert _random.shuffled_parts(list(range(11)), 2) == [7, 2, 5, 9, 0, 4, 1, 6, 10, 8, 3]  # cumulative


@pytest.mark.skipif(not os.path.exists("/usr/bin/g++"), reason="needs g++")
def test_libstdcxx_reference_program_agrees(tmp_path):
    """The C++ reference program itself, compiled here: its output is what test_libstdcxx_random_streams holds."""
    exe = tmp_path / "ref"
    subprocess.run(["g++", "-std=c++17", "-O1", str(REPO / "tools/oracle/libstdcxx_random.cpp"), "-o", str(exe)],
                   check=True)
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert lines[0] == "seed 7: 2 0 2 933"
    for line in lines:
        if line.startswith("shuffle"):
            head, values = line.split(":")
            n, ep = int(head.split()[1][2:]), int(head.split()[3])
            v = list(range(n))
            _random.std_shuffle(v, _random.MT19937(_random.ONEFLOW_DATASET_SEED + ep))
            assert v[:12] == [int(x) for x in values.split()], line


def test_tensor_surface_like_oneflow(tmp_path):
    _labels_dataset(tmp_path, parts=1, per_part=3)
    records = flow.nn.OFRecordReader(str(tmp_path), batch_size=3)()
    assert records.dtype is flow.of_record and records.shape == (3,) and repr(records.shape) == "oneflow.Size([3])"
    with pytest.raises(RuntimeError, match="kOFRecord"):
        records.numpy()
    x = flow.nn.OFRecordRawDecoder("v", (2,), flow.float32)(records)
    assert isinstance(x, flow.Tensor) and x.dtype is flow.float32
    assert x.shape == (3, 2) and x.size() == flow.Size([3, 2]) and x.size(1) == 2 and x.numel() == 6 and len(x) == 3
    assert x.numpy() is x.numpy() and np.asarray(x) is x.numpy()   # no copies
    assert x[1].numpy().tolist() == [1.0, 1.5] and x.to(flow.int64).dtype is flow.int64
    with pytest.warns(RecordkitWarning, match="host memory"):
        import recordkit.compat.oneflow._tensor as T
        T._warned_device = False
        assert x.to("cuda") is x
    buf = flow.nn.OFRecordBytesDecoder("v")  # a float feature is not a bytes value
    with pytest.raises(FormatError, match="bytes_list"):
        buf(records)


def test_tensors_go_to_torch_without_copies():
    torch = pytest.importorskip("torch")
    t = flow.tensor([[1, 2], [3, 4]], dtype=flow.float32)
    tt = torch.from_numpy(t.numpy())
    assert tt.dtype == torch.float32 and tt.shape == (2, 2)
    tt[0, 0] = 9
    assert t.numpy()[0, 0] == 9


def test_decoders_accept_only_the_readers_output():
    with pytest.raises(TypeError, match="OFRecordReader"):
        flow.nn.OFRecordRawDecoder("x", (1,), flow.float32)(flow.tensor([1.0]))


def test_missing_feature_is_a_located_error(tmp_path):
    _labels_dataset(tmp_path, parts=1, per_part=2)
    records = flow.nn.OFRecordReader(str(tmp_path), batch_size=2)()
    with pytest.raises(FormatError, match=r"part-0.*'nope' is missing.*record 0"):
        flow.nn.OFRecordRawDecoder("nope", (1,), flow.float32)(records)


def test_script_data_loader_module_subclass(tmp_path):
    """OneFlow scripts wrap the pipeline in a flow.nn.Module subclass (OneFlow's ResNet-50 loader shape)."""
    _labels_dataset(tmp_path, parts=2, per_part=4)

    class OFRecordDataLoader(flow.nn.Module):
        def __init__(self, path, batch_size):
            super().__init__()
            self.reader = flow.nn.OFRecordReader(path, batch_size=batch_size, data_part_num=2, random_shuffle=True,
                                                 shuffle_after_epoch=True, random_seed=1)
            self.label = flow.nn.OFRecordRawDecoder("label", shape=(), dtype=flow.int32)
            self.value = flow.nn.OFRecordRawDecoder("v", shape=(2,), dtype=flow.float32)

        def forward(self):
            records = self.reader()
            return self.value(records), self.label(records)

    loader = OFRecordDataLoader(str(tmp_path), 8)
    seen = []
    for _ in range(3):
        v, y = loader()
        assert v.shape == (8, 2) and y.dtype is flow.int32
        assert (v.numpy()[:, 0] == y.numpy()).all()   # each value stays with its own label
        seen.extend(y.numpy().tolist())
    assert sorted(seen[:8]) != seen[:8] or sorted(seen[8:16]) != seen[8:16]  # shuffled
    assert set(seen) <= set(range(8))   # (a 1024-record buffer spans many epochs: not every label in 24 draws)


def test_random_crop_and_coin_flip_streams_advance_and_repeat_per_seed(tmp_path):
    from PIL import Image
    import io
    recs = []
    for i in range(4):
        b = io.BytesIO()
        Image.fromarray(np.full((30, 40, 3), i * 40, np.uint8)).save(b, "PNG")
        recs.append(record_pb2.OFRecord(feature={"img": record_pb2.Feature(
            bytes_list=record_pb2.BytesList(value=[b.getvalue()]))}))
    _write_part(tmp_path / "part-0", recs)

    def shapes(seed):
        reader = flow.nn.OFRecordReader(str(tmp_path), batch_size=4)
        crop = flow.nn.OFRecordImageDecoderRandomCrop("img", "RGB", random_seed=seed)
        return [[a.shape for a in crop(reader()).numpy()] for _ in range(3)]

    a = shapes(5)
    assert a == shapes(5) and a[0] != a[1]
    coin = flow.nn.CoinFlip(batch_size=32, random_seed=2)
    c1, c2 = coin().numpy(), coin().numpy()
    assert c1.dtype == np.int8 and not np.array_equal(c1, c2)
    assert np.array_equal(flow.nn.CoinFlip(batch_size=32, random_seed=2)().numpy(), c1)


def test_image_pipeline_shapes_and_dtypes(tmp_path):
    """decode -> Resize -> CropMirrorNormalize with a coin flip, as OneFlow's ImageNet loaders do."""
    from PIL import Image
    import io
    recs = []
    for i in range(3):
        b = io.BytesIO()
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (20 + i, 30, 3), dtype=np.uint8)).save(b, "JPEG")
        recs.append(record_pb2.OFRecord(feature={"encoded": record_pb2.Feature(
            bytes_list=record_pb2.BytesList(value=[b.getvalue()]))}))
    _write_part(tmp_path / "part-0", recs)
    records = flow.nn.OFRecordReader(str(tmp_path), batch_size=3)()
    images = flow.nn.OFRecordImageDecoder("encoded", color_space="RGB")(records)
    assert images.dtype is flow.tensor_buffer and [a.shape for a in images.numpy()] == [(20, 30, 3), (21, 30, 3),
                                                                                       (22, 30, 3)]
    dense, scale, new_size = flow.nn.image.Resize(target_size=(16, 12))(images)
    assert dense.shape == (3, 12, 16, 3) and dense.dtype is flow.uint8 and new_size is None
    assert scale.dtype is flow.float32 and scale.shape == (3, 2)
    out = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=8, crop_w=8, mean=[127.5], std=[127.5])(
        dense, flow.nn.CoinFlip(batch_size=3, random_seed=0)())
    assert out.shape == (3, 3, 8, 8) and out.dtype is flow.float32
    assert -1.0 <= out.numpy().min() and out.numpy().max() <= 1.0
    with pytest.raises(TypeError, match="float32"):
        flow.nn.image.normalize(std=[1.0], mean=[0.0])(images)  # OneFlow's kernel aborts on uint8
    with pytest.raises(ValueError, match="more than shape"):
        flow.nn.image.batch_align(shape=(10, 10, 3), dtype=flow.uint8, alignment=1)(images)


def test_crop_mirror_normalize_reuses_an_output_only_once_nobody_holds_it():
    """A batch's float32 output is written again by a later call once every tensor, array and view of
    it is gone (no fresh memory per batch), never while any of them is alive."""
    rng = np.random.default_rng(0)
    a, b = (flow.tensor(rng.integers(0, 256, (2, 6, 7, 3), dtype=np.uint8)) for _ in range(2))
    cmn = flow.nn.CropMirrorNormalize(color_space="RGB", crop_h=4, crop_w=5, mean=[1.0, 2.0, 3.0], std=[2.0])
    expect_a = cmn(a).numpy().copy()
    out = cmn(a)
    address, first = out.numpy().ctypes.data, weakref.ref(out.numpy())
    del out
    again = cmn(a)
    assert again.numpy() is first() and np.array_equal(again.numpy(), expect_a)
    kept = again.numpy()[1]  # a view holds the batch
    del again
    other = cmn(b)
    assert other.numpy().ctypes.data != address and np.array_equal(kept, expect_a[1])
    held = [cmn(a), cmn(b), cmn(a)]  # three alive at once: three arrays
    assert len({t.numpy().ctypes.data for t in held}) == 3
    assert np.array_equal(held[2].numpy(), expect_a) and np.array_equal(kept, expect_a[1])
    import pickle
    copy = pickle.loads(pickle.dumps(cmn))  # the spares stay behind
    assert copy._spares.items == [] and np.array_equal(copy(a).numpy(), expect_a)


def test_global_placement_is_refused():
    with pytest.raises(NotImplementedError, match="placement"):
        flow.nn.OFRecordReader("x", placement="cpu", sbp="split")


def test_tensor_buffer_to_list_of_tensors(tmp_path):
    """OneFlow's way to get the bytes of OFRecordBytesDecoder's output as dense tensors."""
    rec = record_pb2.OFRecord(feature={"b": record_pb2.Feature(bytes_list=record_pb2.BytesList(value=[b"abc"]))})
    _write_part(tmp_path / "part-0", [rec])
    buf = flow.nn.OFRecordBytesDecoder("b")(flow.nn.OFRecordReader(str(tmp_path))())
    (t,) = flow.tensor_buffer_to_list_of_tensors(buf, [(3,)], [flow.uint8])
    assert t.numpy().tobytes() == b"abc" and t.dtype is flow.uint8


def test_import_is_light():
    """Importing the compat layer loads neither Pillow, protobuf nor torch (they come with their first use)."""
    code = ("import sys, recordkit.compat.oneflow as flow; "
            "print(sorted(m for m in ('PIL', 'google.protobuf', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO / "src"))).stdout
    assert out.strip() == "[]"
