"""The tokens of protobuf text format, each with the ``Where`` (file, line, byte column) it was written:
identifiers, numbers, strings (escapes decoded), punctuation."""
from __future__ import annotations

import re
from dataclasses import dataclass

from recordkit.errors import FormatError


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
