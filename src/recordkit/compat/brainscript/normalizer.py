"""The normalizer: CNTK's reader semantics (defaults, inheritance from enclosing sections in the old
reader path, what CompositeDataReader copies into each deserializer), validated with CNTK's own
messages, into frozen ``ReaderConfig``/``DeserializerConfig``/``StreamConfig``."""
from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Iterator

from recordkit.errors import FormatError, warn
from recordkit.compat.brainscript.tree import ConfigArray, ConfigRecord, Location, _from_python
from recordkit.compat.brainscript.parser import _INT_RE, _Resolver, _apply_overrides, _parse_tree

from recordkit.engine import DEFAULT_CHUNK_SIZE

_FOUR_GB = 2**32                       # g_4GB: the default window covers 4 GiB of chunks
_MAX_SPARSE_DIM = 2**31 - 1

# =============================================================================================
# Normalizer: CNTK reader semantics
# =============================================================================================

@dataclass(frozen=True)
class StreamConfig:
    """One input stream. ``alias`` is the name used in the data file (CTF ``|alias``, CBF header name);
    ``format``/``dim`` are None for CBF, whose streams are described by the file itself."""

    name: str
    alias: str
    format: str | None
    dim: int | None
    defines_mb_size: bool = False


@dataclass(frozen=True)
class DeserializerConfig:
    """One deserializer; for the old ``readerType=`` form, the one implied by the reader section.

    For CBF, ``streams`` lists only renamed/selected streams; empty means "every stream of the
    file under its own name". ``skip_sequence_ids``, ``chunk_size`` and ``cache_index`` only
    apply to CTF and keep their defaults for CBF.
    """

    type: str
    file: str
    streams: tuple[StreamConfig, ...]
    precision: str = "float"
    skip_sequence_ids: bool = False
    max_errors: int = 0
    trace_level: int = 1
    chunk_size: int = DEFAULT_CHUNK_SIZE
    keep_data_in_memory: bool = False
    cache_index: bool = False


@dataclass(frozen=True)
class ReaderConfig:
    """A whole reader: deserializers plus randomization, packing and diagnostics settings.

    ``randomization_window`` None means CNTK's default: in the old path, floor(2^32 /
    chunkSizeInBytes) chunks unless ``sample_based_randomization_window``, else the whole data
    set; in the composite path, the whole data set (sample based). The composite path with a
    CTF deserializer and no window gets its chunk-based default computed here, because it uses
    the *reader-level* ``chunkSizeInBytes``, which is not kept anywhere else.
    ``max_errors`` is the composite reader's budget for invalid sequences (0 in the old path,
    whose input-error budget is the deserializer's ``max_errors``).
    """

    deserializers: tuple[DeserializerConfig, ...]
    randomize: bool = True
    randomization_seed: int = 0
    randomization_window: int | None = None
    sample_based_randomization_window: bool = False
    frame_mode: bool = False
    truncated: bool = False
    truncation_length: int = 0
    trace_level: int = 1
    max_errors: int = 0
    verbosity: int = 0
    multithreaded_deserialization: bool | None = None
    composite: bool = False
    use_numeric_sequence_keys: bool | None = None
    hash_sequence_keys: bool = False
    local_timeline: bool = True


CTF_TYPE, CBF_TYPE = "CNTKTextFormatDeserializer", "CNTKBinaryDeserializer"
CTF_READER, CBF_READER = "CNTKTextFormatReader", "CNTKBinaryReader"
_MODULE_OF = {CTF_TYPE: CTF_READER, CBF_TYPE: CBF_READER}


def _keys(*names: str) -> dict[str, str]:
    return {n.lower(): n for n in names}


# Reader-section parameters of the old path ("readerType = ..."). All but the structural
# ones are also looked up in the enclosing sections, like CNTK's ConfigParameters does.
_OLD_COMMON = _keys("readerType", "file", "input", "precision", "randomize", "randomizationSeed",
                    "randomizationWindow", "sampleBasedRandomizationWindow", "traceLevel", "maxErrors",
                    "keepDataInMemory", "verbosity", "multiThreadedDeserialization")
_CTF_ONLY = _keys("skipSequenceIds", "chunkSizeInBytes", "cacheIndex")
_OLD_CTF_KEYS = {**_OLD_COMMON, **_CTF_ONLY, **_keys("frameMode", "truncated", "truncationLength")}
_OLD_CBF_KEYS = dict(_OLD_COMMON)
_OLD_CBF_UNSUPPORTED = {**_CTF_ONLY, **_keys("frameMode", "truncated", "truncationLength")}
_STRUCTURAL = {"readertype", "file", "input", "deserializers"}

_COMPOSITE_KEYS = _keys("readerType", "deserializers", "precision", "randomize", "randomizationSeed",
                        "randomizationWindow", "sampleBasedRandomizationWindow", "frameMode", "truncated",
                        "truncationLength", "traceLevel", "maxErrors", "verbosity",
                        "multiThreadedDeserialization", "chunkSizeInBytes", "localTimeline",
                        "useNumericSequenceKeys", "hashSequenceKeys")
_DESER_CBF_KEYS = _keys("type", "module", "file", "input", "precision", "frameMode", "traceLevel",
                        "maxErrors", "keepDataInMemory")
_DESER_CTF_KEYS = {**_DESER_CBF_KEYS, **_CTF_ONLY}
# Parameters of the 2016 CTF reader that the final CNTK no longer reads (they appear in the
# corpus' legacy configs). Accepted with a warning rather than rejected as typos.
_OBSOLETE_CTF = {"chunksize": "use 'chunkSizeInBytes'", "numchunkstocache": "chunks are cached with "
                 "'keepDataInMemory'", "chunkcachesize": "chunks are cached with 'keepDataInMemory'"}
_CTF_INPUT_KEYS = _keys("alias", "dim", "format", "definesMBSize")
_CBF_INPUT_KEYS = _keys("alias", "dim", "format")


class _Normalizer:
    """Reads typed parameters out of records, with CNTK's lookup rules and located errors."""

    def __init__(self, source: str, resolver: _Resolver):
        self.source = source
        self.resolver = resolver

    # -- errors ------------------------------------------------------------------------------
    def error(self, where: Location | None, message: str) -> FormatError:
        if where is None:
            return FormatError(self.source, message)
        return FormatError(where.source, message, line=where.line, column=where.column)

    def check_known(self, rec: ConfigRecord, known: dict[str, str], what: str,
                    unsupported: dict[str, str] | None = None, unsupported_by: str = "",
                    obsolete: dict[str, str] | None = None) -> None:
        """Reject keys of ``rec`` that are not parameters here, naming them at their location."""
        for key in dict.keys(rec):
            low = key.lower()
            if low in known:
                continue
            where = rec.key_location(key)
            if obsolete and low in obsolete:
                at = f"{where.source}:{where.line}:{where.column}" if where else self.source
                warn(f"{at}: {what} parameter '{key}' is obsolete and ignored by CNTK 2.x ({obsolete[low]})")
                continue
            if unsupported and low in unsupported:
                raise self.error(where, f"{what} parameter '{key}' is not supported by {unsupported_by}")
            hint = difflib.get_close_matches(low, list(known), n=1, cutoff=0.75)
            suggestion = f" (did you mean '{known[hint[0]]}'?)" if hint else ""
            raise self.error(where, f"unknown {what} parameter '{key}'{suggestion}")

    # -- lookup ------------------------------------------------------------------------------
    def find(self, rec: ConfigRecord, key: str, inherit: bool) -> tuple[ConfigRecord | None, Any]:
        """The record holding ``key`` (``rec`` itself, or an enclosing one when ``inherit``) and its value."""
        scope: ConfigRecord | None = rec
        while scope is not None:
            if key in scope:
                return scope, self.resolver.get(scope, key)
            scope = scope.parent if inherit else None
        return None, None

    def value(self, rec, key, default, convert, inherit=False):
        holder, raw = self.find(rec, key, inherit)
        if holder is None:
            return default
        return convert(raw, holder.spelling(key), holder.value_location(key))

    # -- converters (raw value, name as written, location) -> typed value ------------------
    def to_bool(self, raw, name, where) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, int) and raw in (0, 1):
            return bool(raw)
        if isinstance(raw, str) and raw.strip().lower() in ("true", "false", "1", "0"):
            return raw.strip().lower() in ("true", "1")
        raise self.error(where, f"'{name}' must be true or false, not {_show(raw)}")

    def to_int(self, raw, name, where, minimum: int = 0) -> int:
        value = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            value = raw
        elif isinstance(raw, str) and _INT_RE.match(raw.strip()):
            value = int(raw.strip())
        if value is None or value < minimum:
            kind = "a positive integer" if minimum > 0 else "a non-negative integer"
            raise self.error(where, f"'{name}' must be {kind}, not {_show(raw)}")
        return value

    def to_positive(self, raw, name, where) -> int:
        return self.to_int(raw, name, where, minimum=1)

    def to_str(self, raw, name, where) -> str:
        if isinstance(raw, (ConfigRecord, ConfigArray)):
            raise self.error(where, f"'{name}' must be a single value, not a section or an array")
        if isinstance(raw, bool):
            return "true" if raw else "false"
        return str(raw)

    def to_precision(self, raw, name, where) -> str:
        p = self.to_str(raw, name, where)
        if p.lower() not in ("float", "double"):
            raise self.error(where, f"Not supported precision '{p}'. Expected 'double' or 'float'.")
        return p.lower()

    def to_randomize(self, raw, name, where) -> bool:
        # ReaderUtil.cpp: "none" (any case) or false switches randomization off; true and "auto" mean on.
        if isinstance(raw, str) and raw.strip().lower() in ("none", "auto"):
            return raw.strip().lower() == "auto"
        try:
            return self.to_bool(raw, name, where)
        except FormatError:
            raise self.error(where, f"'{name}' must be true, false, \"auto\" or \"none\", not {_show(raw)}") from None

    # -- streams -----------------------------------------------------------------------------
    def input_section(self, owner: ConfigRecord, required: bool) -> ConfigRecord | None:
        if "input" not in owner:  # not inherited: TextConfigHelper uses ExistsCurrent("input")
            if required:
                raise self.error(owner.location,
                                 'CNTKTextFormatReader configuration does not contain "input" section.')
            return None
        section = self.resolver.get(owner, "input")
        if not isinstance(section, ConfigRecord):
            raise self.error(owner.value_location("input"), "'input' must be a section: input = [ name = [ ... ] ]")
        return section

    def stream_sections(self, section: ConfigRecord) -> Iterator[tuple[str, ConfigRecord]]:
        for name in list(dict.keys(section)):
            rec = self.resolver.get(section, name)
            if not isinstance(rec, ConfigRecord):
                raise self.error(section.value_location(name),
                                 f"input '{name}' must be a section, e.g. {name} = [ dim = 1; format = \"dense\" ]")
            yield name, rec

    def alias(self, name: str, rec: ConfigRecord, seen: dict[str, str]) -> str:
        alias = self.value(rec, "alias", name, self.to_str)
        if alias == "":
            raise self.error(rec.value_location("alias"), f"Alias value for input '{name}' is empty.")
        if alias in seen:
            raise self.error(rec.value_location("alias") or rec.key_location("alias") or rec.location,
                             f"Alias {alias} is already mapped to input {seen[alias]}.")
        seen[alias] = name
        return alias

    def ctf_streams(self, owner: ConfigRecord) -> tuple[StreamConfig, ...]:
        section = self.input_section(owner, required=True)
        if not section:
            raise self.error(owner.value_location("input"),
                             'CNTKTextFormatReader configuration contains an empty "input" section.')
        streams, seen, defining = [], {}, []
        for name, rec in self.stream_sections(section):
            self.check_known(rec, _CTF_INPUT_KEYS, f"input '{name}'")
            if "dim" not in rec or "format" not in rec:
                raise self.error(section.key_location(name),
                                 f"Input section for input '{name}' does not specify all the required "
                                 f'parameters, "dim" and "format".')
            alias = self.alias(name, rec, seen)
            dim = self.value(rec, "dim", None, self.to_positive)
            fmt = self.value(rec, "format", None, self.to_str).lower()
            if fmt not in ("dense", "sparse"):
                raise self.error(rec.value_location("format"),
                                 "'format' parameter must be set either to 'dense' or 'sparse'.")
            if fmt == "sparse" and dim > _MAX_SPARSE_DIM:
                raise self.error(rec.value_location("dim"),
                                 f"Sample dimension ({dim}) for sparse input '{name}' exceeds the maximum "
                                 f"allowed value ({_MAX_SPARSE_DIM}).")
            if dim > _MAX_SPARSE_DIM:  # recordkit's bound for dense inputs too (CBF stores uint32 dims)
                raise self.error(rec.value_location("dim"),
                                 f"Sample dimension ({dim}) for dense input '{name}' exceeds the maximum "
                                 f"allowed value ({_MAX_SPARSE_DIM}).")
            defines = self.value(rec, "definesMBSize", False, self.to_bool)
            if defines:
                defining.append((name, rec))
            streams.append(StreamConfig(name, alias, fmt, dim, defines))
        if len(defining) > 1:
            names = ", ".join(n for n, _ in defining)
            raise self.error(defining[1][1].value_location("definesMBSize"),
                             f"Only a single stream is allowed to define the minibatch size, but "
                             f"{len(defining)} found: {names}.")
        return tuple(streams)

    def cbf_streams(self, owner: ConfigRecord) -> tuple[StreamConfig, ...]:
        section = self.input_section(owner, required=False)
        if section is None:
            return ()
        streams, seen = [], {}
        for name, rec in self.stream_sections(section):
            self.check_known(rec, _CBF_INPUT_KEYS, f"input '{name}'",
                             unsupported=_keys("definesMBSize"), unsupported_by=CBF_READER)
            streams.append(StreamConfig(name, self.alias(name, rec, seen), None, None, False))
        return tuple(streams)

    def file(self, rec: ConfigRecord, what: str) -> str:
        path = self.value(rec, "file", None, self.to_str)
        if path is None:
            raise self.error(rec.location, f"{what} does not specify the required parameter 'file'")
        if path == "":
            raise self.error(rec.value_location("file"), f"'file' of the {what} is empty")
        return path

    # -- packing and randomization shared by both paths --------------------------------------
    def packing(self, rec: ConfigRecord, inherit: bool) -> tuple[bool, bool, int]:
        frame_mode = self.value(rec, "frameMode", False, self.to_bool, inherit)
        truncated = self.value(rec, "truncated", False, self.to_bool, inherit)
        where = self.find(rec, "truncated", inherit)[0]
        if frame_mode and truncated:
            raise self.error(where.value_location("truncated") if where else rec.location,
                             "frameMode and truncated BPTT are mutually exclusive.")
        length = self.value(rec, "truncationLength", 0, self.to_int, inherit)
        if truncated and length == 0:
            holder = self.find(rec, "truncationLength", inherit)[0]
            raise self.error(holder.value_location("truncationLength") if holder else
                             where.value_location("truncated") if where else rec.location,
                             "Truncation length cannot be 0.")
        return frame_mode, truncated, length


def _show(raw: Any) -> str:
    if isinstance(raw, ConfigRecord):
        return "a section"
    if isinstance(raw, ConfigArray):
        return "an array"
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return f"'{raw}'" if isinstance(raw, str) else str(raw)


def _old_path(n: _Normalizer, reader: ConfigRecord, reader_type: str) -> ReaderConfig:
    """``readerType = "CNTKTextFormatReader" | "CNTKBinaryReader"``: one deserializer built from the
    reader section itself; every non-structural parameter falls back to enclosing sections."""
    is_ctf = reader_type == CTF_READER
    if is_ctf:
        n.check_known(reader, _OLD_CTF_KEYS, "reader", obsolete=_OBSOLETE_CTF)
    else:
        n.check_known(reader, _OLD_CBF_KEYS, "reader", _OLD_CBF_UNSUPPORTED, CBF_READER)

    def get(key, default, convert):
        return n.value(reader, key, default, convert, inherit=key.lower() not in _STRUCTURAL)

    precision = get("precision", "float", n.to_precision)
    streams = n.ctf_streams(reader) if is_ctf else n.cbf_streams(reader)
    trace_level = get("traceLevel", 1, n.to_int)
    deserializer = DeserializerConfig(
        type=CTF_TYPE if is_ctf else CBF_TYPE,
        file=n.file(reader, f"{reader_type} configuration"),
        streams=streams,
        precision=precision,
        skip_sequence_ids=get("skipSequenceIds", False, n.to_bool) if is_ctf else False,
        max_errors=get("maxErrors", 0, n.to_int),
        trace_level=trace_level,
        chunk_size=get("chunkSizeInBytes", DEFAULT_CHUNK_SIZE, n.to_positive) if is_ctf else DEFAULT_CHUNK_SIZE,
        keep_data_in_memory=get("keepDataInMemory", False, n.to_bool),
        cache_index=get("cacheIndex", False, n.to_bool) if is_ctf else False,
    )
    # The CBF reader always packs whole sequences; frame/truncation settings inherited from the
    # training config are ignored there, as in CNTK (inside the reader section they are rejected).
    frame_mode, truncated, length = n.packing(reader, inherit=True) if is_ctf else (False, False, 0)
    return ReaderConfig(
        deserializers=(deserializer,),
        randomize=get("randomize", True, n.to_randomize),
        randomization_seed=get("randomizationSeed", 0, n.to_int),
        randomization_window=get("randomizationWindow", None, n.to_int),
        sample_based_randomization_window=get("sampleBasedRandomizationWindow", False, n.to_bool),
        frame_mode=frame_mode,
        truncated=truncated,
        truncation_length=length,
        trace_level=trace_level,
        max_errors=0,
        verbosity=get("verbosity", 0, n.to_int),
        multithreaded_deserialization=get("multiThreadedDeserialization", None, n.to_bool),
        composite=False,
    )


def _composite_path(n: _Normalizer, reader: ConfigRecord) -> ReaderConfig:
    """``deserializers = ( {...} : {...} )``: CompositeDataReader semantics (spec 5.5).

    Reader-level parameters fall back to enclosing sections; a deserializer's own record does not
    (array elements lose their parent in CNTK), except that CompositeDataReader writes the
    reader-level ``precision``, ``frameMode`` and (when given anywhere up the chain) ``traceLevel``
    into every deserializer, overriding what the deserializer says.
    """
    n.check_known(reader, _COMPOSITE_KEYS, "reader")

    def get(key, default, convert):
        return n.value(reader, key, default, convert, inherit=True)

    if "readerType" in reader:
        rt = n.value(reader, "readerType", None, n.to_str)
        if rt.lower() != "compositedatareader":
            raise n.error(reader.value_location("readerType"),
                          f"readerType '{rt}' cannot be combined with 'deserializers' "
                          f"(use readerType = \"CompositeDataReader\" or leave it out)")
    precision = get("precision", "float", n.to_precision)
    frame_mode, truncated, length = n.packing(reader, inherit=True)
    reader_trace = get("traceLevel", None, n.to_int)
    numeric_keys = get("useNumericSequenceKeys", None, n.to_bool)

    raw = n.resolver.get(reader, "deserializers")
    items = list(raw) if isinstance(raw, ConfigArray) else [raw]
    locations = raw.locations if isinstance(raw, ConfigArray) else [reader.value_location("deserializers")]
    if not items:
        raise n.error(reader.value_location("deserializers"), "Could not find deserializers in the reader config.")

    deserializers, definers = [], []
    for index, (rec, where) in enumerate(zip(items, locations)):
        what = f"deserializer #{index + 1}"
        if not isinstance(rec, ConfigRecord):
            raise n.error(where or reader.value_location("deserializers"),
                          f"{what} must be a section: deserializers = ({{ type = ...; file = ...; input = ... }})")
        n.resolver.resolve_all(rec)
        dtype = n.value(rec, "type", None, n.to_str)
        if dtype is None:
            raise n.error(rec.location, f"{what} does not specify its 'type'")
        canonical = {CTF_TYPE.lower(): CTF_TYPE, CBF_TYPE.lower(): CBF_TYPE}.get(dtype.lower())
        if canonical is None:
            raise n.error(rec.value_location("type"),
                          f"deserializer type '{dtype}' is not supported (expected {CTF_TYPE} or {CBF_TYPE})")
        module = n.value(rec, "module", _MODULE_OF[canonical], n.to_str)
        if module.lower() != _MODULE_OF[canonical].lower():
            raise n.error(rec.value_location("module"),
                          f"Cannot create deserializer. Please check module and type in the configuration. "
                          f"(type '{canonical}' is provided by module '{_MODULE_OF[canonical]}', not '{module}')")
        is_ctf = canonical == CTF_TYPE
        if is_ctf:
            n.check_known(rec, _DESER_CTF_KEYS, "deserializer")
        else:
            n.check_known(rec, _DESER_CBF_KEYS, "deserializer", _CTF_ONLY, CBF_READER)
            if index > 0:
                raise n.error(rec.value_location("type"), "Binary deserializer can only be used as a primary.")
            if numeric_keys is False:
                raise n.error(reader.value_location("useNumericSequenceKeys"),
                              "Binary deserializer does not support non-numeric sequence keys.")

        def own(key, default, convert):
            return n.value(rec, key, default, convert, inherit=False)

        own("precision", None, n.to_precision)  # validated, then overridden by the reader level
        own("frameMode", None, n.to_bool)
        trace_level = reader_trace if reader_trace is not None else own("traceLevel", 1, n.to_int)
        streams = n.ctf_streams(rec) if is_ctf else n.cbf_streams(rec)
        if any(s.defines_mb_size for s in streams):
            definers.append(rec)
        deserializers.append(DeserializerConfig(
            type=canonical,
            file=n.file(rec, what),
            streams=streams,
            precision=precision,
            skip_sequence_ids=own("skipSequenceIds", False, n.to_bool),
            max_errors=own("maxErrors", 0, n.to_int),
            trace_level=trace_level,
            chunk_size=own("chunkSizeInBytes", DEFAULT_CHUNK_SIZE, n.to_positive),
            keep_data_in_memory=own("keepDataInMemory", False, n.to_bool),
            cache_index=own("cacheIndex", False, n.to_bool),
        ))
    if len(definers) > 1:
        raise n.error(definers[1].location,
                      "Only a single deserializer is allowed to define minibatch size, at least two found.")

    randomize = get("randomize", True, n.to_randomize)
    window = get("randomizationWindow", None, n.to_int)
    sample_based = get("sampleBasedRandomizationWindow", True, n.to_bool)
    has_ctf = any(d.type == CTF_TYPE for d in deserializers)
    if randomize and has_ctf and "randomizationWindow" not in reader:  # ExistsCurrent: this section only
        if "sampleBasedRandomizationWindow" not in reader or not sample_based:
            sample_based = False
            window = _FOUR_GB // get("chunkSizeInBytes", DEFAULT_CHUNK_SIZE, n.to_positive)
        else:
            raise n.error(reader.value_location("sampleBasedRandomizationWindow"),
                          "'sampleBasedRandomizationWindow' (== 'true') requires that the "
                          "'randomizationWindow' is explicitly specified.")
    return ReaderConfig(
        deserializers=tuple(deserializers),
        randomize=randomize,
        randomization_seed=get("randomizationSeed", 0, n.to_int),
        randomization_window=window,
        sample_based_randomization_window=sample_based,
        frame_mode=frame_mode,
        truncated=truncated,
        truncation_length=length,
        trace_level=reader_trace if reader_trace is not None else 1,
        max_errors=get("maxErrors", 0, n.to_int),
        verbosity=get("verbosity", 0, n.to_int),
        multithreaded_deserialization=get("multiThreadedDeserialization", None, n.to_bool),
        composite=True,
        use_numeric_sequence_keys=numeric_keys,
        hash_sequence_keys=get("hashSequenceKeys", False, n.to_bool),
        local_timeline=get("localTimeline", True, n.to_bool),
    )


def _find_reader(n: _Normalizer, root: ConfigRecord, section: str | None) -> ConfigRecord:
    node, path = root, []
    for part in (section.split(".") if section else []):
        path.append(part)
        if part not in node or not isinstance(n.resolver.get(node, part), ConfigRecord):
            readers = [k for k, v in dict.items(root) if isinstance(v, ConfigRecord) and "reader" in v]
            listing = f" (sections with a reader: {', '.join(readers)})" if readers else ""
            raise n.error(None, f"no section '{'.'.join(path)}' in the config{listing}")
        node = node[part]
    if "reader" not in node:
        readers = [k for k, v in dict.items(root) if isinstance(v, ConfigRecord) and "reader" in v]
        hint = f"; pass section= one of: {', '.join(readers)}" if readers and not section else ""
        raise n.error(node.location if section else None,
                      f"no 'reader' section in {repr(section) if section else 'the top level of the config'}{hint}")
    reader = n.resolver.get(node, "reader")
    if not isinstance(reader, ConfigRecord):
        raise n.error(node.value_location("reader"), "'reader' must be a section: reader = [ ... ]")
    return n.resolver.resolve_all(reader)


def reader_config(text_or_dict: str | dict, *, section: str | None = None, overrides: dict | None = None,
                  source: str = "<config>") -> ReaderConfig:
    """Normalize the reader section of a CNTK config into a validated :class:`ReaderConfig`.

    ``text_or_dict`` is config text, or a dict from :func:`parse` (or plain Python dicts).
    The reader section is the top-level ``reader`` record, or ``<section>.reader`` (``section``
    may be dotted). ``overrides`` are applied like CNTK command-line assignments before ``$var$``
    references are resolved, e.g. ``{"defMBSize": "true"}``. Only ``$var$`` references the
    reader needs are resolved, so unrelated parts of a training config may use variables the
    caller does not define. Raises :class:`FormatError` for every invalid or unknown parameter.
    """
    if isinstance(text_or_dict, str):
        root = _parse_tree(text_or_dict, source, overrides)
    elif isinstance(text_or_dict, dict):
        root = _from_python(text_or_dict)
        _apply_overrides(root, overrides)
    else:
        raise TypeError(f"reader_config() takes config text or a dict, not {type(text_or_dict).__name__}")
    n = _Normalizer(source, _Resolver())
    reader = _find_reader(n, root, section)
    if "deserializers" in reader:
        return _composite_path(n, reader)
    if "readerType" not in reader:
        raise n.error(reader.location, "the reader section specifies neither 'readerType' nor 'deserializers'")
    reader_type = n.value(reader, "readerType", None, n.to_str)
    canonical = {CTF_READER.lower(): CTF_READER, CBF_READER.lower(): CBF_READER}.get(reader_type.lower())
    if canonical is None:
        raise n.error(reader.value_location("readerType"),
                      f"readerType '{reader_type}' is not supported (expected {CTF_READER} or {CBF_READER})")
    return _old_path(n, reader, canonical)
