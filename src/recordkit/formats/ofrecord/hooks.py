"""The format registry's hooks for OneFlow OFRecord (``formats/registry.py``): the probes, the reader factory and
the writer (``OFRecordSink``), with the registry's uniform signatures. Each imports its codec when called."""
from __future__ import annotations

import re
import struct

from recordkit.formats.registry import _selection

_PART_DIGITS = re.compile(r"^part-\d+$")


def probe_ofrecord(path, head, src, storage_options) -> bool:
    if len(head) < 8:
        return False
    length = struct.unpack("<q", head[:8])[0]
    if not 0 < length <= min(src.size - 8, 64 << 20):
        return False
    from recordkit.formats.ofrecord import schema
    msg = schema.OFRecord()
    try:
        msg.ParseFromString(src.pread(8, length, cache=False))
    except Exception:
        return False
    return len(msg.feature) > 0


def probe_ofrecord_parts(names) -> bool:
    return any(_PART_DIGITS.match(n) for n in names)


def open_ofrecord(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, trace_level=None,
                  **_):
    """Records as streams: ``streams`` declared, else the declarations the data set records
    (``_recordkit_streams.json``; without them a UsageError asks for ``--stream``)."""
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    return OFRecordDeserializer(path, _selection(streams), precision=precision, storage_options=storage_options,
                                cache_dir=cache_dir, trace_level=trace_level)


def create_ofrecord(path, streams, *, precision="float", parts=None, checksums=False, storage_options=None,
                    part_order="contiguous", total_sequences=None, **_):
    return OFRecordSink(path, streams, precision, parts or 1, order=part_order, total=total_sequences,
                        checksums=checksums, storage_options=storage_options)


class OFRecordSink:
    """CBF/CTF-writer-like adapter: chunks in, one OFRecord record per sequence out.

    Parts are contiguous runs by default (``order="contiguous"``): the input's sequence count
    (``total``, an upper bound: an error budget may drop some) fixes the runs, so the parts read
    in name order give file order; ``order="round-robin"`` deals sequence k to part k mod N. The
    stream declarations go into the data set (``_recordkit_streams.json``) so that converting
    back needs no ``--stream``.
    """

    def __init__(self, directory, streams, precision, parts, *, order="contiguous", total=None, **storage):
        import numpy as np
        from recordkit.formats.ofrecord.writer import OFRecordWriter
        self.streams = streams
        self.dtype = np.float64 if precision == "double" else np.float32
        if order == "round-robin" or total is None:
            sharding = dict(sharding="round_robin")
        else:
            sharding = dict(sharding="contiguous", total=total, exact_total=False)
        self.writer = OFRecordWriter(directory, parts, streams=streams, precision=precision, **sharding, **storage)

    @property
    def sequences_written(self) -> int:
        return self.writer.records_written

    def write_chunk(self, chunk) -> None:
        from recordkit.formats.ofrecord.deserializer import chunk_records
        for rec in chunk_records(chunk, self.streams, dtype=self.dtype):
            self.writer.write(rec)

    def close(self) -> None:
        self.writer.close()

    def abort(self) -> None:
        self.writer.abort()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.writer.__exit__(*exc)
