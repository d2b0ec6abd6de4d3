"""The description files of data sets as untrusted input: MDS ``index.json``, Hugging Face
``state.json`` / ``dataset_info.json``, recordkit's ``__recordkit__.json`` and OFRecord's
``_recordkit_streams.json``.

Users edit them by hand, copy shards between data sets, and other tools write them; what they
claim becomes the counts the engine sizes its arrays by (a sweep holds an entry per sequence a
chunk claims) and the names the readers open. So, as for checkpoints (``engine/checkpoint.py``),
every field a reader uses is checked for its JSON type and range before use; counts are checked
against the bytes of the files they describe (a shard cannot hold more sequences than its bytes
can encode); names stay inside the data set's directory; and the shards a description lists must
be exactly the shard files of its directory (a shard left out would shorten the data set without
a word). A bad field is one ``FormatError`` naming the file and the field, e.g.
``.../index.json: shards[2].samples: 1000000000000 samples cannot fit in 4096 bytes of
shard.00002.mds``: never a traceback, a huge allocation or a silently shorter data set.
"""
from __future__ import annotations

import json
import os

from recordkit.errors import FormatError
from recordkit.storage import location

# No real data set gets near this; it keeps arithmetic on described counts far from overflow.
MAX_COUNT = 1 << 62


def shown(value) -> str:
    """A JSON value as it is written in the file, cut short."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class Fields:
    """The checks of one description file: each returns the value it was given, or raises a
    ``FormatError`` naming the file and the field (``shards[2].samples``)."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, field: str, what: str) -> FormatError:
        return FormatError(self.path, f"{field}: {what}" if field else what)

    def document(self, data: bytes) -> dict:
        """The file's text parsed: a JSON object."""
        try:
            doc = json.loads(data)
        except ValueError as e:  # json.JSONDecodeError, UnicodeDecodeError
            raise FormatError(self.path, f"not valid JSON: {e}", offset=getattr(e, "pos", None)) from None
        except RecursionError:
            raise FormatError(self.path, "not a description: lists or objects nested too deeply") from None
        if not isinstance(doc, dict):
            raise self.fail("", f"expected a JSON object, found {shown(doc)}")
        return doc

    def object(self, value, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"expected an object, found {shown(value)}")
        return value

    def list(self, value, field: str) -> list:
        if not isinstance(value, list):
            raise self.fail(field, f"expected a list, found {shown(value)}")
        return value

    def int(self, value, field: str, lo: int = 0, hi: int = MAX_COUNT) -> int:
        # bool is an int subclass; 1.5 and "3" are not counts
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"expected an integer, found {shown(value)}")
        if not lo <= value <= hi:
            raise self.fail(field, f"{value} is out of range [{lo}, {hi}]")
        return value

    def text(self, value, field: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(field, f"expected a non-empty string, found {shown(value)}")
        return value

    def equal(self, value, field: str, expected) -> None:
        """A field with one meaning this reader knows (a format tag, a version)."""
        if type(value) is not type(expected) or value != expected:
            raise self.fail(field, f"found {shown(value)}, expected {shown(expected)}")

    def name(self, value, field: str) -> str:
        """A file directly in the data set's directory: a plain name, not a path."""
        name = self.text(value, field)
        if "/" in name or "\\" in name or "\0" in name or name in (".", ".."):
            raise self.fail(field, f"{shown(name)} is not a file name in the data set's directory")
        return name

    def streams(self, value, field: str) -> list:
        """Recorded stream declarations (``streams_from_json``)."""
        from recordkit.engine.streams import streams_from_json
        try:
            return streams_from_json(value, field)
        except (TypeError, ValueError) as e:
            raise self.fail("", str(e)) from None

    def count(self, value, field: str, *, unit: str, size: int, each: int, name: str, base: int = 0,
              shard: str | None = None) -> int:
        """A count of things of at least ``each`` bytes each, held (after ``base`` bytes of header)
        in the ``size`` bytes of file ``name``. One that cannot fit is an error in the description;
        with ``shard`` (the file's path, when the description does not record its size, so that a
        shard cut short looks the same) it is located at the shard's end instead."""
        n = self.int(value, field)
        if n and base + n * each > size:
            if shard is None:
                raise self.fail(field, f"{n} {unit} cannot fit in {size} bytes of {name}")
            raise FormatError(shard, f"{size} bytes cannot hold the {n} {unit} that {self.path.rsplit('/', 1)[-1]}'s "
                                     f"{field} says (shard truncated, or the description edited?)", offset=size)
        return n


def directory_files(directory: str, storage_options=None) -> dict[str, int]:
    """``{name: size}`` of the regular files directly in ``directory`` (symbolic links followed;
    FIFOs, devices and directories left out), in one listing, local or URL."""
    if location.is_url(directory):
        fs, p = location.filesystem(directory, storage_options)
        return {e["name"].rstrip("/").rsplit("/", 1)[-1]: int(e.get("size") or 0)
                for e in fs.ls(p, detail=True) if e.get("type") == "file"}
    out = {}
    with os.scandir(location.local_path(directory)) as entries:
        for e in entries:
            if e.is_file():
                out[e.name] = e.stat().st_size
    return out


def listed_files(fields: Fields, directory: str, listed: list[tuple[str, str]], is_shard, *,
                 storage_options=None, files: dict[str, int] | None = None) -> list[int]:
    """The sizes of the files a description lists (``(field, name)`` pairs, in order), after
    checking that they are exactly the directory's shard files (``is_shard(name)``): each listed
    once, none missing, none left out."""
    files = directory_files(directory, storage_options) if files is None else files
    seen = {}
    for field, name in listed:
        if name in seen:
            raise fields.fail(field, f"{name} is listed twice (also as {seen[name]})")
        seen[name] = field
        if name not in files:
            if not location.is_url(directory):  # a local FIFO there is no "missing" (remote: the listing said)
                location.has_file(location.join(directory, name), storage_options)
            raise fields.fail(field, f"{name} is listed, but {directory} holds no such file (shard missing?)")
    unlisted = sorted(n for n in files if is_shard(n) and n not in seen)
    if unlisted:
        more = f" and {len(unlisted) - 5} more" if len(unlisted) > 5 else ""
        raise fields.fail("", f"{directory} holds {len(unlisted)} shard file(s) the description does not list: "
                              f"{', '.join(unlisted[:5])}{more} (left over from another data set, or the "
                              f"description cut short?)")
    return [files[name] for _, name in listed]


def stays_inside(fields: Fields, directory: str, name: str, field: str) -> None:
    """A local file of the data set that is a symbolic link must still resolve inside its directory
    (a description may only name the data set's own files)."""
    if location.is_url(directory):
        return
    top = os.path.realpath(location.local_path(directory))
    real = os.path.realpath(os.path.join(top, name))
    if os.path.commonpath([top, real]) != top:
        raise fields.fail(field, f"{name} resolves to {real}, outside the data set's directory")
