"""OFRecord data sets: directories of ``part-NNNNN`` files, their frames and sidecar index.

Names follow OneFlow's ``OFRecordDataset``: part i is ``part_name_prefix`` + i zero-padded
to ``part_name_suffix_length`` digits (-1: no padding); only ``data_part_num`` parts are
read. Without ``data_part_num`` the directory is listed for ``<prefix><digits>`` files.
A sidecar index (``.<part>.rkidx`` beside each part) stores frame offsets; it is trusted
only while the part's size and modification time are those it was built from.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.ofrecord import _kernel

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
               part_name_suffix_length: int = -1) -> list[str]:
    """The part files of a data set (or ``[path]`` for a single file)."""
    path = os.fspath(path)
    if os.path.isfile(path):
        return [path]
    if not os.path.isdir(path):
        raise FileNotFoundError(f"{path}: no such file or directory")
    if data_part_num is not None:
        paths = [os.path.join(path, part_name(part_name_prefix, i, part_name_suffix_length))
                 for i in range(int(data_part_num))]
        missing = [p for p in paths if not os.path.isfile(p)]
        if missing:
            raise FileNotFoundError(f"{missing[0]}: part file missing ({len(missing)} of {len(paths)} missing; "
                                    f"check part_name_prefix/part_name_suffix_length)")
        return paths
    pattern = re.compile(re.escape(part_name_prefix) + r"(\d+)$")
    found = sorted((int(m.group(1)), name) for name in os.listdir(path) if (m := pattern.match(name)))
    if not found:
        raise FileNotFoundError(f"{path}: no '{part_name_prefix}N' part files")
    return [os.path.join(path, name) for _, name in found]


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


def scan_part(path: str) -> PartIndex:
    """Index a part file by its length prefixes: one compiled pass per block read with pread
    (no memory map, so a file truncated meanwhile is an error, not a SIGBUS)."""
    offsets, lengths = [], []
    problem = None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos < size:
            want = min(SCAN_BLOCK, size - pos)
            block = os.pread(f.fileno(), want, pos)
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
                    big = os.pread(f.fileno(), min(detail + 8, size - at), at)
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


def sidecar_path(path: str) -> str:
    d, name = os.path.split(path)
    return os.path.join(d, f".{name}.rkidx")


def load_index(path: str, *, write: bool = False) -> PartIndex:
    """The part's index from its sidecar when current, else a fresh scan (saved if ``write``)."""
    side = sidecar_path(path)
    st = os.stat(path)
    try:
        with np.load(side, allow_pickle=False) as z:
            meta = z["meta"]
            if str(z["magic"]) == INDEX_MAGIC and int(meta[0]) == st.st_size and int(meta[1]) == st.st_mtime_ns:
                offsets, lengths = z["offsets"].astype(np.int64), z["lengths"].astype(np.int64)
                if len(offsets) == len(lengths) and (len(offsets) == 0 or int(offsets[-1] + lengths[-1]) == st.st_size):
                    return PartIndex(path, offsets, lengths, st.st_size)
    except Exception:
        pass  # missing, stale, damaged or foreign: rebuild
    index = scan_part(path)
    if write and index.problem is None:
        _write_index(side, index, st)
    return index


def _write_index(side: str, index: PartIndex, st) -> None:
    from recordkit.atomic import AtomicFile
    try:
        with AtomicFile(side) as f:
            np.savez(f.file, magic=np.array(INDEX_MAGIC), meta=np.array([st.st_size, st.st_mtime_ns], np.int64),
                     offsets=index.offsets, lengths=index.lengths)
    except OSError:
        pass  # a read-only directory just means no sidecar


class OFRecordDataset:
    """Random access to the records of a data set: ``len()`` and ``ds[i]`` (parts in order).

    Built on the per-part indexes (sidecars reused while current, written with
    ``index_sidecar=True``), so opening a data set reads only the length prefixes once.
    """

    def __init__(self, path, data_part_num: int | None = None, part_name_prefix: str = "part-",
                 part_name_suffix_length: int = -1, *, index_sidecar: bool = True):
        self.paths = part_paths(path, data_part_num, part_name_prefix, part_name_suffix_length)
        self.indexes = [load_index(p, write=index_sidecar) for p in self.paths]
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
        f = self._files.get(part)
        if f is None:
            f = self._files[part] = open(self.paths[part], "rb")
        return os.pread(f.fileno(), int(index.lengths[j]), int(index.offsets[j]))

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
