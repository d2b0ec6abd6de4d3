"""The probes of the bridge formats (Parquet, Hugging Face, WebDataset, TFRecord), by name and first
bytes only: their packages import pyarrow and the like, which detection must not (``recordkit --help``
and a CTF file's commands stay free of them: ``tests/test_cli_startup.py``)."""
from __future__ import annotations

from recordkit.formats.directories import DESCRIPTION, numbered_set, visible

TFRECORD_EXTENSIONS = (".tfrecord", ".tfrecords")


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
