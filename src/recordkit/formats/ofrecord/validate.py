"""Validating an OFRecord data set: every part's framing, every record's protobuf, located.

Framing is scanned from the length prefixes of the part itself (a sidecar index is not
trusted here: validation is what tells whether it could be); every intact frame is then
decoded. A framing break ends what can be read of that part (the next length prefix is
unknown), so it is reported once, after the records before it.
"""
from __future__ import annotations

from collections import Counter
from typing import Iterator

import numpy as np

from recordkit.errors import FormatError, NotRegularFileError
from recordkit.formats.validate import Problem, checksum_problems, is_checksum_error
from recordkit.storage import location

# dataset.PROBLEMS codes -> kinds
FRAME_KINDS = {1: "frame-length-not-positive", 2: "frame-truncated", 3: "trailing-bytes", 4: "frame-too-long"}
READ_BLOCK = 8 << 20


def validate(path, *, checked: Counter, data_part_num=None, part_name_prefix="part-", part_name_suffix_length=-1,
             storage_options=None, cache_dir=None, **_) -> Iterator[Problem]:
    from recordkit.formats.ofrecord.dataset import part_paths
    for part in part_paths(path, data_part_num, part_name_prefix, part_name_suffix_length,
                           storage_options=storage_options):
        checked["files"] += 1
        bad_blocks = list(checksum_problems(part, storage_options=storage_options))
        yield from bad_blocks
        yield from _part(part, checked, storage_options, verify=not bad_blocks)


def _part(part: str, checked: Counter, storage_options, verify: bool) -> Iterator[Problem]:
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.dataset import scan_part
    from recordkit.storage.source import open_source
    src = open_source(part, storage_options=storage_options, verify=verify)
    try:
        try:
            index = scan_part(src)
        except FormatError as e:
            if not is_checksum_error(e):
                yield Problem.from_error(e, "unreadable")
            return
        checked["bytes"] += index.size
        offsets, lengths = index.offsets, index.lengths
        ends = offsets + lengths
        n, i = len(index), 0
        while i < n:  # blocks of records, not the whole part: memory stays bounded on large parts
            start = int(offsets[i]) - 8
            j = min(max(int(np.searchsorted(ends, start + READ_BLOCK, side="right")), i + 1), n)
            stop = int(ends[j - 1])
            block = src.pread(start, stop - start, cache=False)
            if len(block) != stop - start:
                yield Problem(part, "file-shrank", f"file shrank while being read: expected {stop - start} bytes",
                              offset=start, record=f"record {i}")
                return
            view = memoryview(block)
            for k in range(i, j):
                checked["records"] += 1
                off = int(offsets[k]) - start
                try:
                    rec = codec.decode(view[off:off + int(lengths[k])], path=part, offset=off + start - 8, index=k)
                except FormatError as e:
                    yield Problem(part, "record-does-not-parse", e.message, offset=int(offsets[k]) - 8,
                                  record=f"record {k}")
                    continue
                if not rec:
                    yield Problem(part, "record-empty", "record has no features", offset=int(offsets[k]) - 8,
                                  record=f"record {k}")
            i = j
        if index.problem is not None:
            err = index.error()
            yield Problem(part, FRAME_KINDS.get(index.problem[0], "framing"), err.message, offset=err.offset,
                          record=err.record)
        elif not src.remote:
            yield from _sidecar(part, src, index)
    finally:
        src.close()


def _sidecar(part: str, src, index) -> Iterator[Problem]:
    """A current ``.rkidx`` sidecar that disagrees with the frames just scanned (readers would warn,
    ignore and rebuild it): a warning naming it."""
    from recordkit.formats.ofrecord.dataset import INDEX_MAGIC, sidecar_path
    side = sidecar_path(part)
    try:
        with location.open_local(side) as f, np.load(f, allow_pickle=False) as z:
            if str(z["magic"]) != INDEX_MAGIC or tuple(int(x) for x in z["meta"][:2]) != tuple(src.fingerprint):
                return  # absent, foreign or stale: readers rebuild it without trusting it
            offsets, lengths = z["offsets"], z["lengths"]
    except NotRegularFileError:
        raise  # a FIFO in its place: refused, never opened
    except Exception:
        return
    if not (np.array_equal(offsets, index.offsets) and np.array_equal(lengths, index.lengths)):
        yield Problem(part, "index-sidecar", f"the index sidecar {side} does not describe this part's frames (it "
                                             f"lists {len(offsets)} records, the part has {len(index)}): readers "
                                             f"ignore and rebuild it", severity="warning")
