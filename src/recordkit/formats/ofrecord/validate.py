"""Validating an OFRecord data set: every part's framing, every record's protobuf, located.

Framing is scanned from the length prefixes of the part itself (a sidecar index is not
trusted here: validation is what tells whether it could be), block by block as the part is
read once; every intact frame is decoded from the block it was read in. A framing break ends
what can be read of that part (the next length prefix is unknown), so it is reported once,
after the records before it.
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
    """One pass over the part (``dataset.scan_blocks``): each block's frames found by their length
    prefixes, then decoded from the block just read."""
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.dataset import BlockScan, scan_blocks
    from recordkit.storage.source import open_source
    src = open_source(part, storage_options=storage_options, verify=verify)
    try:
        scan, k = BlockScan(scan_blocks(src, READ_BLOCK)), 0
        try:
            for block, base, o, n in scan:
                view = memoryview(block)
                for off, ln in zip(o.tolist(), n.tolist()):
                    checked["records"] += 1
                    try:
                        rec = codec.decode(view[off - base:off - base + ln], path=part, offset=off - 8, index=k)
                    except FormatError as e:
                        yield Problem(part, "record-does-not-parse", e.message, offset=off - 8,
                                      record=f"record {k}")
                        k += 1
                        continue
                    if not rec:
                        yield Problem(part, "record-empty", "record has no features", offset=off - 8,
                                      record=f"record {k}")
                    k += 1
        except FormatError as e:  # reading the part failed (a checksum error is reported by the sidecar check)
            if not is_checksum_error(e):
                yield Problem.from_error(e, "unreadable")
            return
        checked["bytes"] += scan.size
        index = scan.index(part)
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
