"""The model of a job: ``parse_job_conf``/``load_job_conf`` check a text against the schema and find
its input layers (0.1's parser layers and prefetch sublayers folded in) into a ``JobConf``."""
from __future__ import annotations

import os
from dataclasses import dataclass

from recordkit.errors import FormatError, UsageError
from recordkit.compat.singa.tree import Field, Message, _error, parse_text
from recordkit.compat.singa.schema import JOB_PROTO, _CONF_ALIASES, _check
from recordkit.compat.singa.input_layer import InputLayer, _phase

INPUT_TYPES = ("kRecordInput", "kCSVInput", "kShardData", "kLMDBData")  # kLMDBData: listed, not readable
# the development-era names of the 0.2 input layers (SINGA's examples used them for a while)
_TYPE_ALIASES = {"kProtoRecord": "kRecordInput", "kCSVRecord": "kCSVInput"}


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
