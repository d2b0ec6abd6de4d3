"""CSV records as SINGA's CSVInputLayer ("CSVRecordInputLayer") parses them (spec 4.4).

A tuple's value is one text line. SINGA's ``Tokenizer`` splits at *any* character of
``separator``; a trailing separator is tolerated. With ``has_label`` (and not deploy
phase) the first token is the label (``std::stoi``), then exactly ``count`` = prod(shape)
values are read with ``std::stof``; too few or extra tokens are fatal in SINGA and a
``FormatError`` here. In deploy phase the label column is *not* skipped.

The tokenizer is reproduced literally, quirk included: it passes the separator position
as a substring *length*, so each token after the first holds the rest of the line, and
``stof``/``stoi`` parse its numeric prefix (leading whitespace skipped, trailing text
ignored). So ``"1,,2"`` fails (``stof(",2")``), but with a whitespace separator an empty
field re-reads the next number, exactly as SINGA did. Numbers are parsed as double and
rounded to float32 (strtof rounds once; the two differ only in rare double-rounding cases).
"""
from __future__ import annotations

import math
import re

import numpy as np

from recordkit.errors import FormatError

_FLOAT = re.compile(rb"[ \t\n\v\f\r]*([+-]?(?:infinity|inf|nan(?:\([0-9a-z_]*\))?"
                    rb"|0x(?:[0-9a-f]+\.?[0-9a-f]*|\.[0-9a-f]+)(?:p[+-]?[0-9]+)?"
                    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?))", re.IGNORECASE)
_INT = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_INT32 = (-2 ** 31, 2 ** 31 - 1)


def singa_tokens(line: bytes, separator: bytes):
    """(column, token) pairs exactly as ``singa::Tokenizer`` yields them (column 1-based)."""
    start, n = 0, len(line)
    while start < n:
        pos = n
        for i in range(start, n):
            if line[i] in separator:
                pos = i
                break
        yield start + 1, line[start:start + pos]  # substr(start, pos): pos used as a length
        start = pos + 1


def stof(token: bytes) -> float | None:
    """``std::stof``'s value for a token (its numeric prefix), or None where stof throws."""
    m = _FLOAT.match(token)
    if not m:
        return None
    text = m.group(1).decode("ascii").lower()
    body = text.lstrip("+-")
    if body.startswith("0x"):
        value = float.fromhex(text)
    elif body.startswith("nan"):
        value = math.nan
    else:
        value = float(text)
    if math.isinf(value) and not body.startswith("inf") or abs(value) > float(np.finfo(np.float32).max):
        return None  # ERANGE -> std::out_of_range
    return value


def stoi(token: bytes) -> int | None:
    m = _INT.match(token)
    if not m:
        return None
    value = int(m.group(1))
    return value if _INT32[0] <= value <= _INT32[1] else None


def parse_csv_record(value, count: int, *, separator=",", has_label: bool = True, deploy: bool = False,
                     path="<csv>", line: int | None = None):
    """``(label or None, float32 array of count values)`` from one CSV line, as CSVInputLayer reads it."""
    if isinstance(value, str):
        value = value.encode("utf-8")
    sep = separator.encode("utf-8") if isinstance(separator, str) else bytes(separator)
    if not sep:
        raise ValueError("separator must not be empty")
    tokens = singa_tokens(bytes(value), sep)

    def need(what: str):
        tok = next(tokens, None)
        if tok is None:
            raise FormatError(path, f"too few fields: expected {'a label and ' if label_wanted else ''}"
                                    f"{count} values, the line ended before {what}", line=line)
        return tok

    label_wanted = has_label and not deploy
    label = None
    if label_wanted:
        column, tok = need("the label")
        label = stoi(tok)
        if label is None:
            raise FormatError(path, f"label {tok[:20]!r} is not an int32 (std::stoi fails)", line=line, column=column)
    out = np.empty(count, dtype=np.float32)
    for k in range(count):
        column, tok = need(f"value {k + 1}")
        v = stof(tok)
        if v is None:
            raise FormatError(path, f"value {k + 1}: {tok[:20]!r} is not a float (std::stof fails)",
                              line=line, column=column)
        out[k] = v
    extra = next(tokens, None)
    if extra is not None:
        raise FormatError(path, f"extra fields after the {count} values", line=line, column=extra[0])
    return label, out


def format_csv_record(label, values) -> bytes:
    """A line as CSVOutputLayer writes it: ``label,`` (if any) then ``%f`` floats joined by ``,``."""
    parts = [] if label is None else [str(int(label))]
    parts += ["%f" % float(v) for v in np.asarray(values, dtype=np.float32).ravel()]
    return ",".join(parts).encode("ascii")


def read_csv_records(store, count: int, *, separator=",", has_label: bool = True, deploy: bool = False):
    """Yield ``(label, values)`` for every tuple of an open store (errors name the line)."""
    for index, (_, value) in enumerate(store):
        yield parse_csv_record(value, count, separator=separator, has_label=has_label, deploy=deploy,
                               path=store.path, line=index + 1)
