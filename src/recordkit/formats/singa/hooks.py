"""The format registry's hooks for SINGA's stores (``formats/registry.py``): the probes, the record store and CSV
reader factories and the writers, with the registry's uniform signatures. Each imports its codec when called."""
from __future__ import annotations



def _singa_kind(path, storage_options):
    from recordkit.formats.singa.sniff import sniff_store as sniff_singa
    return sniff_singa(path, storage_options)


def probe_kvfile(path, head, src, storage_options) -> bool:
    return _singa_kind(path, storage_options) == "kvfile"


def probe_binfile(path, head, src, storage_options) -> bool:
    return _singa_kind(path, storage_options) == "binfile"


def probe_singa_shard(names) -> bool:
    return "shard.dat" in names


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


def create_kvfile(path, streams, *, checksums=False, storage_options=None, **_):
    from recordkit.formats.singa.deserializer import SingaRecordWriter
    return SingaRecordWriter(path, streams, store="kvfile", checksums=checksums, storage_options=storage_options)


def create_binfile(path, streams, *, checksums=False, storage_options=None, **_):
    from recordkit.formats.singa.deserializer import SingaRecordWriter
    return SingaRecordWriter(path, streams, store="binfile", checksums=checksums, storage_options=storage_options)
