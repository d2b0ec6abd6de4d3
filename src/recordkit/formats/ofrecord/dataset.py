"""OFRecord data sets: directories of ``part-NNNNN`` files, their frames and sidecar index.

Names follow OneFlow's ``OFRecordDataset``: part i is ``part_name_prefix`` + i zero-padded
to ``part_name_suffix_length`` digits (-1: no padding); only ``data_part_num`` parts are
read. Without ``data_part_num`` the directory is listed for ``<prefix><digits>`` files.
A sidecar index (``.<part>.rkidx`` beside each part) stores frame offsets; it is trusted
only while the part's size and modification time are those it was built from. Paths may be
fsspec URLs; a remote part's index is kept in ``cache_dir`` when one is given.

A data set written from streams (``recordkit convert``, ``OFRecordWriter(streams=...)``) also
holds ``_recordkit_streams.json``: the stream declarations (``streams_to_json``: name, alias =
the feature name, dense/sparse, dim, precision), written with the parts and replaced with them,
so that reading the data set back as streams needs no declarations. OneFlow reads only
``part-N`` files and ignores it.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from recordkit.errors import FormatError, NotRegularFileError
from recordkit.formats.ofrecord import _kernel
from recordkit.storage import location, open_source

PROBLEMS = {
    1: "record length {detail} is not positive",
    2: "record length {detail} runs past the end of the file (truncated file?)",
    3: "{detail} bytes left at the end: too few for a record length (truncated file?)",
    4: "record length {detail} exceeds the limit",
}
INDEX_MAGIC = "recordkit-ofrecord-index"


def part_name(prefix: str, index: int, suffix_length: int = -1) -> str:
    digits = str(index)
    return prefix + "0" * max(suffix_length - len(digits), 0) + digits


def part_paths(path, data_part_num: int | None = None, part_name_prefix: str = "part-",
               part_name_suffix_length: int = -1, *, storage_options=None) -> list[str]:
    """The part files of a data set (or ``[path]`` for a single file); local or fsspec URLs."""
    path = path if isinstance(path, str) else os.fspath(path)
    location.ensure_regular(path, storage_options)  # a FIFO or device is refused, not "no such file"
    if location.isfile(path, storage_options):
        return [path]
    if not location.isdir(path, storage_options):
        raise FileNotFoundError(f"{path}: no such file or directory")
    if data_part_num is not None:
        paths = [location.join(path, part_name(part_name_prefix, i, part_name_suffix_length))
                 for i in range(int(data_part_num))]
        missing = [p for p in paths if not location.has_file(p, storage_options)]
        if missing:
            raise FileNotFoundError(f"{missing[0]}: part file missing ({len(missing)} of {len(paths)} missing; "
                                    f"check part_name_prefix/part_name_suffix_length)")
        return paths
    pattern = re.compile(re.escape(part_name_prefix) + r"(\d+)$")
    found = sorted((int(m.group(1)), name) for name in location.listdir(path, storage_options)
                   if (m := pattern.match(name)))
    if not found:
        raise FileNotFoundError(_no_parts(path, part_name_prefix, storage_options))
    return [location.join(path, name) for _, name in found]


STREAMS_SIDECAR = "_recordkit_streams.json"
STREAMS_MAGIC = "recordkit-ofrecord-streams"
STREAMS_VERSION = 1


def streams_document(streams, precision=None, *, key_feature: str | None = "key") -> bytes:
    """The bytes of ``_recordkit_streams.json`` for these streams."""
    import json
    from recordkit.engine.streams import streams_to_json
    doc = {"format": STREAMS_MAGIC, "version": STREAMS_VERSION, "streams": streams_to_json(streams, precision),
           "key_feature": key_feature}
    return (json.dumps(doc, indent=1) + "\n").encode()


def read_streams(directory, *, storage_options=None):
    """The stream declarations a data set directory records (``STREAMS_SIDECAR``), or None
    when it records none (a single part file, or a data set not written from streams). A
    sidecar that is not valid is a ``FormatError`` naming it and the field (``descriptions.py``):
    guessing would misread the data."""
    from recordkit.formats.descriptions import Fields
    directory = directory if isinstance(directory, str) else os.fspath(directory)
    if not location.isdir(directory, storage_options):
        return None
    path = location.join(directory, STREAMS_SIDECAR)
    if not location.has_file(path, storage_options):
        return None
    src = open_source(path, storage_options=storage_options)
    try:
        raw = src.pread(0, src.size)
    finally:
        src.close()
    fields = Fields(path)
    try:
        doc = fields.document(raw)
    except FormatError as e:
        raise FormatError(path, f"unreadable stream declarations: {e.message}", offset=0) from None
    fields.equal(doc.get("format"), "format", STREAMS_MAGIC)
    fields.equal(doc.get("version"), "version", STREAMS_VERSION)
    return fields.streams(doc.get("streams"), "streams")


def _no_parts(path: str, prefix: str, storage_options) -> str:
    """Why a directory is not a data set: what it lacks and what it holds instead."""
    from recordkit.formats.directories import holdings
    held = holdings(location.listdir(path, storage_options))
    return (f"{path}: is a directory, read as an OFRecord data set, but holds no part files named "
            f"'{prefix}<digits>' ({held}); for other names see --part-name-prefix (part_name_prefix)")


@dataclass
class PartIndex:
    path: str
    offsets: np.ndarray   # payload offsets
    lengths: np.ndarray   # payload lengths
    size: int
    problem: tuple | None = None  # (code, frame offset, record index, detail) where framing broke

    def __len__(self) -> int:
        return len(self.offsets)

    def error(self) -> FormatError | None:
        if self.problem is None:
            return None
        code, offset, index, detail = self.problem
        return FormatError(self.path, PROBLEMS[code].format(detail=detail), offset=offset, record=f"record {index}")


SCAN_BLOCK = 8 << 20


def read_part(path, storage_options=None) -> tuple["PartIndex", bytes]:
    """(index, bytes) of a whole part, local or remote (checksum-verified when it has a sidecar):
    read once, then indexed in memory from the length prefixes of the bytes just read. For the
    commands that decode every record (``stats``, ``cat``, ``report``); readers that stream use
    ``scan_part`` and pread."""
    from recordkit.formats.ofrecord import _kernel
    src = open_source(path, storage_options=storage_options)
    try:
        data = src.pread(0, src.size, cache=False)
    finally:
        src.close()
    offsets, lengths, problem = _kernel.scan_frames(data, 0)
    return PartIndex(str(src.name), offsets, lengths, len(data), problem), data


def scan_part(source) -> PartIndex:
    """Index a part file by its length prefixes: one compiled pass per block read with pread
    (no memory map, so a file truncated meanwhile is an error, not a SIGBUS).

    ``source``: a byte source (``recordkit.storage.open_source``) or a local path."""
    if isinstance(source, (str, os.PathLike)):
        src = open_source(os.fspath(source))
        try:
            return scan_part(src)
        finally:
            src.close()
    path = source.name
    offsets, lengths = [], []
    problem = None
    size = source.size
    pos = 0
    while pos < size:
        want = min(SCAN_BLOCK, size - pos)
        block = source.pread(pos, want, cache=False)
        if len(block) < want:  # the file shrank: index what is whole, report the rest
            size = pos + len(block)
            if not block:
                break
        o, n, prob = _kernel.scan_frames(block, pos)
        offsets.append(o)
        lengths.append(n)
        if prob is None:
            pos += len(block)
            continue
        code, at, index, detail = prob
        if code in (2, 3) and pos + len(block) < size:
            # the frame continues past this block: read again from its start, large enough for it
            if code == 2 and detail + 8 > SCAN_BLOCK:
                big = source.pread(at, min(detail + 8, size - at), cache=False)
                o2, n2, prob2 = _kernel.scan_frames(big[:8 + detail] if len(big) >= 8 + detail else big, at)
                offsets.append(o2)
                lengths.append(n2)
                if prob2 is not None:
                    problem = (prob2[0], prob2[1], sum(len(x) for x in offsets) - len(o2) + prob2[2], prob2[3])
                    break
                pos = at + 8 + detail
            else:
                pos = at
            continue
        problem = (code, at, sum(len(x) for x in offsets), detail)
        break
    all_offsets = np.concatenate(offsets) if offsets else np.zeros(0, np.int64)
    all_lengths = np.concatenate(lengths) if lengths else np.zeros(0, np.int64)
    return PartIndex(path, all_offsets, all_lengths, size, problem)


def sidecar_path(path: str, cache_dir=None) -> str:
    """``.<part>.rkidx`` beside a local part; for a remote part, inside ``cache_dir``."""
    if cache_dir is not None:
        import hashlib
        return os.path.join(os.fspath(cache_dir), hashlib.sha256(path.encode()).hexdigest()[:24] + ".rkidx")
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.rkidx")


def load_index(path: str, *, write: bool = False, storage_options=None, cache_dir=None) -> PartIndex:
    """The part's index from its sidecar when current, else a fresh scan (saved if ``write``).

    A remote part's index is kept only in ``cache_dir`` (always written there when given)."""
    src = open_source(path, storage_options=storage_options, cache_dir=cache_dir)
    try:
        return _load_index(src, write=write, cache_dir=cache_dir)
    finally:
        src.close()


def _load_index(src, *, write: bool, cache_dir) -> PartIndex:
    if src.remote and cache_dir is None:
        return scan_part(src)
    side = sidecar_path(src.name, cache_dir if src.remote else None)
    size, version = src.fingerprint
    current = False
    try:
        with location.open_local(side) as f, np.load(f, allow_pickle=False) as z:
            meta = z["meta"]
            current = str(z["magic"]) == INDEX_MAGIC and int(meta[0]) == size and int(meta[1]) == version
            if current:
                offsets, lengths = z["offsets"], z["lengths"]
                why = _untrusted_index_problem(src, offsets, lengths, size)
                if why is None:
                    return PartIndex(src.name, offsets.astype(np.int64), lengths.astype(np.int64), size)
                from recordkit.errors import warn
                warn(f"{side}: index sidecar of {src.name} ignored and rebuilt: {why}")
                write = True  # replace the lying sidecar
    except FileNotFoundError:
        pass
    except NotRegularFileError:
        raise  # a FIFO in the sidecar's place: refused (never opened, which would block), not replaced
    except Exception:
        pass  # stale, damaged or foreign: rebuild
    index = scan_part(src)
    if (write or src.remote) and index.problem is None:
        _write_index(side, index, src.fingerprint)
    return index


_SAMPLED_PREFIXES = 16


def _untrusted_index_problem(src, offsets, lengths, size: int) -> str | None:
    """What is wrong with a sidecar whose (size, mtime) matches, or None. A sidecar is input
    like any other (copied data sets keep mtimes, files get edited): the frames it describes
    must tile the part exactly, and the length prefixes at the first, last and a sample of
    records must say what it says."""
    if offsets.dtype.kind not in "iu" or lengths.dtype.kind not in "iu" or offsets.ndim != 1 \
            or offsets.shape != lengths.shape:
        return "offsets and lengths are not two integer arrays of one length"
    n = len(offsets)
    if n > size // 8:
        return f"{n} records cannot fit in {size} bytes"
    if n == 0:
        return None if size == 0 else "no records listed for a non-empty part"
    offsets = offsets.astype(np.int64)
    lengths = lengths.astype(np.int64)
    if (lengths <= 0).any() or (lengths > size).any():
        return "a record length is not within (0, part size]"
    if offsets[0] != 8 or (n > 1 and (offsets[1:] != offsets[:-1] + lengths[:-1] + 8).any()) \
            or offsets[-1] + lengths[-1] != size:
        return "its frames do not tile the part (a gap, an overlap, or not ending at the end of the file)"
    picks = np.unique(np.concatenate([[0, n - 1], np.linspace(0, n - 1, _SAMPLED_PREFIXES).astype(np.int64)]))
    for k in picks.tolist():
        head = src.pread(int(offsets[k]) - 8, 8)
        if len(head) != 8 or int(np.frombuffer(head, "<i8")[0]) != int(lengths[k]):
            return f"record {k}: the length prefix at byte offset {int(offsets[k]) - 8} disagrees"
    return None


def _write_index(side: str, index: PartIndex, fingerprint) -> None:
    from recordkit.storage.atomic import AtomicFile
    try:
        os.makedirs(os.path.dirname(os.path.abspath(side)), exist_ok=True)
        with AtomicFile(side, keep_sidecar=True) as f:
            np.savez(f.file, magic=np.array(INDEX_MAGIC), meta=np.array(list(fingerprint), np.int64),
                     offsets=index.offsets, lengths=index.lengths)
    except OSError:
        pass  # a read-only directory just means no sidecar


class OFRecordDataset:
    """Random access to the records of a data set: ``len()`` and ``ds[i]`` (parts in order).

    Built on the per-part indexes (sidecars reused while current, written with
    ``index_sidecar=True``), so opening a data set reads only the length prefixes once.
    """

    def __init__(self, path, data_part_num: int | None = None, part_name_prefix: str = "part-",
                 part_name_suffix_length: int = -1, *, index_sidecar: bool = True, storage_options=None,
                 cache_dir=None):
        self.paths = part_paths(path, data_part_num, part_name_prefix, part_name_suffix_length,
                                storage_options=storage_options)
        self._storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        self.indexes = [load_index(p, write=index_sidecar, **self._storage) for p in self.paths]
        for index in self.indexes:
            err = index.error()
            if err is not None:
                raise err
        self._starts = np.concatenate([[0], np.cumsum([len(i) for i in self.indexes])]).astype(np.int64)
        self._files: dict = {}

    def __len__(self) -> int:
        return int(self._starts[-1])

    def raw(self, i: int) -> bytes:
        """The serialized record i."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"record {i} out of range for {n} records")
        i %= n
        part = int(np.searchsorted(self._starts, i, side="right")) - 1
        index, j = self.indexes[part], i - int(self._starts[part])
        src = self._files.get(part)
        if src is None:
            src = self._files[part] = open_source(self.paths[part], **self._storage)
        n, at = int(index.lengths[j]), int(index.offsets[j])
        data = src.pread(at, n)
        if len(data) != n:
            raise FormatError(self.paths[part], f"file shrank while being read: record needs {n} bytes at offset "
                                                f"{at}, got {len(data)}", offset=at - 8, record=f"record {j}")
        return data

    def __getitem__(self, i: int) -> dict:
        from recordkit.formats.ofrecord import codec
        part = int(np.searchsorted(self._starts, i % max(len(self), 1), side="right")) - 1
        j = i % max(len(self), 1) - int(self._starts[part])
        return codec.decode(self.raw(i), path=self.paths[part], offset=int(self.indexes[part].offsets[j]) - 8,
                            index=j)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
