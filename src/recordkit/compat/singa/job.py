"""SINGA 0.x job configurations (``job.conf``): their input layers as iterators and sources.

A SINGA 0.1-0.3 job describes where its data comes from inside the job's ``JobProto``,
written in protobuf text format::

    neuralnet {
      layer { name: "data" type: kRecordInput
              store_conf { backend: "kvfile" path: "examples/cifar10/train_data.bin"
                           mean_file: "examples/cifar10/image_mean.bin" batchsize: 64
                           random_skip: 5000 shape: 3 shape: 32 shape: 32 }
              include: kTrain }
      ...
    }

``load_job_conf(path)`` / ``parse_job_conf(text)`` read such a text and give a ``JobConf`` whose
``input_layers`` are its ``kRecordInput`` and ``kCSVInput`` layers (0.2-0.3; their development names
``kProtoRecord``/``kCSVRecord`` too) and 0.1's ``kShardData`` layers (``sharddata_conf``, with the
``kRGBImage``/``kMnist`` parser layer that normalised their output; the 0.1 job forms
``cluster { } model { ... }``, string layer types, ``*_param`` message names and prefetch
``sublayers`` are read as well), each with its phases. ``kLMDBData`` layers are listed but refused
when read (recordkit has no LMDB store). Each ``InputLayer`` gives

* ``batches()``: SINGA's own iteration (``formats.singa.layers.RecordInputLayer`` /
  ``CSVInputLayer``: endless, ``random_skip`` once, wrap mid-batch, ``(x - mean) / std``);
* ``deserializer()`` / ``minibatch_source()``: the layer's store as a recordkit Deserializer
  (streams ``features`` and ``label``, normalised exactly as the layer does, in float32) under
  the engine's ``MinibatchSource`` (randomization, partitions, checkpoints).

Why a parser of our own rather than ``google.protobuf.text_format``: SINGA's ``job.proto`` has
many messages recordkit has no use for (updaters, convolution settings, cluster topology) and
users extended it (``extensions 101 to 200``); a descriptor of all of it would be large and
still reject real files. So the tokenizer/parser here reads the whole protobuf text syntax,
checks the messages that decide the data strictly (``JobProto``/``NetProto``/``LayerProto``
field names, ``StoreProto``, ``DataProto``, ``RGBImageProto``, ``MnistProto``, phases) and
accepts the contents of the other known messages as they are. Every problem is a
``FormatError`` at the ``file:line:column`` (1-based, columns in bytes) of the offending token,
as ``compat.brainscript`` reports.

Relative store paths are resolved against ``root`` (default: the current directory), because
SINGA resolved them against the directory it was started from (``SINGA_HOME``).

SINGA's Store API (``Open``, ``CreateStore``, ``Mode``, the store classes) is re-exported here,
so ``from recordkit.compat.singa import Open, Mode`` works like ``singa::io``.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field as _field

from recordkit.errors import FormatError, UsageError
from recordkit.formats.singa import (STORES, BinFileStore, CreateStore, KVFileStore, Mode, Open, Store,
                                     TextFileStore, open, store_class)

__all__ = ["parse_job_conf", "load_job_conf", "JobConf", "InputLayer", "INPUT_TYPES", "PHASES",
           "Mode", "Store", "Open", "open", "CreateStore", "store_class", "STORES",
           "KVFileStore", "BinFileStore", "TextFileStore"]

INPUT_TYPES = ("kRecordInput", "kCSVInput", "kShardData", "kLMDBData")  # kLMDBData: listed, not readable
# the development-era names of the 0.2 input layers (SINGA's examples used them for a while)
_TYPE_ALIASES = {"kProtoRecord": "kRecordInput", "kCSVRecord": "kCSVInput"}
# singa::Phase (job.proto 0.2-0.3); kValidation is 0.1's name of kVal.
PHASES = {"kUnknown": 0, "kTrain": 1, "kVal": 2, "kValidation": 2, "kTest": 4, "kPositive": 8, "kNegative": 16,
          "kForward": 32, "kBackward": 64, "kLoss": 128, "kDeploy": 256}
_PHASE_ALIASES = {"train": "kTrain", "test": "kTest", "val": "kVal", "validation": "kVal", "deploy": "kDeploy"}


# ------------------------------------------------------------------------------------------ tokens

@dataclass(frozen=True)
class Where:
    """Where a token was written: file name, 1-based line and byte column."""
    source: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


@dataclass(frozen=True)
class _Tok:
    kind: str        # "ident", "number", "string", "punct", "end"
    text: str        # as written (strings: the decoded value)
    where: Where


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\f\v]+|\#[^\n]*)
  | (?P<newline>\n)
  | (?P<number>[-+]?(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?)(?![\w.]))
  | (?P<ident>-?[A-Za-z_][\w.]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<punct>[{}<>:;,\[\]])
""", re.VERBOSE)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "?": "?"}


def _unescape(body: str, where: Where) -> str:
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1:])
            out.append(chr(int(m.group(), 8)))
            i += 1 + len(m.group())
        elif nxt in "xX":
            m = re.match(r"[0-9a-fA-F]{1,2}", body[i + 2:])
            if not m:
                raise FormatError(where.source, "\\x escape without hex digits", line=where.line, column=where.column)
            out.append(chr(int(m.group(), 16)))
            i += 2 + len(m.group())
        else:
            raise FormatError(where.source, f"unknown escape '\\{nxt}' in a string", line=where.line,
                              column=where.column)
    return "".join(out)


def _tokenize(text: str, source: str) -> list[_Tok]:
    toks: list[_Tok] = []
    line, line_start, at = 1, 0, 0
    if text.startswith("\ufeff"):
        at = line_start = 1
    while at < len(text):
        m = _TOKEN.match(text, at)
        where = Where(source, line, len(text[line_start:at].encode("utf-8")) + 1)
        if m is None:
            bad = text[at]
            what = "an unterminated string" if bad in "\"'" else f"unexpected character {bad!r}"
            raise FormatError(source, what, line=where.line, column=where.column)
        kind = m.lastgroup
        if kind == "newline":
            line, line_start = line + 1, m.end()
        elif kind == "string":
            toks.append(_Tok("string", _unescape(m.group()[1:-1], where), where))
        elif kind != "space":
            toks.append(_Tok(kind, m.group(), where))
        at = m.end()
    toks.append(_Tok("end", "", Where(source, line, len(text[line_start:].encode("utf-8")) + 1)))
    return toks


# ------------------------------------------------------------------------------------------ syntax tree

@dataclass
class Field:
    """One ``name: value`` or ``name { ... }`` of a message, where it was written."""
    name: str
    value: object          # str | int | float | bool | Message; enum values are their identifier (str)
    kind: str              # "string", "number", "ident", "message"
    where: Where           # the field's name
    value_where: Where | None = None  # its value (scalars)


@dataclass
class Message:
    fields: list = _field(default_factory=list)
    where: Where | None = None

    def all(self, name: str) -> list[Field]:
        return [f for f in self.fields if f.name == name]

    def get(self, name: str, default=None):
        found = self.all(name)
        return found[-1].value if found else default

    def field(self, name: str) -> Field | None:
        found = self.all(name)
        return found[-1] if found else None


def _error(where: Where, message: str) -> FormatError:
    return FormatError(where.source, message, line=where.line, column=where.column)


def _describe(tok: _Tok) -> str:
    if tok.kind == "end":
        return "the end of the file"
    if tok.kind == "string":
        return "a string"
    return f"'{tok.text}'"


class _Parser:
    """protobuf text format: ``message := (field [;|,])*``, ``field := name (':' value | [':'] '{' message '}'
    | [':'] '<' message '>')``, ``value := scalar | '[' scalar (',' scalar)* ']'``; adjacent strings join."""

    MAX_DEPTH = 100  # SINGA's deepest messages nest 4 levels; beyond this the input is not a job.conf

    def __init__(self, toks: list[_Tok]):
        self.toks = toks
        self.i = 0
        self.depth = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def message(self, closer: str | None, opener: _Tok | None) -> Message:
        msg = Message(where=opener.where if opener else None)
        while True:
            tok = self.peek()
            if tok.kind == "end":
                if closer is None:
                    return msg
                raise _error(tok.where, f"expected '{closer}' to close the message opened at line "
                                        f"{opener.where.line}, column {opener.where.column}, found the end of the file")
            if tok.kind == "punct" and tok.text == closer:
                self.take()
                return msg
            msg.fields.extend(self.field())
            sep = self.peek()
            if sep.kind == "punct" and sep.text in ";,":
                self.take()

    def field(self) -> list[Field]:
        tok = self.take()
        if tok.kind == "punct" and tok.text == "[":  # an extension: [package.name]
            name_tok = self.take()
            if name_tok.kind != "ident":
                raise _error(name_tok.where, f"expected an extension name after '[', found {_describe(name_tok)}")
            close = self.take()
            if close.kind != "punct" or close.text != "]":
                raise _error(close.where, f"expected ']' after the extension name, found {_describe(close)}")
            name = f"[{name_tok.text}]"
        elif tok.kind == "ident" and not tok.text.startswith("-"):
            name = tok.text
        else:
            raise _error(tok.where, f"expected a field name, found {_describe(tok)}")
        colon = False
        if self.peek().kind == "punct" and self.peek().text == ":":
            self.take()
            colon = True
        nxt = self.peek()
        if nxt.kind == "punct" and nxt.text in "{<":
            self.take()
            self.depth += 1
            if self.depth > self.MAX_DEPTH:
                raise _error(nxt.where, f"messages nested more than {self.MAX_DEPTH} deep")
            inner = self.message("}" if nxt.text == "{" else ">", nxt)
            self.depth -= 1
            return [Field(name, inner, "message", tok.where)]
        if not colon:
            raise _error(nxt.where, f"expected ':' or '{{' after the field name '{name}', found {_describe(nxt)}")
        if nxt.kind == "punct" and nxt.text == "[":
            self.take()
            values = []
            if self.peek().kind == "punct" and self.peek().text == "]":
                self.take()
                return values
            while True:
                values.append(self.scalar(name, tok.where))
                end = self.take()
                if end.kind == "punct" and end.text == "]":
                    return values
                if not (end.kind == "punct" and end.text == ","):
                    raise _error(end.where, f"expected ',' or ']' in the list of '{name}', found {_describe(end)}")
        return [self.scalar(name, tok.where)]

    def scalar(self, name: str, where: Where) -> Field:
        tok = self.take()
        if tok.kind == "string":
            text = tok.text
            while self.peek().kind == "string":
                text += self.take().text
            return Field(name, text, "string", where, tok.where)
        if tok.kind == "number":
            return Field(name, _number(tok), "number", where, tok.where)
        if tok.kind == "ident":
            low = tok.text.lower()
            if low in ("inf", "-inf", "infinity", "-infinity", "nan", "-nan"):
                return Field(name, float(low.replace("infinity", "inf")), "number", where, tok.where)
            return Field(name, tok.text, "ident", where, tok.where)
        raise _error(tok.where, f"expected a value for '{name}', found {_describe(tok)}")


def _number(tok: _Tok):
    text = tok.text
    body = text.lstrip("+-")
    if body[:2].lower() == "0x":
        return int(text, 16)
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    return float(text.rstrip("fF"))


def parse_text(text: str, source: str = "<job.conf>") -> Message:
    """Any protobuf text-format message as a ``Message`` tree (no schema check)."""
    return _Parser(_tokenize(text, source)).message(None, None)


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


# ------------------------------------------------------------------------------------------ the model

def _phase(name) -> str:
    """``train``/``test``/... or SINGA's ``kTrain``/``kTest``/... as SINGA's enum name."""
    if name is None:
        return None
    text = str(name)
    text = _PHASE_ALIASES.get(text.lower(), text)
    if text == "kValidation":
        text = "kVal"
    if text not in PHASES:
        raise UsageError(f"phase {name!r}: use train, test, val or deploy (or kTrain, kTest, kVal, kDeploy)")
    return text


@dataclass
class InputLayer:
    """One input layer of a job, with its store settings resolved to SINGA's defaults.

    ``shape`` is None for a 0.1 ``kShardData`` layer (its records carry their shape).
    ``scale``/``norm``: what the 0.1 parser layer (``kRGBImage``, ``kMnist``) did to the
    data layer's output; they become ``mean``/``std`` (``(x - mean) / std``).
    """
    name: str
    type: str
    backend: str
    path: str
    batchsize: int
    shape: tuple | None = None
    random_skip: int = 0
    separator: str = ","
    has_label: bool = True
    encoded: bool = False
    mean_file: str | None = None
    std_file: str | None = None
    mean_value: float | None = None
    std_value: float | None = None
    include: tuple = ()
    exclude: tuple = ()
    partition_dim: int = -1
    wrapped: bool = False            # 0.1 shard values: the image record inside a Record message
    where: Where | None = None
    parser_layer: str | None = None  # the 0.1 kRGBImage / kMnist layer that normalised this one

    def in_phase(self, phase) -> bool:
        """SINGA's rule: a layer with ``include`` is in exactly those phases; otherwise in every
        phase but its ``exclude`` ones."""
        phase = _phase(phase)
        if self.include:
            return phase in self.include
        return phase not in self.exclude

    @property
    def phases(self) -> tuple:
        return self.include or tuple(p for p in ("kTrain", "kVal", "kTest") if p not in self.exclude)

    # -- normalisation ---------------------------------------------------------------------------
    def _shape_for(self, storage_options=None) -> tuple:
        if self.shape:
            return self.shape
        first = self._first_value(storage_options)
        from recordkit.formats.singa.records import decode_record
        rec = decode_record(first, path=self.path, record="tuple 0")
        if not rec["shape"]:
            raise FormatError(self.path, f"layer '{self.name}': the first record has no shape; "
                                         "the layer needs one (SINGA 0.2+: store_conf shape)", record="tuple 0")
        return tuple(rec["shape"])

    def _first_value(self, storage_options=None) -> bytes:
        with open(self.path, "read", self.backend, storage_options=storage_options) as store:
            item = store.read()
        if item is None:
            raise FormatError(self.path, f"layer '{self.name}': the store is empty")
        return self._unwrap(item[1], 0)

    def _unwrap(self, value: bytes, index: int) -> bytes:
        if not self.wrapped:
            return value
        from recordkit.formats.singa.records import unwrap_v01_record
        return unwrap_v01_record(value, path=self.path, record=f"tuple {index}")

    def normalization(self, shape=None, storage_options=None):
        """``(mean, std)`` as float32 arrays of ``shape`` (or None): a file wins over a value, as in SINGA."""
        import numpy as np
        shape = tuple(shape or self._shape_for(storage_options))
        mean = self._load_vector(self.mean_file, shape, storage_options) if self.mean_file else None
        std = self._load_vector(self.std_file, shape, storage_options) if self.std_file else None
        if mean is None and self.mean_value is not None:
            mean = np.full(shape, self.mean_value, dtype=np.float32)
        if std is None and self.std_value is not None:
            if self.std_value == 0:
                raise UsageError(f"layer '{self.name}': std_value must not be 0")
            std = np.full(shape, self.std_value, dtype=np.float32)
        return mean, std

    def _load_vector(self, path: str, shape, storage_options):
        """A mean/std store (``LoadRecord``); for 0.1 layers also a bare serialized record file."""
        from recordkit.formats.singa.layers import mean_from_csv_store, mean_from_record_store
        if self.type == "kCSVInput":
            with open(path, "read", self.backend, storage_options=storage_options) as store:
                return mean_from_csv_store(store, shape, separator=self.separator, path=path)
        try:
            with open(path, "read", self.backend, storage_options=storage_options) as store:
                return mean_from_record_store(store, shape, path=path)
        except FormatError:
            if not self.wrapped:
                raise
        # SINGA 0.1's RGBImageLayer read meanfile with ReadProtoFromBinaryFile: one bare record
        from recordkit.formats.singa.location import StoreLocation
        with StoreLocation(path, storage_options).open_read() as f:
            return mean_from_record_store([(b"", f.read())], shape, path=path)

    # -- SINGA's iteration -----------------------------------------------------------------------
    def batches(self, *, seed=None, shuffle: bool = False, num_batches: int | None = None,
                num_partitions: int = 1, storage_options=None):
        """The layer as SINGA iterated it: a ``RecordInputLayer`` / ``CSVInputLayer`` (endless; ``num_batches``
        ends it) yielding ``(features float32 [batchsize] + shape, labels int32 [batchsize])``.

        ``num_partitions``: the workers of a group; with ``partition_dim: 0`` each reads
        ``batchsize / num_partitions`` records per batch, as SINGA's StoreInputLayer::Setup did.
        """
        from recordkit.formats.singa.layers import CSVInputLayer, RecordInputLayer
        self._check_supported()
        shape = self._shape_for(storage_options)
        mean, std = self.normalization(shape, storage_options)
        batchsize = self.batchsize
        if self.partition_dim == 0 and num_partitions > 1:
            batchsize //= num_partitions
        common = dict(random_skip=self.random_skip, shuffle=shuffle, seed=seed, mean=mean, std=std,
                      num_batches=num_batches, path=self.path)

        def pairs():
            with open(self.path, "read", self.backend, storage_options=storage_options) as store:
                for index, (key, value) in enumerate(store):
                    yield key, self._unwrap(value, index)

        if self.type == "kCSVInput":
            return CSVInputLayer(pairs, batchsize, shape, separator=self.separator, has_label=self.has_label,
                                 **common)
        return RecordInputLayer(pairs, batchsize, shape, **common)

    def _check_supported(self) -> None:
        if self.encoded:
            raise UsageError(f"layer '{self.name}': encoded (JPEG) records are not supported; decode them first "
                             "(SINGA 0.3 decoded them with OpenCV)")
        if self.backend not in STORES:
            store_class(self.backend)  # raises SINGA-worded "unknown / not supported"
        if self.batchsize < 1:
            raise UsageError(f"layer '{self.name}': batchsize must be >= 1, not {self.batchsize}")

    # -- recordkit's engine ----------------------------------------------------------------------
    def deserializer(self, *, precision="float", storage_options=None, **options):
        """The layer's store as a Deserializer: streams ``features`` (dim = prod(shape)) and ``label``
        (absent for a CSV layer with ``has_label: false``), normalised like ``batches()``."""
        import numpy as np
        from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
        self._check_supported()
        shape = self._shape_for(storage_options)
        mean, std = self.normalization(shape, storage_options)
        if self.type == "kCSVInput":
            inner = SingaCSVDeserializer(self.path, int(np.prod(shape)), separator=self.separator,
                                         has_label=self.has_label, precision=precision,
                                         storage_options=storage_options, **options)
        elif self.wrapped:
            inner = _ShardDeserializer(self.path, self.backend, precision=precision,
                                       storage_options=storage_options, **options)
        else:
            inner = SingaRecordDeserializer(self.path, self.backend, precision=precision,
                                            storage_options=storage_options, **options)
        dim = int(np.prod(shape))
        if inner.streams[0].dim != dim:
            got = inner.streams[0].dim
            inner.close()
            raise FormatError(self.path, f"layer '{self.name}': the records hold {got} values, the configured shape "
                                         f"{list(shape)} needs {dim}", record="tuple 0")
        return _Normalized(inner, mean, std) if mean is not None or std is not None else inner

    def minibatch_source(self, **kwargs):
        """``MinibatchSource`` over ``deserializer()``; ``kwargs`` go to MinibatchSource (SINGA never
        randomized, so ``randomize`` defaults to False here)."""
        from recordkit.engine.source import MinibatchSource
        kwargs.setdefault("randomize", False)
        options = {k: kwargs.pop(k) for k in ("precision", "storage_options") if k in kwargs}
        return MinibatchSource(self.deserializer(**options), **kwargs)


def _shard_deserializer_class():
    from recordkit.formats.singa.deserializer import SingaRecordDeserializer

    class ShardDeserializer(SingaRecordDeserializer):
        """A SINGA 0.1 shard: each value is a ``Record`` wrapping the image record."""

        def _decode(self, value, index):
            from recordkit.formats.singa.records import unwrap_v01_record
            return super()._decode(unwrap_v01_record(value, path=self.path, record=f"tuple {index}"), index)

    return ShardDeserializer


def _ShardDeserializer(*args, **kwargs):
    return _shard_deserializer_class()(*args, **kwargs)


class _Normalized:
    """A Deserializer whose ``features`` are ``(x - mean) / std`` in float32, as the input layer computes them
    (so ``minibatch_source()`` and ``batches()`` agree bit for bit)."""

    def __init__(self, inner, mean, std):
        import numpy as np
        self.inner = inner
        self.mean = None if mean is None else np.asarray(mean, np.float32).reshape(-1)
        self.std = None if std is None else np.asarray(std, np.float32).reshape(-1)

    def __getattr__(self, name):
        if name == "inner":  # not set yet (unpickling): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def streams(self):
        return self.inner.streams

    @property
    def chunks(self):
        return self.inner.chunks

    def _apply(self, chunk):
        import numpy as np
        from recordkit.engine.chunk import DenseColumn
        col = chunk.columns["features"]
        x = col.values.astype(np.float32)
        if self.mean is not None:
            x -= self.mean
        if self.std is not None:
            x /= self.std
        chunk.columns["features"] = DenseColumn(x.astype(col.values.dtype, copy=False), col.seq_offsets)
        return chunk

    def load_chunk(self, chunk_id, **kwargs):
        return self._apply(self.inner.load_chunk(chunk_id, **kwargs))

    def iter_chunks(self, threads: int = 1, **kwargs):
        for info in self.inner.chunks:
            yield self.load_chunk(info.id)

    def close(self):
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@dataclass
class JobConf:
    """A parsed job configuration: its ``name``, every layer's syntax tree, and the input layers."""
    source: str
    name: str | None
    layers: list            # Message per layer, in file order
    input_layers: list      # InputLayer
    partition_dim: int = 0

    def layer(self, name: str | None = None, phase=None) -> InputLayer:
        """The input layer called ``name`` (in ``phase``, when several layers share the name, as cifar10's
        train and test ``data`` layers do), or the only input layer of ``phase`` (default: kTrain)."""
        if name is not None:
            named = [layer for layer in self.input_layers if layer.name == name]
            if not named:
                raise UsageError(f"{self.source}: no input layer named '{name}' (input layers: "
                                 f"{', '.join(l.name for l in self.input_layers) or 'none'})")
            found = named if phase is None else [layer for layer in named if layer.in_phase(phase)]
            if len(named) > 1 and phase is None:
                found = [layer for layer in named if layer.in_phase("kTrain")] or named
            if not found:
                raise UsageError(f"{self.source}: input layer '{name}' is not in phase {_phase(phase)} (its phases: "
                                 f"{'; '.join(', '.join(l.phases) for l in named)})")
            if len(found) > 1:
                raise UsageError(f"{self.source}: {len(found)} input layers named '{name}'"
                                 f"{'' if phase is None else ' in phase ' + _phase(phase)}; say which phase")
            return found[0]
        phase = _phase(phase or "kTrain")
        found = [layer for layer in self.input_layers if layer.in_phase(phase)]
        if not found:
            raise UsageError(f"{self.source}: no input layer ({', '.join(INPUT_TYPES)}) in phase {phase}")
        if len(found) > 1:
            raise UsageError(f"{self.source}: {len(found)} input layers in phase {phase} "
                             f"({', '.join(l.name for l in found)}); say which (layer name)")
        return found[0]

    def batches(self, layer: str | None = None, phase=None, **kwargs):
        return self.layer(layer, phase).batches(**kwargs)

    def minibatch_source(self, layer: str | None = None, phase=None, **kwargs):
        return self.layer(layer, phase).minibatch_source(**kwargs)


def _resolve(path: str, root) -> str:
    if "://" in path or os.path.isabs(path) or root is None:
        return path
    return os.path.join(str(root), path)


def _conf(msg: Message, name: str) -> Field | None:
    """A layer's ``name`` message, or its pre-release 0.1 ``*_param`` spelling."""
    found = msg.field(name)
    if found is None:
        alias = next((old for old, new in _CONF_ALIASES.items() if new == name), None)
        found = msg.field(alias) if alias else None
    return found


def _input_layer(msg: Message, net_partition_dim: int, parsers: dict, root, source: str,
                 outer: Message | None = None) -> InputLayer | None:
    ltype = msg.get("type")
    ltype = _TYPE_ALIASES.get(ltype, ltype)
    name = msg.get("name")
    where = msg.where
    if ltype not in INPUT_TYPES:
        return None
    if name is None:
        raise _error(where, f"a {ltype} layer has no name")
    phased = msg if (msg.all("include") or msg.all("exclude") or outer is None) else outer  # 0.1 prefetch
    include = tuple(_phase(f.value) for f in phased.all("include"))
    exclude = tuple(_phase(f.value) for f in phased.all("exclude"))
    pdim = msg.get("partition_dim", -1)
    pdim = net_partition_dim if pdim == -1 else pdim
    if ltype in ("kRecordInput", "kCSVInput"):
        conf_field = msg.field("store_conf")
        if conf_field is None:
            raise _error(where, f"{ltype} layer '{name}' has no store_conf")
        conf = conf_field.value
        for required in ("path",):
            if conf.get(required) is None:
                raise _error(conf_field.where, f"store_conf of layer '{name}' has no {required}")
        _check_ranges(conf)
        shape = tuple(f.value for f in conf.all("shape"))
        if not shape:
            raise _error(conf_field.where, f"store_conf of layer '{name}' has no shape (SINGA needs it: "
                                           "shape: 3 shape: 32 shape: 32)")
        backend = conf.get("backend", "textfile" if ltype == "kCSVInput" else None)
        if backend is None:
            raise _error(conf_field.where, f"store_conf of layer '{name}' has no backend (kvfile, binfile, textfile)")
        mean_file, std_file = conf.get("mean_file"), conf.get("std_file")
        return InputLayer(
            name=name, type=ltype, backend=backend, path=_resolve(conf.get("path"), root),
            batchsize=conf.get("batchsize", 1), shape=shape, random_skip=conf.get("random_skip", 0),
            separator=conf.get("separator", ","), has_label=conf.get("has_label", True),
            encoded=conf.get("encoded", False),
            mean_file=_resolve(mean_file, root) if mean_file else None,
            std_file=_resolve(std_file, root) if std_file else None,
            mean_value=conf.get("mean_value"), std_value=conf.get("std_value"),
            include=include, exclude=exclude, partition_dim=pdim, where=where)
    # kShardData (0.1): a DataShard folder of wrapped records, normalised by the parser layer reading it
    conf_field = _conf(msg, "lmdbdata_conf" if ltype == "kLMDBData" else "sharddata_conf")
    if conf_field is None and ltype == "kLMDBData":
        conf_field = _conf(msg, "sharddata_conf")  # pre-release 0.1 used data_param for both
    if conf_field is None:
        raise _error(where, f"{ltype} layer '{name}' has no {'lmdbdata_conf' if ltype == 'kLMDBData' else 'sharddata_conf'}")
    conf = conf_field.value
    _check_ranges(conf)
    for required in ("path", "batchsize"):
        if conf.get(required) is None:
            raise _error(conf_field.where, f"sharddata_conf of layer '{name}' has no {required} (required)")
    # kLMDBData (an LMDB database) is listed, and refused when read: store_class("lmdb") says why
    layer = InputLayer(name=name, type=ltype, backend="lmdb" if ltype == "kLMDBData" else "kvfile",
                       path=_resolve(conf.get("path"), root),
                       batchsize=conf.get("batchsize"), random_skip=conf.get("random_skip", 0),
                       include=include, exclude=exclude, partition_dim=pdim, where=where, wrapped=True)
    parser = parsers.get((id(outer), name)) or parsers.get(name)
    if parser is not None:
        _apply_parser(layer, parser, root)
    return layer


def _check_ranges(conf: Message) -> None:
    """Values SINGA would have died on (CHECK failures, a division by zero), located in the file."""
    for f in conf.fields:
        bad = None
        if f.name in ("batchsize", "shape") and f.value < 1:
            bad = "must be at least 1"
        elif f.name == "random_skip" and f.value < 0:
            bad = "must not be negative"
        elif f.name == "separator" and f.value == "":
            bad = "must not be empty"
        elif f.name == "std_value" and f.value == 0:
            bad = "must not be 0 (features are divided by it)"
        if bad:
            raise _error(f.value_where or f.where, f"'{f.name}' {bad}, found {f.value!r}")


def _apply_parser(layer: InputLayer, parser: Message, root) -> None:
    """What SINGA 0.1's kRGBImage (``(x - meanfile) * scale``) or kMnist (``x / norm_a - norm_b``) did."""
    layer.parser_layer = parser.get("name")
    if parser.get("type") == "kRGBImage":
        conf = getattr(_conf(parser, "rgbimage_conf"), "value", None) or Message()
        if conf.get("cropsize", 0) or conf.get("mirror", False):
            f = conf.field("cropsize") if conf.get("cropsize", 0) else conf.field("mirror")
            raise _error(f.where, f"layer '{layer.parser_layer}': cropsize/mirror (random crops and flips) "
                                  "are not supported by recordkit's SINGA input layers")
        if conf.get("meanfile"):
            layer.mean_file = _resolve(conf.get("meanfile"), root)
        scale = conf.get("scale", 1.0)
        if scale == 0:
            raise _error(conf.field("scale").where, "scale 0 would zero every feature")
        if scale != 1.0:
            layer.std_value = 1.0 / scale
    elif parser.get("type") == "kMnist":
        conf = getattr(_conf(parser, "mnist_conf"), "value", None) or Message()
        for name in ("kernel", "resize", "elastic_freq"):
            if conf.get(name, 0):
                raise _error(conf.field(name).where, f"layer '{layer.parser_layer}': elastic distortion "
                                                     f"({name}) is not supported")
        a, b = conf.get("norm_a", 1.0), conf.get("norm_b", 0.0)
        if a == 0:
            raise _error(conf.field("norm_a").where, "norm_a must not be 0")
        # x / a - b == (x - a*b) / a
        if b:
            layer.mean_value = a * b
        if a != 1.0:
            layer.std_value = a


def _all_layers(layers: list[Field], outer: Message | None = None):
    """``(layer, enclosing prefetch layer or None)`` in file order, 0.1's prefetch sublayers included."""
    for f in layers:
        yield f.value, outer
        yield from _all_layers(f.value.all("sublayers"), f.value)
        prefetch = f.value.get("prefetch_conf")
        if prefetch is not None:
            yield from _all_layers(prefetch.all("sublayers"), f.value)


def parse_job_conf(text: str, source: str = "<job.conf>", *, root=None) -> JobConf:
    """Parse a SINGA job configuration (JobProto text, 0.1 model.conf, or just ``layer { ... }`` blocks).

    ``root``: the directory relative store paths are resolved against (default: left relative, i.e.
    the current directory, as SINGA resolved them against where it was started).
    """
    tree = parse_text(text, source)
    _check(tree, JOB_PROTO, "the job configuration")
    if tree.get("neuralnet") is None and tree.get("model") is not None:
        tree = tree.get("model")
    net = tree.get("neuralnet")
    layer_fields = (net.all("layer") if net is not None else []) + tree.all("layer")
    net_pdim = (net.get("partition_dim", 0) if net is not None else tree.get("partition_dim", 0))
    layers = list(_all_layers(layer_fields))
    parsers = {}  # data layer name (and (enclosing prefetch, name)) -> the 0.1 parser layer reading it
    for layer, outer in layers:
        if _TYPE_ALIASES.get(layer.get("type"), layer.get("type")) in ("kRGBImage", "kMnist"):
            for src in layer.all("srclayers"):
                parsers.setdefault((id(outer), src.value), layer)
                parsers.setdefault(src.value, layer)
    inputs = []
    for layer, outer in layers:
        found = _input_layer(layer, net_pdim, parsers, root, source, outer)
        if found is not None:
            inputs.append(found)
    layers = [layer for layer, _ in layers]
    return JobConf(source=source, name=tree.get("name"), layers=layers, input_layers=inputs,
                   partition_dim=net_pdim)


def load_job_conf(path, *, root=None, storage_options=None) -> JobConf:
    """``parse_job_conf`` of a file (local or an fsspec URL); errors name the file."""
    from recordkit.formats.singa.location import StoreLocation
    with StoreLocation(str(path), storage_options).open_read() as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise FormatError(str(path), f"not UTF-8 text ({e.reason})", offset=e.start) from None
    return parse_job_conf(text, str(path), root=root)
