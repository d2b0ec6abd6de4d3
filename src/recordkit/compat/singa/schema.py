"""The schema: the messages that decide the data (``JobProto``/``NetProto``/``LayerProto`` field names,
``StoreProto``, 0.1's ``DataProto``/``RGBImageProto``/``MnistProto``, phases) checked strictly, the
contents of the other known messages accepted as written."""
from __future__ import annotations

from recordkit.compat.singa.tree import Field, Message, _error

# singa::Phase (job.proto 0.2-0.3); kValidation is 0.1's name of kVal.
PHASES = {"kUnknown": 0, "kTrain": 1, "kVal": 2, "kValidation": 2, "kTest": 4, "kPositive": 8, "kNegative": 16,
          "kForward": 32, "kBackward": 64, "kLoss": 128, "kDeploy": 256}


# ------------------------------------------------------------------------------------------ schema

ANY = "any"  # a known field whose contents recordkit does not need: accepted as written
_STR, _INT, _FLOAT, _BOOL = "string", "int", "float", "bool"

STORE_PROTO = {  # StoreProto (SINGA 0.2-0.3 job.proto); prefetching: 0.3 development versions
    "backend": _STR, "path": _STR, "separator": _STR, "mean_file": _STR, "std_file": _STR,
    "mean_value": _FLOAT, "std_value": _FLOAT, "batchsize": _INT, "shape": (_INT, "repeated"),
    "encoded": _BOOL, "random_skip": _INT, "has_label": _BOOL, "prefetching": _BOOL}
DATA_PROTO = {"path": _STR, "batchsize": _INT, "random_skip": _INT}  # sharddata_conf / lmdbdata_conf (0.1)
RGBIMAGE_PROTO = {"scale": _FLOAT, "cropsize": _INT, "mirror": _BOOL, "meanfile": _STR}
MNIST_PROTO = {"norm_a": _FLOAT, "norm_b": _FLOAT, "kernel": _INT, "sigma": _FLOAT, "alpha": _FLOAT,
               "beta": _FLOAT, "gamma": _FLOAT, "resize": _INT, "elastic_freq": _INT}
_PHASE = ("enum", PHASES)
_LAYER_TYPE = ("enum", None)  # any kName: layer types beyond the input ones are not recordkit's to judge

LAYER_PROTO: dict = {
    "name": _STR, "srclayers": (_STR, "repeated"), "param": (ANY, "repeated"),
    "exclude": (_PHASE, "repeated"), "include": (_PHASE, "repeated"), "type": _LAYER_TYPE, "user_type": _STR,
    "unroll_len": _INT, "unroll_conn_type": ANY, "shift": _INT, "unroll_src_conn": (_INT, "repeated"),
    "partition_dim": _INT, "partition_id": _INT, "num_partitions": _INT, "datatype": ANY,
    "share_src_blobs": ANY, "datablob": ANY,
    "store_conf": STORE_PROTO, "sharddata_conf": DATA_PROTO, "lmdbdata_conf": DATA_PROTO,
    "rgbimage_conf": RGBIMAGE_PROTO, "mnist_conf": MNIST_PROTO,
    **{name: ANY for name in (
        "argsort_conf", "convolution_conf", "concate_conf", "dummy_conf", "dropout_conf", "innerproduct_conf",
        "lrn_conf", "pooling_conf", "rbm_conf", "relu_conf", "slice_conf", "softmaxloss_conf", "split_conf",
        "gru_conf", "embedding_conf", "onehot_conf", "activation_conf", "accuracy_conf", "bm_conf",
        "char_rnn_conf", "rnn_conf", "softmax_conf", "tanh_conf", "sigmoid_conf", "euclideanloss_conf",
        "rbmvis_conf", "rbmhid_conf", "label_conf", "cudnn_conf", "imagepreprocess_conf", "rnn_dummy_conf",
        "rnnlm_conf", "word_conf", "kernel_conf", "loss_conf", "dbmbottom_conf", "dbmmiddle_conf",
        "dbmtop_conf", "inner_product_conf")},
}
LAYER_PROTO["prefetch_conf"] = {"sublayers": (LAYER_PROTO, "repeated")}  # 0.1: data layers inside a prefetch layer
# SINGA 0.1 before its release named the layer messages *_param and put a prefetch layer's sublayers in the layer
LAYER_PROTO["sublayers"] = (LAYER_PROTO, "repeated")
LAYER_PROTO.update({"data_param": DATA_PROTO, "rgbimage_param": RGBIMAGE_PROTO, "mnist_param": MNIST_PROTO})
LAYER_PROTO.update({name.replace("_conf", "_param"): ANY for name, kind in list(LAYER_PROTO.items())
                    if name.endswith("_conf") and kind == ANY})
_CONF_ALIASES = {"data_param": "sharddata_conf", "rgbimage_param": "rgbimage_conf", "mnist_param": "mnist_conf"}
NET_PROTO = {"layer": (LAYER_PROTO, "repeated"), "partition_dim": _INT, "partition_type": ANY, "unroll_len": _INT}
JOB_PROTO = {
    "neuralnet": NET_PROTO, "layer": (LAYER_PROTO, "repeated"),  # layer: a bare NetProto text is accepted too
    "partition_dim": _INT,
    **{name: ANY for name in (
        # 0.2-0.3 JobProto
        "name", "train_one_batch", "updater", "cluster", "train_steps", "disp_freq", "test_freq", "test_steps",
        "validate_freq", "validate_steps", "checkpoint_freq", "warmup_steps", "debug", "reset_param_version",
        "num_openblas_threads", "checkpoint_after", "disp_after", "test_after", "validate_after", "resume",
        "step", "id", "gpu", "valid_freq", "valid_steps",
        # 0.1 ModelProto (model.conf)
        "alg", "test_frequency", "display_frequency", "validation_frequency", "validation_steps",
        "checkpoint_frequency", "checkpoint_after_steps", "display_after_steps", "test_after_steps",
        "validate_after_steps", "warmup_steps", "hogwild", "debug", "pcd_k", "model_dir", "vis_folder",
        "visualization_frequency", "vis_step", "vis_after")},
    "checkpoint_path": (ANY, "repeated"), "gpu": (ANY, "repeated"),
}
JOB_PROTO["model"] = JOB_PROTO  # 0.1 job files: cluster { ... } model { name ... neuralnet { ... } }
_BOOLS = {"true": True, "True": True, "t": True, "1": True, "false": False, "False": False, "f": False, "0": False}


def _check(msg: Message, schema: dict, what: str) -> None:
    """Every field of ``msg`` is known to ``schema`` with a value of its type; singular ones at most once."""
    seen: dict[str, Field] = {}
    for f in msg.fields:
        spec = schema.get(f.name)
        if spec is None and f.name.startswith("["):
            spec = (ANY, "repeated")  # user extensions (SINGA: extensions 101 to 200)
        if spec is None:
            raise _error(f.where, f"unknown field '{f.name}' in {what}{_suggest(f.name, schema)}")
        repeated = isinstance(spec, tuple) and len(spec) == 2 and spec[1] == "repeated"
        kind = spec[0] if repeated else spec
        if not repeated:
            if f.name in seen:
                first = seen[f.name].where
                raise _error(f.where, f"'{f.name}' is given twice in {what} (first at line {first.line}, "
                                      f"column {first.column}) but takes one value")
            seen[f.name] = f
        _check_value(f, kind, what)


def _suggest(name: str, known) -> str:
    """`` (did you mean 'x'?)`` as BrainScript's reader says it; else the short list of what is known."""
    import difflib
    hint = difflib.get_close_matches(name, list(known), n=1, cutoff=0.75)
    if hint:
        return f" (did you mean '{hint[0]}'?)"
    return f" (known: {', '.join(sorted(known))})" if len(known) <= 20 else ""


def _check_value(f: Field, kind, what: str) -> None:
    if kind == ANY:
        return
    if isinstance(kind, dict):
        if f.kind != "message":
            raise _error(f.where, f"'{f.name}' in {what} is a message: write {f.name} {{ ... }}")
        _check(f.value, kind, f.name)
        return
    if f.kind == "message":
        raise _error(f.where, f"'{f.name}' in {what} takes a value, not a message")
    if kind == _STR:
        if f.kind != "string":
            raise _error(f.value_where, f"'{f.name}' takes a quoted string, found {f.value!r}")
    elif kind == _INT:
        if f.kind != "number" or not isinstance(f.value, int):
            raise _error(f.value_where, f"'{f.name}' takes an integer, found {f.value!r}")
    elif kind == _FLOAT:
        if f.kind != "number":
            raise _error(f.value_where, f"'{f.name}' takes a number, found {f.value!r}")
        f.value = float(f.value)
    elif kind == _BOOL:
        key = str(f.value) if f.kind != "string" else None
        if key not in _BOOLS:
            raise _error(f.value_where, f"'{f.name}' takes true or false, found {f.value!r}")
        f.value = _BOOLS[key]
    elif isinstance(kind, tuple) and kind[0] == "enum":
        names = kind[1]
        if names is None:  # SINGA 0.1's LayerProto.type was a string: "kShardData"
            if f.kind not in ("ident", "string"):
                raise _error(f.value_where, f"'{f.name}' takes a layer type such as kRecordInput, found {f.value!r}")
        elif f.kind == "number" and isinstance(f.value, int) and f.value in names.values():
            f.value = next(k for k, v in names.items() if v == f.value)
        elif f.kind != "ident" or f.value not in names:
            hint = _suggest(str(f.value), names) if f.kind == "ident" else ""
            hint = hint if "did you mean" in hint else ""
            raise _error(f.value_where, f"'{f.name}' takes one of {', '.join(names)}, found {f.value!r}{hint}")
