"""The tokenizer: CNTK's lexical quirks (bare words that may hold ``c:\\paths``, ``:`` as the array
separator inside ``( ... )``, ``#`` comments only at a token boundary)."""
from __future__ import annotations

from typing import Iterator, NamedTuple

from recordkit.errors import FormatError
from recordkit.compat.brainscript.tree import Location

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
