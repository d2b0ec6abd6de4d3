"""The recursive-descent parser: tokens -> ``ConfigRecord`` trees, command-line overrides merged,
``$name$`` references resolved the way CNTK does, with bounds on what a small config may grow into."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from recordkit.errors import FormatError
from recordkit.compat.brainscript.tree import ConfigArray, ConfigRecord, Location, _adopt, _copy_value, _from_python
from recordkit.compat.brainscript.lexer import _CLOSER, _Tok, _describe, _syntax, _tokenize

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
