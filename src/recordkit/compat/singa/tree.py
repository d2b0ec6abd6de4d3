"""The syntax tree: a recursive-descent parser of the whole protobuf text syntax into ``Message``s of
``Field``s that remember where they were written (no schema: that is ``schema``'s)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field as _field

from recordkit.errors import FormatError
from recordkit.compat.singa.tokens import Where, _Tok, _tokenize


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
