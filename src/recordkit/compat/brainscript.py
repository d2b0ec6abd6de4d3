"""CNTK BrainScript reader sections, parsed and normalized for recordkit.

CNTK users describe their data in config files such as::

    precision = "float"
    reader = [
        readerType = "CNTKTextFormatReader"
        file = "train.txt"
        input = [ features = [ dim = 2; format = "dense" ] ]
    ]

or, with the composite reader, ``reader = { deserializers = ({ type = ...; ... }) }``.
This module turns such text into frozen dataclasses (:class:`ReaderConfig`,
:class:`DeserializerConfig`, :class:`StreamConfig`) that the engine builds a
minibatch source from. It has three layers, each in its own section below:

1. a **tokenizer** that knows CNTK's lexical quirks (bare words that may hold
   ``c:\\paths``, ``:`` as the array separator, ``#`` comments);
2. a **recursive-descent parser** producing case-insensitive records
   (:class:`ConfigRecord`) that remember where every key and value was written,
   and resolving ``$name$`` references the way CNTK does (outward through the
   enclosing sections, after command-line overrides are applied);
3. a **normalizer** that applies CNTK's reader semantics (defaults, inheritance
   from enclosing sections in the old reader path, the values CompositeDataReader
   copies into each deserializer) and validates them with CNTK's own messages.
   Unknown parameters inside the reader section are errors, so a typo such as
   ``randomise = false`` does not silently leave randomization on.

Every problem is raised as :class:`recordkit.errors.FormatError` with the
``line:column`` of the offending token (1-based, columns in bytes).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Iterator, NamedTuple

from recordkit.errors import FormatError, warn

__all__ = [
    "ConfigArray",
    "ConfigRecord",
    "DeserializerConfig",
    "Location",
    "ReaderConfig",
    "StreamConfig",
    "parse",
    "reader_config",
]

from recordkit.engine import DEFAULT_CHUNK_SIZE  # noqa: E402  chunkSizeInBytes default (32 MiB)
_FOUR_GB = 2**32                       # g_4GB: the default window covers 4 GiB of chunks
_MAX_SPARSE_DIM = 2**31 - 1


# =============================================================================================
# Configuration tree: case-insensitive records that remember where things were written
# =============================================================================================

class Location(NamedTuple):
    """Where a token was written: ``source`` (file name or ``<override name>``), 1-based line and byte column."""

    source: str
    line: int
    column: int


class ConfigRecord(dict):
    """A config section (``[ ... ]`` or ``{ ... }``): a dict whose keys are case-insensitive.

    CNTK config names are case-insensitive (``definesMbSize`` and ``definesMBSize`` are
    the same key), but stream names come from section names and must keep their spelling.
    So the dict stores each key with the spelling of its first assignment, and every
    lookup folds case. It also remembers the location of each key and value (for error
    messages) and its enclosing record (for ``$name$`` lookups and parameter inheritance).
    """

    def __init__(self, items: Any = (), *, location: Location | None = None,
                 parent: ConfigRecord | None = None):
        super().__init__()
        self._spelling: dict[str, str] = {}
        self._key_loc: dict[str, Location | None] = {}
        self._value_loc: dict[str, Location | None] = {}
        self.location = location
        self.parent = parent
        self.update(items)

    # -- case-insensitive dict protocol ------------------------------------------------------
    def _stored(self, key: str) -> str:
        return self._spelling[key.lower()]

    def __getitem__(self, key):
        try:
            return super().__getitem__(self._stored(key))
        except (KeyError, AttributeError):
            raise KeyError(key) from None

    def __setitem__(self, key, value):
        self.set(key, value)

    def __delitem__(self, key):
        try:
            stored = self._spelling.pop(key.lower())
        except (KeyError, AttributeError):
            raise KeyError(key) from None
        self._key_loc.pop(key.lower(), None)
        self._value_loc.pop(key.lower(), None)
        super().__delitem__(stored)

    def __contains__(self, key):
        return isinstance(key, str) and key.lower() in self._spelling

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key, *default):
        if key in self:
            value = self[key]
            del self[key]
            return value
        if default:
            return default[0]
        raise KeyError(key)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, other=(), **kw):
        items = other.items() if hasattr(other, "items") else other
        for k, v in items:
            self[k] = v
        for k, v in kw.items():
            self[k] = v

    def copy(self) -> ConfigRecord:
        return self.deep_copy(self.parent)

    # -- location-aware API ------------------------------------------------------------------
    def set(self, key: str, value: Any, *, key_location: Location | None = None,
            value_location: Location | None = None) -> None:
        """Assign ``key`` (keeping the first spelling and position in the dict) with its locations."""
        low = key.lower()
        if low not in self._spelling:
            self._spelling[low] = key
        super().__setitem__(self._spelling[low], value)
        if key_location is not None or low not in self._key_loc:
            self._key_loc[low] = key_location
        self._value_loc[low] = value_location
        _adopt(value, self)

    def spelling(self, key: str) -> str:
        """The key as it was written in the config."""
        return self._spelling.get(key.lower(), key)

    def key_location(self, key: str) -> Location | None:
        return self._key_loc.get(key.lower())

    def value_location(self, key: str) -> Location | None:
        return self._value_loc.get(key.lower()) or self._key_loc.get(key.lower())

    def deep_copy(self, parent: ConfigRecord | None) -> ConfigRecord:
        out = ConfigRecord(location=self.location, parent=parent)
        for k, v in dict.items(self):
            out.set(k, _copy_value(v, out), key_location=self.key_location(k),
                    value_location=self._value_loc.get(k.lower()))
        return out


class ConfigArray(list):
    """A config array: ``(a : b : c)``, ``a:b`` or ``({...})``. ``locations`` parallels the items."""

    def __init__(self, items=(), locations=None, *, location: Location | None = None):
        super().__init__(items)
        self.locations = list(locations) if locations is not None else [None] * len(self)
        self.location = location


def _adopt(value: Any, parent: ConfigRecord) -> None:
    """Make ``parent`` the enclosing scope of a record value (or of the records in an array)."""
    if isinstance(value, ConfigRecord):
        value.parent = parent
    elif isinstance(value, ConfigArray):
        for item in value:
            _adopt(item, parent)


def _copy_value(value: Any, parent: ConfigRecord) -> Any:
    if isinstance(value, ConfigRecord):
        return value.deep_copy(parent)
    if isinstance(value, ConfigArray):
        return ConfigArray((_copy_value(v, parent) for v in value), value.locations, location=value.location)
    return value


def _from_python(obj: Any, parent: ConfigRecord | None = None) -> Any:
    """Turn plain Python dicts/lists (no locations) into ConfigRecord/ConfigArray trees."""
    if isinstance(obj, ConfigRecord):
        return obj.deep_copy(parent)
    if isinstance(obj, dict):
        rec = ConfigRecord(parent=parent)
        for k, v in obj.items():
            rec.set(str(k), _from_python(v, rec))
        return rec
    if isinstance(obj, (list, tuple)):
        return ConfigArray(_from_python(v, parent) for v in obj)
    return obj


# =============================================================================================
# Tokenizer
# =============================================================================================
#
# CNTK's config language is line oriented and mostly untyped: a value is a quoted string,
# a bare word, a record or an array. Bare words are what make the lexer context dependent:
# ``file = c:\data\x.txt`` is one word, yet inside ``( ... )`` the ``:`` separates items.
# So the tokenizer tracks the innermost open bracket and treats ``:`` as a separator only
# when it is ``(``, or when it appears between tokens (``[...]:[...]``, ``"a":"b"``).
# ``#`` starts a comment only at a token boundary, so ``file = data#1.txt`` keeps its ``#``.

class _Tok(NamedTuple):
    kind: str   # WORD STRING OPEN CLOSE EQ COLON SEP NL EOF
    text: str
    loc: Location


_CLOSER = {"[": "]", "{": "}", "(": ")"}
_WORD_STOP = set(" \t\r\n\f\v=;[]{}()\"'")


def _tokenize(text: str, source: str) -> Iterator[_Tok]:
    if text.startswith("\ufeff"):
        text = text[1:]
    i, n = 0, len(text)
    line, line_start = 1, 0
    stack: list[str] = []

    def loc(at: int) -> Location:
        return Location(source, line, len(text[line_start:at].encode("utf-8")) + 1)

    while i < n:
        c = text[i]
        if c == "\n":
            yield _Tok("NL", "\n", loc(i))
            i += 1
            line, line_start = line + 1, i
        elif c in " \t\r\f\v":
            i += 1
        elif c == "#":
            while i < n and text[i] != "\n":
                i += 1
        elif c in "\"'":
            end = i + 1
            while end < n and text[end] != c and text[end] != "\n":
                end += 1
            if end >= n or text[end] != c:
                raise _syntax(loc(i), f"unterminated string (missing closing {c})")
            yield _Tok("STRING", text[i + 1:end], loc(i))
            i = end + 1
        elif c in "[{(":
            stack.append(c)
            yield _Tok("OPEN", c, loc(i))
            i += 1
        elif c in "]})":
            if stack:
                stack.pop()
            yield _Tok("CLOSE", c, loc(i))
            i += 1
        elif c == "=":
            yield _Tok("EQ", c, loc(i))
            i += 1
        elif c == ";":
            yield _Tok("SEP", c, loc(i))
            i += 1
        elif c == ":":
            yield _Tok("COLON", c, loc(i))
            i += 1
        else:
            in_array = bool(stack) and stack[-1] == "("
            end = i
            while end < n and text[end] not in _WORD_STOP and not (in_array and text[end] == ":"):
                end += 1
            yield _Tok("WORD", text[i:end], loc(i))
            i = end
    yield _Tok("EOF", "", loc(n))


def _syntax(where: Location, message: str) -> FormatError:
    return FormatError(where.source, message, line=where.line, column=where.column)


def _describe(tok: _Tok) -> str:
    if tok.kind == "EOF":
        return "end of input"
    if tok.kind == "NL":
        return "end of line"
    if tok.kind == "STRING":
        return f'string "{tok.text}"'
    return f"'{tok.text}'"


# =============================================================================================
# Parser
# =============================================================================================
#
# Grammar (newlines are significant only as separators between assignments):
#
#   file        := assignments EOF
#   assignments := ( NAME '=' value ( NL | ';' | <next NAME '=' on the same line> ) )*
#   value       := item ( ':' item )*                 -- two or more items make an array
#   item        := WORD | STRING | '[' assignments ']' | '{' assignments '}'
#                | '(' [ value ] ')'                  -- always an array, even of one item
#
# Assigning a record to a name that already holds a record merges the two (CNTK does this,
# which is what makes command-line overrides like ``Simple=[reader=[randomize=true]]`` work);
# any other reassignment replaces the earlier value. ``$name$`` references are kept as
# templates here and resolved afterwards (see the resolver), because CNTK resolves them
# only when a value is looked up, i.e. after the command-line overrides have been applied.

_NAME_RE = re.compile(r"[A-Za-z0-9_]+\Z")
_VAR_RE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\$")
_INT_RE = re.compile(r"[+-]?\d+\Z")
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?\Z")


@dataclass
class _Template:
    """A value containing ``$name$`` references, resolved after parsing."""

    text: str
    quoted: bool
    loc: Location


def _scalar(word: str) -> Any:
    """Type a bare word: int, float, bool (case-insensitive) or the word itself."""
    if _INT_RE.match(word):
        return int(word)
    if _FLOAT_RE.match(word):
        return float(word)
    low = word.lower()
    if low in ("true", "false"):
        return low == "true"
    return word


# Bounds on what a small config may grow into: nesting (each level costs a few Python frames)
# and the values/text that ``$name$`` expansion creates (a reference that doubles at every level
# would otherwise take 2^levels memory, or abort the process). Far above any real reader config.
MAX_NESTING = 100
MAX_EXPANDED_VALUES = 100_000
MAX_EXPANDED_TEXT = 1 << 20


class _Parser:
    def __init__(self, text: str, source: str):
        self.tokens = _tokenize(text, source)
        self.buf: list[_Tok] = []
        self.source = source
        self.depth = 0

    def nest(self, tok: _Tok) -> None:
        """One more level of ``[``, ``{`` or ``(``: bounded, so no input can exhaust the stack."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _syntax(tok.loc, f"'{tok.text}' nested deeper than {MAX_NESTING} levels")

    def peek(self, k: int = 0) -> _Tok:
        while len(self.buf) <= k:
            self.buf.append(next(self.tokens))
        return self.buf[k]

    def take(self) -> _Tok:
        tok = self.peek()
        self.buf.pop(0)
        return tok

    def skip_separators(self, newlines_only: bool = False) -> None:
        kinds = ("NL",) if newlines_only else ("NL", "SEP")
        while self.peek().kind in kinds:
            self.take()

    # -- records -----------------------------------------------------------------------------
    def parse_file(self) -> ConfigRecord:
        root = ConfigRecord(location=Location(self.source, 1, 1))
        self.parse_assignments(root, opener=None)
        return root

    def parse_assignments(self, rec: ConfigRecord, opener: _Tok | None) -> None:
        closer = _CLOSER[opener.text] if opener else None
        while True:
            self.skip_separators()
            tok = self.peek()
            if tok.kind == "EOF":
                if opener is not None:
                    raise _syntax(tok.loc, f"missing '{closer}' to close the '{opener.text}' opened at "
                                           f"line {opener.loc.line}, column {opener.loc.column}")
                return
            if tok.kind == "CLOSE":
                if tok.text == closer:
                    self.take()
                    return
                raise _syntax(tok.loc, f"unexpected '{tok.text}'" +
                              (f" (expected '{closer}')" if closer else ""))
            if tok.kind != "WORD" or not _NAME_RE.match(tok.text):
                raise _syntax(tok.loc, f"expected a parameter name, found {_describe(tok)}")
            name = self.take()
            eq = self.peek()
            if eq.kind != "EQ":
                raise _syntax(eq.loc, f"expected '=' after '{name.text}', found {_describe(eq)}")
            self.take()
            value_tok = self.peek()
            value = self.parse_value(rec, name.text)
            _assign(rec, name.text, value, name.loc, value_tok.loc)
            after = self.peek()
            if after.kind in ("NL", "SEP", "EOF") or (after.kind == "CLOSE" and after.text == closer):
                continue
            if after.kind == "WORD" and self.peek(1).kind == "EQ":
                continue  # `[ a = 1 b = 2 ]`: the next assignment on the same line
            if after.kind == "CLOSE":
                raise _syntax(after.loc, f"unexpected '{after.text}'" +
                              (f" (expected '{closer}')" if closer else ""))
            raise _syntax(after.loc, f"expected a new line or ';' after the value of '{name.text}', "
                                     f"found {_describe(after)}")

    # -- values ------------------------------------------------------------------------------
    def parse_value(self, scope: ConfigRecord, name: str) -> Any:
        first = self.peek()
        items, locs = [self.parse_item(scope, name)], [first.loc]
        while self.peek().kind == "COLON":
            self.take()
            locs.append(self.peek().loc)
            items.append(self.parse_item(scope, name))
        if len(items) == 1:
            return items[0]
        return ConfigArray(items, locs, location=first.loc)

    def parse_item(self, scope: ConfigRecord, name: str) -> Any:
        tok = self.peek()
        if tok.kind == "WORD":
            self.take()
            if _VAR_RE.search(tok.text):
                return _Template(tok.text, False, tok.loc)
            return _scalar(tok.text)
        if tok.kind == "STRING":
            self.take()
            if _VAR_RE.search(tok.text):
                return _Template(tok.text, True, tok.loc)
            return tok.text
        if tok.kind == "OPEN" and tok.text in "[{":
            self.take()
            self.nest(tok)
            rec = ConfigRecord(location=tok.loc, parent=scope)
            self.parse_assignments(rec, opener=tok)
            self.depth -= 1
            return rec
        if tok.kind == "OPEN":  # '(' array ')'
            self.take()
            self.nest(tok)
            self.skip_separators(newlines_only=True)
            items, locs = [], []
            if not (self.peek().kind == "CLOSE" and self.peek().text == ")"):
                while True:
                    self.skip_separators(newlines_only=True)
                    locs.append(self.peek().loc)
                    items.append(self.parse_item(scope, name))
                    self.skip_separators(newlines_only=True)
                    if self.peek().kind != "COLON":
                        break
                    self.take()
            end = self.peek()
            if not (end.kind == "CLOSE" and end.text == ")"):
                raise _syntax(end.loc, f"expected ':' or ')' in the array opened at line {tok.loc.line}, "
                                       f"column {tok.loc.column}, found {_describe(end)}")
            self.take()
            self.depth -= 1
            return ConfigArray(items, locs, location=tok.loc)
        raise _syntax(tok.loc, f"expected a value for '{name}', found {_describe(tok)}")


def _assign(rec: ConfigRecord, name: str, value: Any, key_loc: Location | None,
            value_loc: Location | None) -> None:
    """``name = value`` in ``rec``: later assignments win, and record onto record merges."""
    if isinstance(value, ConfigRecord) and isinstance(rec.get(name), ConfigRecord):
        target = rec[name]
        for k in list(dict.keys(value)):
            _assign(target, k, dict.__getitem__(value, k), value.key_location(k), value._value_loc.get(k.lower()))
        return
    rec.set(name, value, key_location=key_loc, value_location=value_loc)


def _apply_overrides(root: ConfigRecord, overrides: dict | None) -> None:
    """Apply ``name=value`` pairs as CNTK's command line does (after the file, before ``$var$``).

    String values are parsed with the config syntax (``"true"``, ``"[reader=[randomize=false]]"``);
    other Python values are used as they are. A dotted name (``"Simple.reader.randomize"``) is a
    recordkit convenience that assigns inside nested sections, creating them if needed.
    """
    for name, raw in (overrides or {}).items():
        src = f"<override {name}>"
        if isinstance(raw, str):
            parser = _Parser(raw, src)
            parser.skip_separators()
            value = parser.parse_value(root, name)
            parser.skip_separators()
            if parser.peek().kind != "EOF":
                raise _syntax(parser.peek().loc, f"unexpected {_describe(parser.peek())} in the override of '{name}'")
        else:
            value = _from_python(raw, root)
        *path, last = str(name).split(".")
        target = root
        for part in path:
            if not isinstance(target.get(part), ConfigRecord):
                target.set(part, ConfigRecord(parent=target))
            target = target[part]
        if not _NAME_RE.match(last):
            raise FormatError(src, f"invalid override name '{name}'")
        _assign(target, last, value, Location(src, 1, 1), Location(src, 1, 1))


# -- $name$ resolution ------------------------------------------------------------------------
#
# A reference is looked up in the record that contains it, then outward through the enclosing
# records (case-insensitively), the way CNTK finds ``$defMBSize$`` at the top of the file from
# inside ``Simple.reader.input.features``. ``x = $x$`` skips the record's own ``x`` so it can
# refer to an outer one. A value that is exactly one reference takes the referenced value with
# its type (a record is copied in place); references inside longer text are substituted as text.

class _Resolver:
    def __init__(self):
        self.active: set[tuple[int, str]] = set()
        self.expanded = 0  # values created by expanding references, bounded by MAX_EXPANDED_VALUES

    def charge(self, count: int, tpl: "_Template") -> None:
        self.expanded += count
        if self.expanded > MAX_EXPANDED_VALUES:
            raise _syntax(tpl.loc, f"expanding '{tpl.text}' makes the configuration larger than "
                                   f"{MAX_EXPANDED_VALUES} values (a reference used twice at every level?)")

    def get(self, rec: ConfigRecord, key: str) -> Any:
        """``rec[key]`` with its references resolved (records inside it are not walked)."""
        value = rec[key]
        if isinstance(value, _Template):
            mark = (id(rec), key.lower())
            if mark in self.active:
                raise _syntax(value.loc, f"circular reference while resolving '{rec.spelling(key)}'")
            self.active.add(mark)
            try:
                value = self.expand(value, rec, key)
            finally:
                self.active.discard(mark)
            rec.set(key, value, value_location=rec.value_location(key))
        elif isinstance(value, ConfigArray):
            for i, item in enumerate(value):
                if isinstance(item, _Template):
                    value[i] = self.expand(item, rec, None)
                    _adopt(value[i], rec)
        return value

    def resolve_all(self, rec: ConfigRecord) -> ConfigRecord:
        for key in list(dict.keys(rec)):
            value = self.get(rec, key)
            for sub in (value if isinstance(value, ConfigArray) else [value]):
                if isinstance(sub, ConfigRecord):
                    self.resolve_all(sub)
        return rec

    def lookup(self, name: str, scope: ConfigRecord, own_key: str | None, loc: Location) -> Any:
        first, *rest = name.split(".")
        rec: ConfigRecord | None = scope
        while rec is not None:
            if first in rec and not (rec is scope and own_key is not None and first.lower() == own_key.lower()):
                value = self.get(rec, first)
                for part in rest:
                    if not isinstance(value, ConfigRecord) or part not in value:
                        raise _syntax(loc, f"undefined variable '${name}$'")
                    value = self.get(value, part)
                return value
            rec = rec.parent
        raise _syntax(loc, f"undefined variable '${name}$'")

    def expand(self, tpl: _Template, scope: ConfigRecord, own_key: str | None) -> Any:
        whole = _VAR_RE.fullmatch(tpl.text)
        if whole and not tpl.quoted:
            value = self.lookup(whole.group(1), scope, own_key, tpl.loc)
            if isinstance(value, (ConfigRecord, ConfigArray)):
                if isinstance(value, ConfigRecord):
                    self.resolve_all(value)
                self.charge(_count_values(value, MAX_EXPANDED_VALUES - self.expanded + 1), tpl)
                return value.deep_copy(scope) if isinstance(value, ConfigRecord) else _copy_value(value, scope)
            return value

        def text_of(m: re.Match) -> str:
            value = self.lookup(m.group(1), scope, own_key, tpl.loc)
            if isinstance(value, (ConfigRecord, ConfigArray)):
                raise _syntax(tpl.loc, f"variable '${m.group(1)}$' is a section or an array and "
                                       f"cannot be used inside text")
            if isinstance(value, bool):
                return "true" if value else "false"
            return str(value)

        text = _VAR_RE.sub(text_of, tpl.text)
        if len(text) > MAX_EXPANDED_TEXT:
            raise _syntax(tpl.loc, f"expanding '{tpl.text}' makes a value of {len(text)} characters, more than "
                                   f"{MAX_EXPANDED_TEXT} (a reference used twice at every level?)")
        self.charge(1, tpl)
        return text if tpl.quoted else _scalar(text)


def _count_values(value: Any, limit: int) -> int:
    """Values inside a record or array (counting stops past ``limit``: the caller fails then)."""
    count, stack = 0, [value]
    while stack and count <= limit:
        v = stack.pop()
        count += 1
        if isinstance(v, ConfigRecord):
            stack.extend(dict.values(v))
        elif isinstance(v, ConfigArray):
            stack.extend(v)
    return count


def _parse_tree(text: str, source: str, overrides: dict | None) -> ConfigRecord:
    root = _Parser(text, source).parse_file()
    _apply_overrides(root, overrides)
    return root


def parse(text: str, *, source: str = "<config>", overrides: dict | None = None) -> ConfigRecord:
    """Parse CNTK config text into a :class:`ConfigRecord` (a case-insensitive ``dict``).

    Values are ``int``, ``float``, ``bool``, ``str``, :class:`ConfigRecord` (for ``[...]`` and
    ``{...}``) or :class:`ConfigArray` (a ``list``). ``$name$`` references are resolved
    everywhere, after ``overrides`` (command-line style ``name=value``) have been applied;
    an undefined one is an error. Syntax errors raise :class:`FormatError` at the offending token.
    """
    return _Resolver().resolve_all(_parse_tree(text, source, overrides))


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
