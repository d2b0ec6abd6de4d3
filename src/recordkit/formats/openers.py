"""The registry's hooks for the formats that predate it: probes that recognise a path, and
reader/writer factories with the registry's uniform signatures (``formats/registry.py``).

Each function imports its codec when called, so importing this module costs nothing.
"""
from __future__ import annotations

import re
import struct
from recordkit.engine import DEFAULT_CHUNK_SIZE
from recordkit.formats.directories import DESCRIPTION, numbered_set, visible

_PART_DIGITS = re.compile(r"^part-\d+$")
TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords")


# -- probes: (path, head bytes, byte source, storage_options) for files; (names) for directories --
def probe_cbf(path, head, src, storage_options) -> bool:
    from recordkit.formats.cbf import layout
    return len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == layout.MAGIC


def probe_cbf_parts(names) -> bool:
    return numbered_set(names, (".cbf",)) is not None


def probe_parquet(path, head, src, storage_options) -> bool:
    return head[:4] == b"PAR1"


def probe_parquet_parts(names) -> bool:
    return numbered_set(names, (".parquet",)) is not None


def probe_hf(names) -> bool:
    return "state.json" in names and "dataset_info.json" in names


def _described_or_numbered(names, extensions) -> bool:
    """A shard format's directory: its description beside shards of the format (the description
    lists them, whatever their names), or numbered shards."""
    if DESCRIPTION in names and any(n.lower().endswith(extensions) for n in visible(names)):
        return True
    return numbered_set(names, extensions) is not None


def probe_tfrecord_parts(names) -> bool:
    return _described_or_numbered(names, TFRECORD_EXTENSIONS)


def probe_tfrecord(path, head, src, storage_options) -> bool:
    return str(path).lower().endswith((".tfrecord", ".tfrecords"))


def probe_webdataset_shards(names) -> bool:
    return _described_or_numbered(names, (".tar",))


def probe_webdataset(path, head, src, storage_options) -> bool:
    return str(path).lower().endswith(".tar")


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


def _singa_kind(path, storage_options):
    from recordkit.formats.singa.sniff import sniff_store as sniff_singa
    return sniff_singa(path, storage_options)


def probe_kvfile(path, head, src, storage_options) -> bool:
    return _singa_kind(path, storage_options) == "kvfile"


def probe_binfile(path, head, src, storage_options) -> bool:
    return _singa_kind(path, storage_options) == "binfile"


def probe_singa_shard(names) -> bool:
    return "shard.dat" in names


# -- readers -------------------------------------------------------------------------------------
def _selection(streams):
    """``--stream`` texts or StreamSpecs (or None) as StreamSpecs."""
    if streams is None:
        return None
    from recordkit.engine.streams import StreamSpec
    return [s if isinstance(s, StreamSpec) else StreamSpec.parse(s) for s in streams] or None


def open_ctf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, max_errors=0,
             skip_sequence_ids=False, trace_level=None, chunk_size=DEFAULT_CHUNK_SIZE, cache_index=False,
             allow_empty_streams=None, allow_padding=None, **_):
    from recordkit.errors import UsageError
    from recordkit.formats.ctf import CTFReader
    streams = _selection(streams)
    if not streams:
        from recordkit.formats import registry
        from recordkit.formats.detect import streams_needed
        raise UsageError(streams_needed(path, registry.get("ctf"), storage_options))
    return CTFReader(path, streams, precision=precision or "float", max_errors=max_errors,
                     skip_sequence_ids=skip_sequence_ids, trace_level=trace_level, chunk_size=chunk_size,
                     cache_index=cache_index, allow_empty_streams=allow_empty_streams, allow_padding=allow_padding,
                     storage_options=storage_options, cache_dir=cache_dir)


def open_cbf(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, trace_level=None,
             allow_empty_streams=None, **_):
    """A CBF file, or a directory of CBF parts (``convert --engine ray OUT.cbf``) read as one data set."""
    from recordkit.formats.cbf.parts import open_cbf_data_set
    return open_cbf_data_set(path, _selection(streams), precision=precision, storage_options=storage_options,
                             cache_dir=cache_dir, trace_level=trace_level, allow_empty_streams=allow_empty_streams)


def open_ofrecord(path, streams=None, *, precision=None, storage_options=None, cache_dir=None, trace_level=None,
                  **_):
    """Records as streams: ``streams`` declared, else the declarations the data set records
    (``_recordkit_streams.json``; without them a UsageError asks for ``--stream``)."""
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    return OFRecordDeserializer(path, _selection(streams), precision=precision, storage_options=storage_options,
                                cache_dir=cache_dir, trace_level=trace_level)


def open_singa(path, streams=None, *, precision=None, storage_options=None, **_):
    from recordkit.formats.singa.deserializer import SingaRecordDeserializer
    return SingaRecordDeserializer(path, precision=precision or "float", storage_options=storage_options)


def open_csv(path, streams=None, *, precision=None, storage_options=None, csv_dim=None, csv_separator=",",
             csv_has_label=True, **_):
    from recordkit.errors import UsageError
    from recordkit.formats.singa.deserializer import SingaCSVDeserializer
    if not csv_dim:
        raise UsageError("--from csv needs --csv-dim N (the values per line)")
    return SingaCSVDeserializer(path, csv_dim, separator=csv_separator, has_label=csv_has_label,
                                precision=precision or "float", storage_options=storage_options)


# -- writers -------------------------------------------------------------------------------------

def create_cbf(path, streams, *, precision="float", chunk_size=None, checksums=False, storage_options=None, **_):
    from recordkit.formats.cbf import CBFWriter
    return CBFWriter(path, streams, precision=precision, chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
                     checksums=checksums, storage_options=storage_options)


def create_ctf(path, streams, *, precision="float", checksums=False, storage_options=None, **_):
    from recordkit.formats.ctf import CTFWriter
    return CTFWriter(path, streams, precision=precision, checksums=checksums, storage_options=storage_options)


def create_ofrecord(path, streams, *, precision="float", parts=None, checksums=False, storage_options=None,
                    part_order="contiguous", total_sequences=None, **_):
    return OFRecordSink(path, streams, precision, parts or 1, order=part_order, total=total_sequences,
                        checksums=checksums, storage_options=storage_options)


def create_kvfile(path, streams, *, checksums=False, storage_options=None, **_):
    from recordkit.formats.singa.deserializer import SingaRecordWriter
    return SingaRecordWriter(path, streams, store="kvfile", checksums=checksums, storage_options=storage_options)


def create_binfile(path, streams, *, checksums=False, storage_options=None, **_):
    from recordkit.formats.singa.deserializer import SingaRecordWriter
    return SingaRecordWriter(path, streams, store="binfile", checksums=checksums, storage_options=storage_options)


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
