"""SINGA create_data re-creations (spec §5.2, §5.3), checked byte for byte.

The expected files are re-derived here from the spec alone: KVFile tuples packed with
``struct "<Q"``, record bytes spelled out tag by tag, the mean as exact sums / count in
float32 — none of it goes through recordkit's encoders.
"""
from __future__ import annotations

import gzip
import struct

import numpy as np
import pytest

from recordkit.errors import FormatError
from recordkit.formats.singa.layers import RecordInputLayer, mean_from_record_store
from recordkit.formats.singa.prepare import prepare_cifar10, prepare_mnist
from recordkit.formats.singa.records import decode_record

CIFAR_ROW = 3073


def kv(key: bytes, value: bytes) -> bytes:
    return struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value


def read_kv(path):
    """Independent KVFile reader for the checks."""
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        (n,) = struct.unpack_from("<Q", data, pos)
        key = data[pos + 8:pos + 8 + n]
        pos += 8 + n
        (m,) = struct.unpack_from("<Q", data, pos)
        out.append((key, data[pos + 8:pos + 8 + m]))
        pos += 8 + m
    assert pos == len(data)
    return out


def make_cifar(tmp_path, per_batch=3, test=2, seed=0):
    rng = np.random.default_rng(seed)
    src = tmp_path / "cifar-10-batches-bin"
    src.mkdir()
    images = {}
    for name, n in [(f"data_batch_{i}.bin", per_batch) for i in range(1, 6)] + [("test_batch.bin", test)]:
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        pixels = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        pixels[0, :5] = 255  # make sure high (unsigned) bytes are in the mean
        (src / name).write_bytes(np.concatenate([labels[:, None], pixels], axis=1).tobytes())
        images[name] = (labels, pixels)
    return src, images


def cifar_value(label: int, pixels: np.ndarray) -> bytes:
    return bytes.fromhex("08 03 08 20 08 20 10") + bytes([label]) + bytes.fromhex("1A 80 18") + pixels.tobytes()


def test_cifar10_byte_for_byte(tmp_path):
    src, images = make_cifar(tmp_path)
    out = tmp_path / "out"
    counts = prepare_cifar10(src, out, progress=False)
    train = [images[f"data_batch_{i}.bin"] for i in range(1, 6)]
    labels = np.concatenate([lab for lab, _ in train])
    pixels = np.concatenate([pix for _, pix in train])
    expected_train = b"".join(kv(b"%05d" % i, cifar_value(int(labels[i]), pixels[i])) for i in range(15))
    assert (out / "train_data.bin").read_bytes() == expected_train
    assert len(expected_train) == 15 * 3104
    tl, tp = images["test_batch.bin"]
    assert (out / "test_data.bin").read_bytes() == b"".join(
        kv(b"%05d" % i, cifar_value(int(tl[i]), tp[i])) for i in range(2))
    mean = (pixels.astype(np.float64).sum(axis=0).astype(np.float32) / np.float32(15)).astype("<f4")
    expected_mean = kv(b"mean", bytes.fromhex("08 03 08 20 08 20 22 80 60") + mean.tobytes())
    assert (out / "image_mean.bin").read_bytes() == expected_mean and len(expected_mean) == 12317
    assert counts == {str(out / "train_data.bin"): 15, str(out / "image_mean.bin"): 1,
                      str(out / "test_data.bin"): 2}
    assert not [p.name for p in out.iterdir() if p.name.endswith(".part")]


def test_cifar10_read_back_through_records_and_layer(tmp_path):
    src, images = make_cifar(tmp_path, per_batch=2, test=1, seed=5)
    out = tmp_path / "out"
    prepare_cifar10(src, out, progress=False)
    tuples = read_kv(out / "train_data.bin")
    labels, pixels = images["data_batch_1.bin"]
    rec = decode_record(tuples[1][1])
    assert tuples[1][0] == b"00001" and rec["label"] == labels[1] and rec["shape"] == [3, 32, 32]
    assert np.array_equal(rec["pixel"], pixels[1].reshape(3, 32, 32)) and rec["data"] is None
    mean = mean_from_record_store(read_kv(out / "image_mean.bin"), (3, 32, 32))
    batch, lab = next(iter(RecordInputLayer(tuples, 4, (3, 32, 32), mean=mean)))
    assert lab.tolist() == [int(x) for x in np.concatenate([labels, images["data_batch_2.bin"][0]])]
    assert np.array_equal(batch[0], pixels[0].reshape(3, 32, 32).astype(np.float32) - mean)


def test_cifar10_mean_accumulates_in_float32_like_cpp(tmp_path):
    # 2 images of 255 per file -> float32 sum 2550, / 10; check against float32 arithmetic.
    src = tmp_path / "src"
    src.mkdir()
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        (src / name).write_bytes((bytes([1]) + bytes([255]) * 3072) * 2)
    prepare_cifar10(src, tmp_path / "o", progress=False)
    value = read_kv(tmp_path / "o" / "image_mean.bin")[0][1]
    assert np.frombuffer(value[9:], "<f4")[0] == np.float32(2550) / np.float32(10) == 255


def test_cifar10_input_errors(tmp_path):
    src, _ = make_cifar(tmp_path)
    bad = src / "data_batch_3.bin"
    bad.write_bytes(bad.read_bytes()[:-10])
    with pytest.raises(FormatError) as err:
        prepare_cifar10(src, tmp_path / "out", progress=False)
    assert err.value.path == str(bad) and err.value.offset == 2 * CIFAR_ROW
    assert not (tmp_path / "out").exists()  # validated before writing anything
    bad.unlink()
    with pytest.raises(FormatError, match="missing"):
        prepare_cifar10(src, tmp_path / "out", progress=False)
    bad.write_bytes(bytes([10]) + bytes(3072))
    with pytest.raises(FormatError, match="not a CIFAR-10 class") as err:
        prepare_cifar10(src, tmp_path / "out", progress=False)
    assert err.value.offset == 0
    assert not (tmp_path / "out" / "train_data.bin").exists()  # the half-written store was discarded


# ---------------------------------------------------------------- MNIST

def make_mnist(tmp_path, n_train=3, n_test=2, rows=28, cols=28, seed=1, gz=False):
    rng = np.random.default_rng(seed)
    src = tmp_path / "mnist"
    src.mkdir()
    data = {}
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        pixels = rng.integers(0, 256, (n, rows, cols), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        files = {f"{prefix}-images-idx3-ubyte": struct.pack(">IIII", 2051, n, rows, cols) + pixels.tobytes(),
                 f"{prefix}-labels-idx1-ubyte": struct.pack(">II", 2049, n) + labels.tobytes()}
        for name, blob in files.items():
            if gz:
                (src / (name + ".gz")).write_bytes(gzip.compress(blob))
            else:
                (src / name).write_bytes(blob)
        data[prefix] = (labels, pixels)
    return src, data


def mnist_value(label, pixels, rows=28, cols=28):
    head = bytes([0x08, rows, 0x08, cols, 0x10, label, 0x1A])
    n = rows * cols
    length = bytes([n]) if n < 128 else bytes([(n & 0x7F) | 0x80, n >> 7])
    return head + length + pixels.tobytes()


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_byte_for_byte(tmp_path, gz):
    src, data = make_mnist(tmp_path, gz=gz)
    out = tmp_path / "out"
    counts = prepare_mnist(src, out, progress=False)
    for prefix, name in (("train", "train_data.bin"), ("t10k", "test_data.bin")):
        labels, pixels = data[prefix]
        expected = b"".join(kv(b"%08d" % i, mnist_value(int(labels[i]), pixels[i])) for i in range(len(labels)))
        assert (out / name).read_bytes() == expected
        assert len(expected) == 817 * len(labels)
        assert counts[str(out / name)] == len(labels)
    assert not (out / "image_mean.bin").exists()
    assert mnist_value(3, np.zeros((28, 28), np.uint8))[:9] == bytes.fromhex("08 1C 08 1C 10 03 1A 90 06")


def test_mnist_uses_header_rows_and_cols(tmp_path):
    src, data = make_mnist(tmp_path, rows=4, cols=5)
    prepare_mnist(src, tmp_path / "out", progress=False)
    (key, value), *_ = read_kv(tmp_path / "out" / "train_data.bin")
    labels, pixels = data["train"]
    assert key == b"00000000" and value == mnist_value(int(labels[0]), pixels[0], 4, 5)


def test_mnist_input_errors(tmp_path):
    src, _ = make_mnist(tmp_path)
    images = src / "train-images-idx3-ubyte"
    blob = images.read_bytes()
    images.write_bytes(blob[:-100])
    with pytest.raises(FormatError, match="truncated image") as err:
        prepare_mnist(src, tmp_path / "out", progress=False)
    assert err.value.path == str(images) and err.value.offset == 16 + 2 * 784
    images.write_bytes(struct.pack(">I", 2049) + blob[4:])
    with pytest.raises(FormatError, match="magic") as err:
        prepare_mnist(src, tmp_path / "out", progress=False)
    assert err.value.offset == 0
    images.write_bytes(struct.pack(">II", 2051, 4) + blob[8:])
    with pytest.raises(FormatError, match="labels"):
        prepare_mnist(src, tmp_path / "out", progress=False)
    images.write_bytes(blob + b"x")
    with pytest.raises(FormatError, match="after the last image"):
        prepare_mnist(src, tmp_path / "out", progress=False)
    (src / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FormatError, match="missing"):
        prepare_mnist(src, tmp_path / "out2", progress=False)
    assert not (tmp_path / "out2").exists()


def test_mnist_cut_gzip_and_high_label(tmp_path):
    src, _ = make_mnist(tmp_path, gz=True)
    gz = src / "t10k-images-idx3-ubyte.gz"
    gz.write_bytes(gz.read_bytes()[:-30])
    with pytest.raises(FormatError) as err:
        prepare_mnist(src, tmp_path / "out", progress=False)
    assert err.value.path == str(gz)
    assert not (tmp_path / "out" / "test_data.bin").exists()
    labels = src / "train-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(struct.pack(">II", 2049, 3) + bytes([1, 200, 2])))
    with pytest.raises(FormatError, match="label byte 200") as err:
        prepare_mnist(src, tmp_path / "out", progress=False)
    assert err.value.offset == 9
