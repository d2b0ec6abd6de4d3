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
import threading
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


def scan_blocks(source, block_size: int | None = None, size: int | None = None, read=None):
    """A part read front to back in blocks with pread (no memory map, so a file truncated
    meanwhile is an error, not a SIGBUS), each block's frames found by one compiled pass.

    Yields ``(block, file offset of the block, payload offsets (absolute), payload lengths)``
    for the intact frames of each block (every frame whole in one block: a frame running past a
    block is read again at the start of the next); returns ``(size, problem)`` with problem as
    ``PartIndex.problem``. ``scan_part`` keeps only the offsets; a reader decodes the blocks too,
    so that a part is read once. ``size``: read only that much (the part as it was when a reader
    opened it); ``read(source, offset, n)``: how to read a block (default: fresh bytes)."""
    block_size = block_size or SCAN_BLOCK
    read = read or _pread
    size = source.size if size is None else min(int(size), source.size)
    pos = count = 0
    problem = None
    while pos < size:
        want = min(block_size, size - pos)
        block = read(source, pos, want)
        if len(block) < want:  # the file shrank: index what is whole, report the rest
            size = pos + len(block)
            if not block:
                break
        o, n, prob = _kernel.scan_frames(block, pos)
        if len(o):
            yield block, pos, o, n
            count += len(o)
        if prob is None:
            pos += len(block)
            continue
        code, at, index, detail = prob
        if code in (2, 3) and pos + len(block) < size:
            # the frame continues past this block: read again from its start, large enough for it
            if code == 2 and detail + 8 > block_size:
                big = read(source, at, min(detail + 8, size - at))
                o2, n2, prob2 = _kernel.scan_frames(big[:8 + detail] if len(big) >= 8 + detail else big, at)
                if len(o2):
                    yield big, at, o2, n2
                if prob2 is not None:
                    problem = (prob2[0], prob2[1], count + prob2[2], prob2[3])
                    break
                count += len(o2)
                pos = at + 8 + detail
            else:
                pos = at
            continue
        problem = (code, at, count, detail)
        break
    return size, problem


def _pread(source, offset: int, n: int):
    return source.pread(offset, n, cache=False)


def scan_part(source) -> PartIndex:
    """Index a part file by its length prefixes (``scan_blocks``, keeping only the offsets).

    ``source``: a byte source (``recordkit.storage.open_source``) or a local path."""
    if isinstance(source, (str, os.PathLike)):
        src = open_source(os.fspath(source))
        try:
            return scan_part(src)
        finally:
            src.close()
    from recordkit.formats.ofrecord.buffers import Buffers
    scan = BlockScan(scan_blocks(source, read=Buffers().pread))  # each block dropped once scanned: one buffer reused
    for _ in scan:
        pass
    return scan.index(source.name)


class BlockScan:
    """``scan_blocks`` iterated while keeping what a part index needs: each block's payload offsets
    and lengths as it passes, then, once the blocks are done, the part's ``size`` and ``problem``
    (the generator's return value). ``index(name)`` is the part's index after the loop."""

    def __init__(self, blocks):
        self._blocks = blocks
        self.offsets: list = []
        self.lengths: list = []
        self.size = 0
        self.problem = None

    def __iter__(self):
        while True:
            try:
                item = next(self._blocks)
            except StopIteration as done:
                self.size, self.problem = done.value
                return
            self.offsets.append(item[2])
            self.lengths.append(item[3])
            yield item

    def index(self, name: str) -> PartIndex:
        return index_of(name, self.offsets, self.lengths, self.size, self.problem)


def index_of(path, offsets: list, lengths: list, size: int, problem) -> PartIndex:
    """A PartIndex from the per-block offset and length arrays of a scan."""
    return PartIndex(path, np.concatenate(offsets) if offsets else np.zeros(0, np.int64),
                     np.concatenate(lengths) if lengths else np.zeros(0, np.int64), size, problem)


# -- indexes kept in the process ---------------------------------------------------------------------
# A part scanned (or whose sidecar was read) once in a process is not scanned again by the next
# reader of it: the index is kept under the part's (size, version) fingerprint, and checked like a
# sidecar (frames tiling the part, sampled length prefixes) before it is used again.
_KEPT: "dict[str, tuple]" = {}
_KEPT_RECORDS = 1 << 22  # at most ~4M records (64 MB of offsets and lengths) kept, oldest dropped first
_KEPT_LOCK = threading.Lock()


def keep_index(index: PartIndex, fingerprint) -> None:
    """Remember a part's index for later opens in this process (only an index without a problem:
    a broken part is scanned again, so that its error is found where it is)."""
    if index.problem is not None or len(index) > _KEPT_RECORDS:
        return
    with _KEPT_LOCK:
        _KEPT.pop(index.path, None)
        _KEPT[index.path] = (tuple(fingerprint), index)
        total = sum(len(i) for _, i in _KEPT.values())
        while total > _KEPT_RECORDS:
            oldest = next(iter(_KEPT))
            total -= len(_KEPT.pop(oldest)[1])


def _kept_index(src) -> PartIndex | None:
    with _KEPT_LOCK:
        kept = _KEPT.get(src.name)
    if kept is None or kept[0] != tuple(src.fingerprint):
        return None
    index = kept[1]
    if _untrusted_index_problem(src, index.offsets, index.lengths, src.fingerprint[0]) is not None:
        with _KEPT_LOCK:
            _KEPT.pop(src.name, None)  # the part changed under the same fingerprint: scan it again
        return None
    return index


def sidecar_path(path: str, cache_dir=None) -> str:
    """``.<part>.rkidx`` beside a local part; for a remote part, inside ``cache_dir``."""
    if cache_dir is not None:
        import hashlib
        return os.path.join(os.fspath(cache_dir), hashlib.sha256(path.encode()).hexdigest()[:24] + ".rkidx")
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.rkidx")


def load_index(path: str, *, write: bool = False, scan: bool = True, storage_options=None,
               cache_dir=None) -> PartIndex | None:
    """The part's index: from its sidecar when current, else kept from an earlier open in this
    process, else a fresh scan (saved if ``write``); with ``scan=False`` None instead of a scan
    (a reader that reads the whole part finds the frames while reading).

    A remote part's index is kept only in ``cache_dir`` (always written there when given)."""
    src = open_source(path, storage_options=storage_options, cache_dir=cache_dir)
    try:
        return _load_index(src, write=write, cache_dir=cache_dir, scan=scan)
    finally:
        src.close()


def _load_index(src, *, write: bool, cache_dir, scan: bool = True) -> PartIndex | None:
    if src.remote and cache_dir is None:
        return _scanned(src, scan)
    side = sidecar_path(src.name, cache_dir if src.remote else None)
    size, version = src.fingerprint
    current = False
    try:
        magic, meta, offsets, lengths = _read_sidecar(side)
        current = magic == INDEX_MAGIC and int(meta[0]) == size and int(meta[1]) == version
        if current:
            why = _untrusted_index_problem(src, offsets, lengths, size)
            if why is None:
                index = PartIndex(src.name, offsets.astype(np.int64), lengths.astype(np.int64), size)
                keep_index(index, src.fingerprint)
                return index
            from recordkit.errors import warn
            warn(f"{side}: index sidecar of {src.name} ignored and rebuilt: {why}")
            write = True  # replace the lying sidecar
    except FileNotFoundError:
        pass
    except NotRegularFileError:
        raise  # a FIFO in the sidecar's place: refused (never opened, which would block), not replaced
    except Exception:
        pass  # stale, damaged or foreign: rebuild
    kept = _kept_index(src)
    if kept is not None:
        if write:
            save_index(src, kept, cache_dir)
        return kept
    if not scan:
        return None
    index = _scanned(src, True)
    if write or src.remote:
        save_index(src, index, cache_dir)
    return index


_SIDECARS: "dict[str, tuple]" = {}  # sidecar path -> (its (size, mtime, inode), what _read_sidecar read)


def _read_sidecar(side: str) -> tuple:
    """(magic, meta, offsets, lengths) of an index sidecar. Its arrays as read before in this process
    while the file is the same one (size, mtime, inode): a loop that opens the data set every epoch
    spent ~0.35 ms a part in ``np.load`` of the zip (what it read is checked against the part as
    before, every time). Kept for as many records as the kept indexes."""
    with location.open_local(side) as f:
        st = os.fstat(f.fileno())
        key = (st.st_size, st.st_mtime_ns, st.st_ino)
        with _KEPT_LOCK:
            hit = _SIDECARS.get(side)
        if hit is not None and hit[0] == key:
            return hit[1]
        with np.load(f, allow_pickle=False) as z:
            got = (str(z["magic"]), z["meta"], z["offsets"], z["lengths"])
    with _KEPT_LOCK:
        _SIDECARS.pop(side, None)
        _SIDECARS[side] = (key, got)
        total = sum(len(g[3]) for _, g in _SIDECARS.values())
        while total > _KEPT_RECORDS and len(_SIDECARS) > 1:
            total -= len(_SIDECARS.pop(next(iter(_SIDECARS)))[1][3])
    return got


def _scanned(src, scan: bool) -> PartIndex | None:
    """The index kept in the process (checked again), else a scan (kept), else None."""
    kept = _kept_index(src)
    if kept is not None or not scan:
        return kept
    index = scan_part(src)
    keep_index(index, src.fingerprint)
    return index


def save_index(src, index: PartIndex, cache_dir=None) -> None:
    """Write the sidecar of a part's index (not of a part with a framing problem; a remote part's
    only into ``cache_dir``)."""
    if index.problem is None and (not src.remote or cache_dir is not None):
        _write_index(sidecar_path(src.name, cache_dir if src.remote else None), index, src.fingerprint)


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
