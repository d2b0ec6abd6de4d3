"""recordkit.compat.singa: SINGA 0.x job.conf input layers, checked against the input layers
configured by hand, the stores' own contents and the command line."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from recordkit.cli.main import main
from recordkit.compat import singa
from recordkit.errors import FormatError, UsageError
from recordkit.formats.singa.layers import CSVInputLayer, RecordInputLayer, mean_from_record_store
from recordkit.formats.singa.prepare import prepare_cifar10
from recordkit.formats.singa.records import encode_image_record, encode_mean_record, wrap_v01_record
from test_singa_prepare import make_cifar

# SINGA 0.3's examples/cifar10/job.conf, trimmed to a few non-input layers, batch sizes made small
CIFAR_JOB = """\
name: "cifar10-convnet"
train_steps: 1000
test_steps: 100
test_freq: 300
disp_freq: 30
train_one_batch {
  alg: kBP
}
updater {
  type: kSGD
  weight_decay: 0.004
  learning_rate {
    type: kFixedStep
    fixedstep_conf: {
      step: 0
      step_lr: 0.001
    }
  }
}
neuralnet {
  layer {
    name: "data"
    type: kRecordInput
    store_conf {
      backend: "kvfile"
      path: "examples/cifar10/train_data.bin"
      mean_file: "examples/cifar10/image_mean.bin"
      batchsize: 4
      random_skip: 5
      shape: 3
      shape: 32
      shape: 32
      std_value: 127.5
    }
    include: kTrain
  }
  layer {
    name: "data"
    type: kRecordInput
    store_conf {
      backend: "kvfile"
      path: "examples/cifar10/test_data.bin"
      mean_file: "examples/cifar10/image_mean.bin"
      batchsize: 2
      shape: 3
      shape: 32
      shape: 32
    }
    include: kTest
  }
  layer {
    name: "conv1"
    type: kCConvolution
    srclayers: "data"
    convolution_conf {
      num_filters: 32
      kernel: 5
      stride: 1
      pad:2
    }
    param {
      name: "w1"
      init {
        type:kGaussian
        std:0.0001
      }
    }
  }
  layer {
    name: "loss"
    type: kSoftmaxLoss
    softmaxloss_conf { topk: 1 }
    srclayers: "conv1"
    srclayers: "data"
  }
}
cluster {
  nworker_groups: 1
  nserver_groups: 1
  workspace: "examples/cifar10"
}
"""


@pytest.fixture
def cifar(tmp_path):
    src, images = make_cifar(tmp_path, per_batch=3, test=2, seed=3)
    prepare_cifar10(src, tmp_path / "examples" / "cifar10", progress=False)
    (tmp_path / "job.conf").write_text(CIFAR_JOB)
    return tmp_path, images


def kv_pairs(path):
    with singa.Open(str(path), singa.Mode.kRead, "kvfile") as store:
        return list(store)


def test_cifar10_job_conf_gives_its_two_input_layers_with_phases_and_store_settings(cifar):
    root, _ = cifar
    job = singa.load_job_conf(root / "job.conf", root=root)
    assert job.name == "cifar10-convnet"
    assert [l.get("name") for l in job.layers] == ["data", "data", "conv1", "loss"]
    train, test = job.input_layers
    assert (train.type, train.backend, train.batchsize, train.random_skip, train.shape, train.std_value) == (
        "kRecordInput", "kvfile", 4, 5, (3, 32, 32), 127.5)
    assert train.path == str(root / "examples/cifar10/train_data.bin")
    assert train.mean_file == str(root / "examples/cifar10/image_mean.bin")
    assert train.include == ("kTrain",) and train.in_phase("train") and not train.in_phase("kTest")
    assert test.path.endswith("test_data.bin") and test.batchsize == 2 and test.random_skip == 0
    assert job.layer(phase="test") is test and job.layer(phase="kTrain") is train
    assert (train.where.line, train.where.column) == (position(CIFAR_JOB, "layer {\n    name: \"data\"")[0], 9)
    assert CIFAR_JOB.splitlines()[train.where.line - 1] == "  layer {"  # where its message opens


def test_batch_iterator_matches_the_record_input_layer_configured_by_hand(cifar):
    root, images = cifar
    layer = singa.load_job_conf(root / "job.conf", root=root).layer(phase="train")
    got = list(layer.batches(seed=11, num_batches=6))
    train = kv_pairs(root / "examples/cifar10/train_data.bin")
    mean = mean_from_record_store(kv_pairs(root / "examples/cifar10/image_mean.bin"), (3, 32, 32))
    by_hand = RecordInputLayer(train, 4, (3, 32, 32), random_skip=5, seed=11, mean=mean, std_value=127.5,
                               num_batches=6)
    expected = list(by_hand)
    assert len(got) == len(expected) == 6
    for (x, y), (ex, ey) in zip(got, expected):
        assert np.array_equal(x, ex) and np.array_equal(y, ey)
    # and the values are the CIFAR pixels, normalised: check the first record after the skip by hand
    skipped = by_hand.skipped
    labels = np.concatenate([images[f"data_batch_{i}.bin"][0] for i in range(1, 6)])
    pixels = np.concatenate([images[f"data_batch_{i}.bin"][1] for i in range(1, 6)])
    first = skipped % 15
    assert got[0][1][0] == labels[first]
    want = (pixels[first].reshape(3, 32, 32).astype(np.float32) - mean) / np.float32(127.5)
    assert np.array_equal(got[0][0][0], want)


def test_minibatch_source_delivers_the_same_normalised_features_as_the_layer(cifar):
    root, _ = cifar
    layer = singa.load_job_conf(root / "job.conf", root=root).layer(phase="train")
    layer.random_skip = 0  # the engine reads from the first record; compare like with like
    batches = list(layer.batches(num_batches=3))  # 12 of the 15 records, in store order
    with layer.minibatch_source(max_sweeps=1) as source:
        mb = source.next_minibatch(12)
    feats = mb.streams["features"].data.reshape(12, 3, 32, 32)
    assert np.array_equal(feats, np.concatenate([b[0] for b in batches]))
    assert mb.streams["label"].data.reshape(-1).astype(int).tolist() == np.concatenate(
        [b[1] for b in batches]).tolist()


CSV_JOB = """\
# a SINGA 0.3 MLP over CSV features
neuralnet {
  layer {
    name: "csv"
    type: kCSVInput
    store_conf {
      backend: "textfile"
      path: "train.csv"
      batchsize: 3
      shape: 4
      mean_value: 1.5
      std_value: 2.0
      separator: ";"
    }
    exclude: kTest
  }
  layer { name: "csv_test" type: kCSVInput
          store_conf { path: "test.csv" batchsize: 2 shape: 4 has_label: false } include: kTest }
}
"""


@pytest.fixture
def csv_job(tmp_path):
    rows = [(i % 3, [i, i + 0.5, -i, 2 * i]) for i in range(7)]
    (tmp_path / "train.csv").write_text("".join(f"{lab};" + ";".join(map(str, v)) + "\n" for lab, v in rows))
    (tmp_path / "test.csv").write_text("1,2,3,4\n5,6,7,8\n")
    (tmp_path / "job.conf").write_text(CSV_JOB)
    return tmp_path, rows


def test_csv_input_layer_batches_match_the_csv_layer_by_hand_and_wrap_mid_batch(csv_job):
    root, rows = csv_job
    job = singa.load_job_conf(root / "job.conf", root=root)
    layer = job.layer(phase="train")
    assert (layer.name, layer.separator, layer.backend, layer.exclude) == ("csv", ";", "textfile", ("kTest",))
    got = list(layer.batches(num_batches=4))  # 12 records from 7: the store wraps inside batch 3
    lines = (root / "train.csv").read_bytes().splitlines()
    expected = list(CSVInputLayer(list(enumerate(lines)), 3, (4,), separator=";", mean_value=1.5, std_value=2.0,
                                  num_batches=4))
    for (x, y), (ex, ey) in zip(got, expected):
        assert np.array_equal(x, ex) and np.array_equal(y, ey)
    order = [i % 7 for i in range(12)]
    assert np.concatenate([y for _, y in got]).tolist() == [rows[i][0] for i in order]
    assert np.array_equal(got[2][0][1], (np.array(rows[7 % 7][1], np.float32) - 1.5) / 2)
    # the unlabelled test layer: backend defaults to textfile, labels read as 0
    test = job.layer("csv_test", "test")
    x, y = next(iter(test.batches()))
    assert x.tolist() == [[1, 2, 3, 4], [5, 6, 7, 8]] and y.tolist() == [0, 0]
    with test.minibatch_source(max_sweeps=1) as source:
        assert [s.name for s in source.streams] == ["features"]


def test_csv_minibatch_source_normalises_like_the_layer(csv_job):
    root, rows = csv_job
    layer = singa.load_job_conf(root / "job.conf", root=root).layer("csv")
    with layer.minibatch_source(max_sweeps=1) as source:
        mb = source.next_minibatch(7)
    want = (np.array([v for _, v in rows], np.float32) - np.float32(1.5)) / np.float32(2)
    assert np.array_equal(mb.streams["features"].data.reshape(7, 4), want)


SHARD_JOB = """\
name: "cifar10-convnet-0.1"
alg: kBackPropagation
neuralnet {
  partition_type: kDataPartition
  layer {
    name: "data"
    type: kShardData
    sharddata_conf {
      path: "shard/train"
      batchsize: 2
    }
    exclude: kTest
  }
  layer {
    name: "rgb"
    type: kRGBImage
    srclayers: "data"
    rgbimage_conf {
      meanfile: "shard/image_mean.bin"
      scale: 0.5
    }
  }
  layer {
    name: "label"
    type: kLabel
    srclayers: "data"
  }
}
"""


def test_shard_data_0_1_form_reads_wrapped_records_with_the_rgb_layers_mean_and_scale(tmp_path):
    rng = np.random.default_rng(4)
    pixels = rng.integers(0, 256, (5, 3, 2, 2), dtype=np.uint8)
    mean = rng.random((3, 2, 2), dtype=np.float32) * 200
    (tmp_path / "shard" / "train").mkdir(parents=True)
    with singa.open(tmp_path / "shard" / "train" / "shard.dat", "create", "kvfile") as store:
        for i in range(5):
            store.write(b"%05d" % i, wrap_v01_record(encode_image_record(i, pixels[i])))
    (tmp_path / "shard" / "image_mean.bin").write_bytes(encode_mean_record(mean))  # 0.1: a bare record file
    (tmp_path / "job.conf").write_text(SHARD_JOB)
    layer = singa.load_job_conf(tmp_path / "job.conf", root=tmp_path).layer(phase="train")
    assert (layer.type, layer.parser_layer, layer.std_value, layer.shape) == ("kShardData", "rgb", 2.0, None)
    (x0, y0), (x1, y1), (x2, y2) = itertools.islice(layer.batches(), 3)
    assert y0.tolist() == [0, 1] and y1.tolist() == [2, 3] and y2.tolist() == [4, 0]
    assert np.array_equal(x1[1], (pixels[3].astype(np.float32) - mean) / np.float32(2.0))
    with layer.minibatch_source(max_sweeps=1) as source:
        mb = source.next_minibatch(5)
    assert np.array_equal(mb.streams["features"].data.reshape(5, 3, 2, 2),
                          (pixels.astype(np.float32) - mean) / np.float32(2.0))


def test_mnist_0_1_parser_layer_becomes_mean_and_std():
    job = singa.parse_job_conf("""
        layer { name: "data" type: kShardData sharddata_conf { path: "examples/mnist/mnist_train_shard"
                batchsize: 64 random_skip: 5000 } exclude: kTest partition_dim: 0 }
        layer { name: "mnist" type: kMnist srclayers: "data" mnist_conf { norm_a: 127.5 norm_b: 1 } }
        layer { name: "label" type: kLabel srclayers: "data" }""")
    layer = job.layer()
    # x / 127.5 - 1 == (x - 127.5) / 127.5
    assert (layer.mean_value, layer.std_value, layer.partition_dim, layer.random_skip) == (127.5, 127.5, 0, 5000)


def test_partition_dim_0_splits_the_batch_among_the_workers(cifar):
    root, _ = cifar
    text = CIFAR_JOB.replace("    include: kTrain", "    include: kTrain\n    partition_dim: 0")
    layer = singa.parse_job_conf(text, root=root).layer(phase="train")
    assert layer.partition_dim == 0
    x, _ = next(iter(layer.batches(num_partitions=2)))
    assert x.shape == (2, 3, 32, 32)


def position(text: str, marker: str) -> tuple[int, int]:
    """1-based line and column of the first ``marker`` in ``text`` (ASCII texts here)."""
    at = text.index(marker)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


@pytest.mark.parametrize("text, marker, message", [
    ('layer {\n  name: "d"\n  type: kRecordInput\n  store_conf {\n    path: "x"  batch_size: 4\n  }\n}\n',
     "batch_size", "unknown field 'batch_size' in store_conf (did you mean 'batchsize'?)"),
    ('name: "j"\nneuralnet {\n  layer { name: "d" colour: 3 }\n}\n', "colour", "unknown field 'colour' in layer"),
    ('neuralnet { lyer { } }\n', "lyer", "unknown field 'lyer' in neuralnet (did you mean 'layer'?)"),
    ('layer { name: "d" sharddata_conf { path: "p" batchsize: 1 skip: 3 } }\n', "skip",
     "unknown field 'skip' in sharddata_conf (known: batchsize, path, random_skip)"),
    ('nueralnet { }\n', "nueralnet", "unknown field 'nueralnet' in the job configuration"),
    ('layer { name: "d" include: kTraining }\n', "kTraining", "'include' takes one of kUnknown, kTrain"),
    ('layer { name: "d" exclude: kTset }\n', "kTset", "found 'kTset' (did you mean 'kTest'?)"),
    ('layer { name: "d" store_conf { shape: 3.5 } }\n', "3.5", "'shape' takes an integer"),
    ('layer { name: "d" store_conf { path: x } }\n', "x }", "'path' takes a quoted string"),
    ('layer { name: "d" name: "e" }\n', 'name: "e"', "'name' is given twice in layer (first at line 1, column 9)"),
    ('layer { name: "d" store_conf: 3 }\n', "store_conf", "'store_conf' in layer is a message"),
    ('layer { name: "d }\n', '"d', "unterminated string"),
    ('layer { name "d" }\n', '"d"', "expected ':' or '{' after the field name 'name'"),
    ('layer { name: "d" } }\n', "} }\n"[2:], "expected a field name, found '}'"),
])
def test_unknown_fields_and_syntax_errors_are_located(text, marker, message):
    line, column = position(text, marker)
    with pytest.raises(FormatError) as err:
        singa.parse_job_conf(text, "job.conf")
    assert (err.value.line, err.value.column) == (line, column) and message in err.value.message, err.value
    assert str(err.value).startswith(f"job.conf:{line}:{column}: ")


def test_an_unclosed_message_is_reported_at_the_end_with_its_opening_brace():
    with pytest.raises(FormatError) as err:
        singa.parse_job_conf('neuralnet {\n  layer {\n    name: "d"\n  }\n', "job.conf")
    assert (err.value.line, err.value.column) == (5, 1)
    assert "expected '}' to close the message opened at line 1, column 11" in err.value.message


def test_missing_settings_are_reported_at_the_layer():
    with pytest.raises(FormatError, match="store_conf of layer 'd' has no shape") as err:
        singa.parse_job_conf('\n layer { name: "d" type: kRecordInput\n store_conf { backend: "kvfile" path: "p" } }')
    assert (err.value.line, err.value.column) == (3, 2)  # its store_conf
    with pytest.raises(FormatError, match="has no sharddata_conf"):
        singa.parse_job_conf('layer { name: "d" type: kShardData }')


def test_text_format_variants_parse_like_protobuf():
    job = singa.parse_job_conf("""
        layer < name: 'da' "ta"  type: kRecordInput ; include: [kTrain, kVal]
          store_conf: { backend: "binfile", path: "a\\x2fb.bin" shape: [1, 2] batchsize: 0x10 std_value: 2 } >
        layer { name: "other" type: kUserLayer user_type: "kMine" [singa.mine_conf] { x: 1 } }""")
    layer = job.layer("data")
    assert layer.include == ("kTrain", "kVal") and layer.shape == (1, 2) and layer.batchsize == 16
    assert layer.path == "a/b.bin" and layer.backend == "binfile" and layer.std_value == 2.0


def test_layer_selection_errors_name_the_choices(cifar):
    root, _ = cifar
    job = singa.load_job_conf(root / "job.conf", root=root)
    with pytest.raises(UsageError, match="no input layer named 'conv1'"):
        job.layer("conv1")
    with pytest.raises(UsageError, match="no input layer .* in phase kDeploy"):
        job.layer(phase="deploy")
    with pytest.raises(UsageError, match="phase 'sideways'"):
        job.layer(phase="sideways")


def test_store_api_names_are_reachable_from_the_module(tmp_path):
    path = str(tmp_path / "s.bin")
    store = singa.Open(path, singa.Mode.kCreate, "kvfile")
    assert store.Write(b"k", b"v")
    store.Close()
    with singa.CreateStore("kvfile")(path, singa.Mode.kRead) as store:
        assert store.Read() == (b"k", b"v")
    assert set(singa.STORES) == {"kvfile", "binfile", "textfile"} and singa.KVFileStore is type(store)


def test_read_singa_conf_end_to_end(cifar, capsys, monkeypatch):
    root, _ = cifar
    monkeypatch.chdir(root)  # SINGA resolved store paths against where it was started
    assert main(["read", "--singa-conf", "job.conf", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["samples"], out["minibatches"], out["singa_layer"]) == (15, 4, "data")  # batchsize 4: 4+4+4+3
    assert main(["read", "--singa-conf", str(root / "job.conf"), "--phase", "test", "--mb-size", "1",
                 "--singa-root", str(root), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["samples"], out["minibatches"]) == (2, 2)


def test_read_singa_conf_usage_errors(cifar, capsys, monkeypatch):
    root, _ = cifar
    monkeypatch.chdir(root)
    with pytest.raises(SystemExit) as exc:
        main(["read", "--singa-conf", "job.conf", "examples/cifar10/train_data.bin"])
    assert exc.value.code == 2 and "not allowed with --singa-conf" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["read", "--singa-conf", "job.conf", "--stream", "x=dense:3"])
    assert exc.value.code == 2 and "--stream: not allowed with --singa-conf" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["read", "--mb-size", "2"])
    assert exc.value.code == 2 and "PATH" in capsys.readouterr().err
    code = main(["read", "--singa-conf", "job.conf", "--layer", "conv1"])
    assert code == 2 and "no input layer named 'conv1'" in capsys.readouterr().err
    (root / "bad.conf").write_text('neuralnet {\n  layer { name: "d" typo: 1 }\n}\n')
    code = main(["read", "--singa-conf", "bad.conf"])
    assert code != 0 and "bad.conf:2:21: unknown field 'typo'" in capsys.readouterr().err


def test_a_layer_name_shared_by_the_train_and_test_layers_is_told_apart_by_phase(cifar):
    root, _ = cifar
    job = singa.load_job_conf(root / "job.conf", root=root)
    train, test = job.input_layers
    assert job.layer("data") is train and job.layer("data", "test") is test and job.layer("data", "kTrain") is train
    with pytest.raises(UsageError, match=r"'data' is not in phase kDeploy \(its phases: kTrain; kTest\)"):
        job.layer("data", "deploy")
    csv = singa.parse_job_conf(CSV_JOB)
    assert csv.layer("csv_test").name == "csv_test"  # a test-only layer by name needs no --phase


@pytest.mark.parametrize("setting, marker, message", [
    ("batchsize: 0", "0", "'batchsize' must be at least 1"),
    ("shape: -3", "-3", "'shape' must be at least 1"),
    ("random_skip: -1", "-1", "'random_skip' must not be negative"),
    ('separator: ""', '""', "'separator' must not be empty"),
    ("std_value: 0.0", "0.0", "'std_value' must not be 0"),
])
def test_values_singa_would_abort_on_are_located(setting, marker, message):
    text = f'layer {{ name: "d" type: kCSVInput\n  store_conf {{ path: "p" shape: 2 {setting} }} }}\n'
    line, column = position(text, " " + marker + " ")
    with pytest.raises(FormatError) as err:
        singa.parse_job_conf(text, "job.conf")
    assert (err.value.line, err.value.column) == (line, column + 1) and message in err.value.message


def test_a_shape_that_does_not_fit_the_records_is_an_error_naming_both(cifar):
    root, _ = cifar
    text = CIFAR_JOB.replace("shape: 3\n", "shape: 1\n", 1)
    layer = singa.parse_job_conf(text, root=root).layer()
    with pytest.raises(FormatError, match=r"image_mean.bin: mean/std record has 3072 data values, shape \[1, 32, 32\]"):
        layer.deserializer()
    layer.mean_file = None
    with pytest.raises(FormatError, match=r"the records hold 3072 values, the configured shape \[1, 32, 32\]"):
        layer.deserializer()
    with pytest.raises(FormatError, match=r"record pixel has 3072 values, the configured shape \[1, 32, 32\]"):
        next(iter(layer.batches()))


def test_mutated_job_confs_fail_only_with_located_errors():
    """Seeded random edits of a real job.conf: each parses or fails with a FormatError/UsageError
    that has a line and column (never an IndexError, RecursionError, ...)."""
    rng = np.random.default_rng(17)
    alphabet = list('{}<>:;,[]"\'#\\-.0123456789abcxyz_ \n\t') + ["kTrain", "store_conf", "layer", "\u00e9"]
    located = 0
    for _ in range(1500):
        chars = list(CIFAR_JOB)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(chars)))
            op = rng.integers(0, 3)
            if op == 0:
                del chars[at]
            elif op == 1:
                chars.insert(at, alphabet[int(rng.integers(0, len(alphabet)))])
            else:
                chars[at] = alphabet[int(rng.integers(0, len(alphabet)))]
        try:
            singa.parse_job_conf("".join(chars), "m.conf")
        except FormatError as e:
            assert e.line is not None and e.column is not None and e.line >= 1 and e.column >= 1, e
            located += 1
        except UsageError:
            pass
    assert located > 500  # most edits break something, and those are located
    with pytest.raises(FormatError, match="nested more than 100 deep"):
        singa.parse_job_conf("a {" * 5000)


# SINGA 0.1's job forms, as its examples wrote them before and at the 0.1 release
V01_PREFETCH_JOB = """\
cluster {
  nworker_groups: 1
}
model {
  name: "cifar10-convnet"
  alg: kBackPropagation
  neuralnet {
  layer {
    name: "prefetch"
    type: "kPrefetch"
    sublayers {
      name: "data"
      type: "kShardData"
      data_param {
        path: "shard/train"
        batchsize: 2
      }
    }
    sublayers {
      name: "rgb"
      type: "kRGBImage"
      srclayers: "data"
      rgbimage_param { meanfile: "shard/image_mean.bin" }
    }
    exclude: kTest
  }
  layer {
    name: "conv1"
    type: "kConvolution"
    srclayers: "prefetch"
    datablob: "rgb"
    convolution_param { num_filters: 32 kernel: 5 }
  }
  layer {
    name: "lmdb"
    type: "kLMDBData"
    data_param { path: "cifar10_test_lmdb" batchsize: 100 }
    exclude: kTrain
  }
  }
}
gpu: 0
gpu: 1
"""


def test_0_1_model_form_with_prefetch_sublayers_and_param_names(tmp_path):
    rng = np.random.default_rng(8)
    pixels = rng.integers(0, 256, (3, 3, 2, 2), dtype=np.uint8)
    mean = np.full((3, 2, 2), 10.0, dtype=np.float32)
    (tmp_path / "shard" / "train").mkdir(parents=True)
    with singa.open(tmp_path / "shard" / "train" / "shard.dat", "create", "kvfile") as store:
        for i in range(3):
            store.write(b"%05d" % i, wrap_v01_record(encode_image_record(i + 1, pixels[i])))
    (tmp_path / "shard" / "image_mean.bin").write_bytes(encode_mean_record(mean))
    job = singa.parse_job_conf(V01_PREFETCH_JOB, root=tmp_path)
    assert [l.get("name") for l in job.layers] == ["prefetch", "data", "rgb", "conv1", "lmdb"]
    data, lmdb = job.input_layers
    # the data sublayer takes the prefetch layer's phases; the mean comes from its kRGBImage sibling
    assert (data.type, data.exclude, data.parser_layer, data.batchsize) == ("kShardData", ("kTest",), "rgb", 2)
    assert job.layer(phase="train") is data and job.layer(phase="test") is lmdb
    x, y = next(iter(data.batches()))
    assert y.tolist() == [1, 2] and np.array_equal(x, pixels[:2].astype(np.float32) - mean)
    with pytest.raises(UsageError, match="store backend 'lmdb' is not supported"):
        lmdb.batches()


def test_development_names_of_the_0_2_input_layers_are_read(cifar):
    root, _ = cifar
    text = CIFAR_JOB.replace("type: kRecordInput", "type: kProtoRecord")
    job = singa.parse_job_conf(text, root=root)
    assert [l.type for l in job.input_layers] == ["kRecordInput", "kRecordInput"]
    assert next(iter(job.layer().batches()))[0].shape == (4, 3, 32, 32)


def test_read_singa_conf_reads_a_csv_layer_by_name(csv_job, capsys):
    root, _ = csv_job
    assert main(["read", "--singa-conf", str(root / "job.conf"), "--singa-root", str(root), "--layer", "csv",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["samples"], out["minibatches"], out["singa_layer"]) == (7, 3, "csv")  # batchsize 3: 3 + 3 + 1


def test_every_name_of_the_one_module_singa_was_still_imports_from_recordkit_compat_singa():
    import importlib
    names = {"tokens": ["Where"], "tree": ["Field", "Message", "parse_text"],
             "schema": ["ANY", "DATA_PROTO", "JOB_PROTO", "LAYER_PROTO", "MNIST_PROTO", "NET_PROTO", "PHASES",
                        "RGBIMAGE_PROTO", "STORE_PROTO"],
             "input_layer": ["InputLayer"], "job": ["INPUT_TYPES", "JobConf", "load_job_conf", "parse_job_conf"]}
    for module, public in names.items():
        defining = importlib.import_module(f"recordkit.compat.singa.{module}")
        for name in public:
            assert getattr(singa, name) is getattr(defining, name), name
    assert all(hasattr(singa, name) for name in singa.__all__)
