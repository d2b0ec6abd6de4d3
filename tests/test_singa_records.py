"""SINGA record messages (spec §5.1, §6.3) and the 0.x input-layer iterators (spec §4)."""
from __future__ import annotations

import itertools
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recordkit.errors import FormatError
from recordkit.formats.singa import records as R
from recordkit.formats.singa.layers import (CSVInputLayer, RecordInputLayer, mean_from_csv_store,
                                            mean_from_record_store, parse_csv_line)


# ---------------------------------------------------------------- wire bytes, written by hand

def test_small_record_hand_written_bytes():
    pixels = np.array([[[0, 1], [254, 255]]], dtype=np.uint8)  # shape [1, 2, 2]
    expected = bytes([0x08, 1, 0x08, 2, 0x08, 2,  # shape, unpacked: one tag per element
                      0x10, 5,                     # label
                      0x1A, 4, 0, 1, 254, 255])    # pixel
    assert R.encode_image_record(5, pixels) == expected


def test_cifar_mnist_and_mean_prefixes_from_spec():
    cifar = R.encode_image_record(7, np.full((3, 32, 32), 9, np.uint8))
    assert cifar[:11] == bytes.fromhex("08 03 08 20 08 20 10 07 1A 80 18") and len(cifar) == 3083
    mnist = R.encode_image_record(0, np.zeros((28, 28), np.uint8))
    assert mnist[:9] == bytes.fromhex("08 1C 08 1C 10 00 1A 90 06") and len(mnist) == 793  # label 0 still written
    mean = np.linspace(0, 255, 3072, dtype=np.float32).reshape(3, 32, 32)
    rec = R.encode_mean_record(mean)
    assert rec == bytes.fromhex("08 03 08 20 08 20 22 80 60") + mean.astype("<f4").tobytes()
    assert len(rec) == 12297
    assert R.wrap_v01_record(mnist)[:3] == bytes.fromhex("2A 99 06") and len(R.wrap_v01_record(mnist)) == 796


def test_negative_label_is_a_ten_byte_varint_like_cpp_int32():
    rec = R.encode_record(label=-1)
    assert rec == b"\x10" + b"\xff" * 9 + b"\x01"
    assert R.decode_record(rec)["label"] == -1


def test_image_record_v1_hand_written_bytes():
    value = R.encode_image_record_v1([3, 2, 2], [1, 2], b"\xff\xd8")
    assert value == bytes.fromhex("08 03 08 02 08 02 10 01 10 02 1A 02 FF D8")
    assert R.decode_image_record_v1(value) == {"shape": [3, 2, 2], "label": [1, 2], "pixel": b"\xff\xd8"}
    assert R.decode_image_record_v1(R.encode_image_record_v1([1], 4, b"j"))["label"] == [4]


# ---------------------------------------------------------------- decoding

@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), label=st.integers(-2 ** 31, 2 ** 31 - 1),
       seed=st.integers(0, 2 ** 32 - 1))
def test_round_trip(shape, label, seed):
    pixels = np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)
    got = R.decode_record(R.encode_image_record(label, pixels))
    assert got["shape"] == shape and got["label"] == label and got["data"] is None
    assert got["pixel"].dtype == np.uint8 and np.array_equal(got["pixel"], pixels)


def test_decode_mean_record_and_unshaped_data():
    mean = np.arange(12, dtype=np.float32).reshape(3, 2, 2) / 3
    got = R.decode_record(R.encode_mean_record(mean))
    assert got["label"] is None and got["pixel"] is None
    assert got["data"].dtype == np.float32 and np.array_equal(got["data"], mean)
    flat = R.decode_record(R.encode_record(label=1, data=[0.5, 1.5]))  # RecordOutputLayer: no shape
    assert flat["shape"] == [] and flat["data"].tolist() == [0.5, 1.5]


def test_decode_errors_name_the_place():
    with pytest.raises(FormatError) as err:
        R.decode_record(b"\x1a\x05ab", path="train_data.bin", offset=16, record="tuple 0")
    assert err.value.path == "train_data.bin" and err.value.offset == 16
    with pytest.raises(FormatError, match="needs 4"):
        R.decode_record(R.encode_record(shape=[2, 2], pixel=b"abc"))
    with pytest.raises(FormatError, match="no image"):
        R.unwrap_v01_record(b"")


def test_v01_wrapper_round_trip():
    inner = R.encode_image_record(3, np.arange(6, dtype=np.uint8).reshape(1, 2, 3))
    assert R.unwrap_v01_record(R.wrap_v01_record(inner)) == inner
    assert R.SingleLabelImageRecord.FromString(inner).label == 3  # 0.1 name, same fields


# ---------------------------------------------------------------- RecordInputLayer

def _store(labels, shape=(1, 1, 2)):
    return [(b"%05d" % i, R.encode_image_record(lab, np.full(shape, lab, np.uint8))) for i, lab in enumerate(labels)]


def test_batches_wrap_mid_batch_like_singa():
    layer = RecordInputLayer(_store([0, 1, 2]), 2, (1, 1, 2))
    labels = [b[1].tolist() for b in itertools.islice(layer, 3)]
    assert labels == [[0, 1], [2, 0], [1, 2]]
    images, lab = next(iter(RecordInputLayer(_store([0, 1, 2]), 2, (1, 1, 2), num_batches=1)))
    assert images.dtype == np.float32 and images.shape == (2, 1, 1, 2) and lab.dtype == np.int32


def test_random_skip_is_inclusive_and_applied_once():
    seen = set()
    for seed in range(200):
        layer = RecordInputLayer(_store(range(10)), 1, (1, 1, 2), random_skip=3, seed=seed)
        first = [int(b[1][0]) for b in itertools.islice(layer, 11)]
        assert 0 <= layer.skipped <= 3
        assert first[0] == layer.skipped and first[10] == first[0]  # then plain order, wrapping
        seen.add(layer.skipped)
    assert seen == {0, 1, 2, 3}
    wrapped = RecordInputLayer(_store(range(3)), 1, (1, 1, 2), random_skip=100, seed=1)
    assert int(next(iter(wrapped))[1][0]) == wrapped.skipped % 3


def test_mean_and_std_numerics():
    shape = (1, 1, 2)
    store = [(b"0", R.encode_record(shape=shape, label=4, pixel=bytes([0, 255])))]
    images, labels = next(iter(RecordInputLayer(store, 1, shape, mean_value=127.5, std_value=127.5)))
    assert images.ravel().tolist() == [-1.0, 1.0] and labels.tolist() == [4]
    mean = np.array([0.1, 0.7], np.float32).reshape(shape)
    std = np.array([3.0, 7.0], np.float32).reshape(shape)
    images, _ = next(iter(RecordInputLayer(store, 1, shape, mean=mean, std=std, std_value=5)))
    expected = (np.array([0, 255], np.float32) - mean.ravel()) / std.ravel()  # float32 like C++
    assert images.ravel().tobytes() == expected.astype(np.float32).tobytes()
    with pytest.raises(ValueError):
        RecordInputLayer(store, 1, shape, std_value=0)


def test_mean_from_image_mean_store():
    shape = (1, 2, 2)
    mean = np.array([1.5, 2.5, 3.5, 4.5], np.float32).reshape(shape)
    got = mean_from_record_store([(b"mean", R.encode_mean_record(mean))], shape)
    assert np.array_equal(got, mean)
    with pytest.raises(FormatError, match="data values"):  # pixel-only mean records are refused
        mean_from_record_store([(b"mean", R.encode_record(shape=shape, pixel=b"abcd"))], shape)
    with pytest.raises(FormatError, match="empty"):
        mean_from_record_store([], shape)


def test_data_wins_over_pixel_and_shape_is_checked():
    store = [(b"k", R.encode_record(shape=[9], label=2, pixel=b"xy", data=[0.25, -1]))]
    images, labels = next(iter(RecordInputLayer(store, 1, (2,))))  # record's own shape is ignored
    assert images.tolist() == [[0.25, -1.0]] and labels.tolist() == [2]
    with pytest.raises(FormatError, match="needs 3"):
        next(iter(RecordInputLayer(store, 1, (3,))))
    with pytest.raises(FormatError, match="empty"):
        next(iter(RecordInputLayer([], 1, (3,))))


def test_shuffle_permutes_each_pass_and_callable_sources():
    store = _store(range(8))
    layer = RecordInputLayer(lambda: iter(store), 8, (1, 1, 2), shuffle=True, seed=3)
    passes = [b[1].tolist() for b in itertools.islice(layer, 3)]
    assert all(sorted(p) == list(range(8)) for p in passes)
    assert passes[0] != list(range(8)) or passes[1] != list(range(8))
    plain = next(iter(RecordInputLayer(lambda: iter(store), 8, (1, 1, 2))))[1].tolist()
    assert plain == list(range(8))


# ---------------------------------------------------------------- CSVInputLayer

def test_csv_label_column_and_deploy():
    feats, label = parse_csv_line("3,0.5,1e2,-2", (3,))
    assert label == 3 and feats.tolist() == [0.5, 100.0, -2.0]
    feats, label = parse_csv_line("3,0.5,1e2", (3,), deploy=True)  # deploy: no label column
    assert label == 0 and feats.tolist() == [3.0, 0.5, 100.0]
    feats, label = parse_csv_line("3,0.5,1e2", (3,), has_label=False)
    assert label == 0 and feats.tolist() == [3.0, 0.5, 100.0]


def test_csv_singa_tokenizer_tolerances_and_errors():
    assert parse_csv_line("1,2,3,\n", (2,))[0].tolist() == [2.0, 3.0]     # trailing separator
    assert parse_csv_line(b"1,2,3\r", (2,))[0].tolist() == [2.0, 3.0]     # trailing CR
    assert parse_csv_line("1;2 3", (2,), separator="; ")[0].tolist() == [2.0, 3.0]  # any char splits
    # "; " are two delimiters, so "1; 2 3" has an empty field; SINGA's substr quirk turns it
    # into " 2" (parsed as 2), giving one value too many -- as the C++ code did.
    with pytest.raises(FormatError, match="extra fields"):
        parse_csv_line("1; 2 3", (2,), separator="; ")
    with pytest.raises(FormatError, match="extra fields"):
        parse_csv_line("1,2,3,4", (2,))
    with pytest.raises(FormatError, match="too few"):
        parse_csv_line("1,2", (2,))
    with pytest.raises(FormatError, match="not a float"):
        parse_csv_line("1,,2", (2,))                                     # std::stof throws
    with pytest.raises(FormatError, match="not an int32"):
        parse_csv_line("x,1,2", (2,))
    with pytest.raises(FormatError, match="not a float"):
        parse_csv_line("1,1e39,2", (2,))


def test_csv_layer_batches_and_mean():
    lines = [(str(i).encode(), f"{i},{i}.5,{2 * i}".encode()) for i in range(3)]
    mean = mean_from_csv_store(["0.5,1"], (2,))
    layer = CSVInputLayer(lines, 2, (2,), mean=mean, std_value=2)
    (a, la), (b, lb) = itertools.islice(layer, 2)
    assert la.tolist() == [0, 1] and lb.tolist() == [2, 0]
    assert a.tolist() == [[0.0, -0.5], [0.5, 0.5]] and b.tolist() == [[1.0, 1.5], [0.0, -0.5]]
    assert struct.pack("<f", a[0, 1]) == struct.pack("<f", (np.float32(0) - np.float32(1)) / np.float32(2))
