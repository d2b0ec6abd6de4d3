"""Checked argument types for every command: a bad value is one ``recordkit: error:`` line and
exit status 2 while the arguments are parsed, before any file is opened.

Each type is an ``argparse`` ``type=`` function raising ``ArgumentTypeError``; each carries
``invalid``, values it refuses, which ``tests/test_cli_arguments.py`` feeds to every option that
uses it. ``ArgumentParser`` prints argparse's own errors (unknown option, missing value, bad
choice) and the commands' cross-argument checks (``parser.error``) as one line too.
Standard library only: ``recordkit COMMAND --help`` must stay light (tests/test_cli_startup.py).
"""
from __future__ import annotations

import argparse

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: ``recordkit: error: WHAT (see `PROG --help`)``,
    the form every other recordkit error has, instead of a usage block and a second line."""

    def error(self, message):
        self.exit(2, f"recordkit: error: {message} (see `{self.prog} --help`)\n")


def _int(text: str, what: str) -> int:
    try:
        return int(str(text).strip(), 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, not {text!r}") from None


def _bounded(lowest: int, what: str, invalid: list[str], highest: int | None = None):
    def check(text: str) -> int:
        value = _int(text, what)
        if value < lowest or (highest is not None and value > highest):
            raise argparse.ArgumentTypeError(f"expected {what}, not {text}")
        return value
    check.__name__ = what.replace(" ", "_")
    check.invalid = invalid
    return check


positive_int = _bounded(1, "an integer >= 1", ["0", "-1", "x", "1.5", ""])
non_negative_int = _bounded(0, "an integer >= 0", ["-1", "x", "2.5", ""])
seed = _bounded(0, "a seed from 0 to 2^64-1", ["-1", "x", str(2**64), ""], 2**64 - 1)
suffix_length = _bounded(-1, "a number of digits >= -1 (-1: no zero padding)", ["-2", "x", ""], 64)


def proportions(text: str) -> list[float]:
    """``0.7,0.3``: one finite number >= 0 per data set, not all 0 (``read --weights/--repeats``)."""
    import math
    try:
        values = [float(v) for v in str(text).split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected numbers separated by commas, such as 0.7,0.3, not {text!r}") \
            from None
    if any(not math.isfinite(v) or v < 0 for v in values) or not any(values):
        raise argparse.ArgumentTypeError(f"expected finite numbers >= 0, not all 0, not {text!r}")
    return values


proportions.invalid = ["", "x", "0.5,-1", "0,0", "nan,1", "1,,2"]


def size(text: str) -> int:
    """A positive number of bytes: ``65536``, or with a binary suffix ``64K``, ``32M``, ``1G``
    (also ``32MiB``/``32MB``: powers of 1024, as CNTK's chunkSizeInBytes examples mean them)."""
    t = str(text).strip().lower()
    for tail in ("ib", "b"):
        if len(t) > len(tail) and t.endswith(tail) and t[-len(tail) - 1] in "kmgt":
            t = t[:-len(tail)]
            break
    unit = t[-1:] if t[-1:] in ("k", "m", "g", "t") else ""
    number = t[:-1] if unit else t
    try:
        value = int(number, 10) * _SIZE_UNITS[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size in bytes such as 65536, 64K or 32M, not {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive size in bytes, not {text}")
    return value


size.invalid = ["0", "-5", "x", "12Q", "1.5M", ""]


def non_empty(text: str) -> str:
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    return text


non_empty.invalid = [""]


def stream(text: str) -> str:
    """A ``--stream NAME=FORMAT:DIM[:ALIAS]`` declaration, checked now (kept as text: readers
    parse it again, some as a selection of a CBF file's streams)."""
    from recordkit.engine.streams import StreamSpec
    try:
        spec = StreamSpec.parse(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if spec.name == "key":
        raise argparse.ArgumentTypeError("'key' is reserved for the sequence key; choose another stream name")
    return text


stream.invalid = ["x", "x=dense", "x=dense:0", "x=dense:-3", "x=dense:abc", "x=tiny:3", "=dense:3",
                  "x=dense:3:", "x=dense:2147483648", "key=dense:3", "x=dense:3:a:b"]


def json_object(text: str) -> dict:
    import json
    try:
        value = json.loads(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not JSON: {e}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


json_object.invalid = ["{", "[1, 2]", "3", '"text"', ""]


def check_streams(parser: argparse.ArgumentParser, args) -> None:
    """The declared ``--stream``s as a set: unique names and aliases; ``--defines-mb-size`` one of them."""
    from recordkit.engine.streams import StreamSpec
    specs = [StreamSpec.parse(text) for text in getattr(args, "stream", None) or []]
    names, aliases = set(), set()
    for s in specs:
        if s.name in names:
            parser.error(f"argument --stream: stream name '{s.name}' is declared twice")
        if s.alias in aliases:
            parser.error(f"argument --stream: '{s.alias}' is the file name of two streams")
        names.add(s.name)
        aliases.add(s.alias)
    wanted = getattr(args, "defines_mb_size", None)
    if wanted is not None and specs and wanted not in names:
        parser.error(f"argument --defines-mb-size: no stream '{wanted}' among --stream "
                     f"({', '.join(sorted(names))})")

