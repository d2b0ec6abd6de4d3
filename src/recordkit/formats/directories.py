"""Which directories are one data set: those that say so, and no other.

A directory says it is one data set by its names: a description (``__recordkit__.json``, an MDS
``index.json``, a Hugging Face ``state.json`` + ``dataset_info.json``, OFRecord's
``_recordkit_streams.json``), its format's fixed layout (OFRecord ``part-N`` files, a SINGA
``shard.dat``), or files of one format *numbered under one name*, which is what every sharding
writer produces (``part-00000.cbf``, ``part-00001.cbf``; ``shard-000000.tar``; ``train-0.tar``,
``train-1.tar``; Ray's ``part-00000-00001.parquet``). The format registry's directory probes
(``formats/bridge_probes.py`` and the packages' ``hooks.py``) decide on the names alone, and the readers list a directory's files
through ``part_paths``, the same rule.

Any other directory (``train.parquet`` beside ``test.parquet``) is a ``NotADataSetError`` that
says what it holds and how to read a file of it: reading two unrelated files back to back
as one data set, because they share an extension, would be silently wrong data.
"""
from __future__ import annotations

import os
import re

from recordkit.errors import NotADataSetError
from recordkit.storage import location

# a numbered file's name without its extension: a prefix, then a number (Ray adds -BLOCK numbers)
_NUMBERED = re.compile(r"(?P<prefix>.*?)(?P<numbers>\d+(?:-\d+)*)")
_SHOWN = 5
DESCRIPTION = "__recordkit__.json"  # what a shard-format data set says of itself (formats/sharding.py)


def visible(names) -> list[str]:
    """The entries a data set is made of: hidden ones (temporaries, index sidecars) left out."""
    return sorted(n for n in names if not n.startswith("."))


def numbered_set(names, extensions: tuple[str, ...]) -> list[str] | None:
    """The names with one of ``extensions`` in part order (their numbers, then the name) when they
    are one numbered set (at least one, every one ``PREFIX<digits>[-<digits>...]EXT`` with the same
    PREFIX); None otherwise."""
    files = [n for n in visible(names) if n.lower().endswith(extensions)]
    if not files:
        return None
    keys, prefixes = {}, set()
    for name in files:
        ext = next(e for e in extensions if name.lower().endswith(e))
        m = _NUMBERED.fullmatch(name[:len(name) - len(ext)])
        if m is None:
            return None
        prefixes.add(m["prefix"])
        keys[name] = tuple(int(x) for x in m["numbers"].split("-"))
    if len(prefixes) != 1:
        return None
    return sorted(files, key=lambda n: (keys[n], n))


def part_paths(directory: str, extensions: tuple[str, ...], storage_options=None) -> list[str]:
    """The files of a directory of numbered parts (``numbered_set``) in part order; any other
    directory is a ``NotADataSetError`` saying what it holds."""
    names = location.listdir(directory, storage_options)
    ordered = numbered_set(names, extensions)
    if ordered is None:
        raise not_a_data_set(directory, names, extensions)
    return [location.join(directory, n) for n in ordered]


def holdings(names) -> str:
    """``it holds 7 entries: a, b, c, d, e, ...`` (or ``it is empty``): what a directory that is not
    what was expected holds instead, in a message."""
    shown = visible(names)
    if not shown:
        return "it is empty"
    more = ", ..." if len(shown) > _SHOWN else ""
    entries = "1 entry" if len(shown) == 1 else f"{len(shown)} entries"
    return f"it holds {entries}: {', '.join(shown[:_SHOWN])}{more}"


def not_a_data_set(directory: str, names, extensions: tuple[str, ...] = ()) -> NotADataSetError:
    """The error for a directory that does not say it is one data set: what it holds, and how to
    read one of its files, or several as one data set, on purpose (``extensions``: the format's
    expected, if known: the first names the parts in the hint)."""
    shown = visible(names)
    if not shown:
        return NotADataSetError(f"{directory}: is an empty directory, not a data set")
    data = [n for n in shown if n.lower().endswith(extensions)] if extensions else []
    example = (data or shown)[0]
    ext = extensions[0] if extensions else os.path.splitext(example)[1]
    return NotADataSetError(
        f"{directory}: is a directory but not one data set ({holdings(names)}): a directory is one data set "
        f"only when it says so, by numbered parts (part-00000{ext}, part-00001{ext}, ...) or a description "
        f"(__recordkit__.json, index.json, state.json, ...). Name one file to read it "
        f"({location.join(directory, example)}); to read several as one, number them so in a directory of "
        f"their own (OFRecord parts named otherwise: --part-name-prefix)")
