"""OFRecord records converted feature by feature (no ``--stream``): WebDataset, TFRecord, Lance or MDS.

A record store is not a set of streams: an ImageNet-style OFRecord holds an encoded image and
a label per record. Forcing it through streams would decode (or densify) what the target can
hold as it is. So each record becomes one sample / one ``tf.train.Example`` with its features
kept by kind:

* WebDataset (a '/' in a feature name becomes '_': WebDataset would read a path): a numeric feature F becomes ``KEY.F.npy`` (a 1-D array of the list's own type); a
  bytes feature ``KEY.F.bin`` (``KEY.F.I.bin`` for the I-th of several values); an image feature
  (``image_features``) is copied unchanged as ``KEY.jpg`` / ``KEY.png`` (by the bytes' magic
  number; ``KEY.F.jpg`` when several features are images).
* TFRecord: a ``tf.train.Example`` with the same features: float_list stays float_list,
  double_list is narrowed to float_list (with a warning), int32/int64 lists become int64_list,
  bytes (images included) stay bytes_list, byte for byte.
* Lance: a column per feature (``formats/lance/records.py``): bytes (images included) as ``binary``
  columns, byte for byte, numbers as lists of their own type.
* MDS: a column per feature (``formats/mds/records.py``): an image feature as Streaming's ``jpeg`` /
  ``png`` column (which its readers decode to images), other bytes as ``bytes``, byte for byte;
  numbers as ``ndarray`` of their own type.

WebDataset and MDS record the numeric features of one length in every record as dense streams, so
recordkit's own commands read the output back without ``--stream``.

The key is the record's int64 ``key`` feature when it has one, else its position.
"""
from __future__ import annotations

import warnings

import numpy as np

from recordkit.errors import FormatError, RecordkitWarning, UsageError
from recordkit.formats.detect import image_extension


# the targets that hold records feature by feature
RECORD_TARGETS = ("webdataset", "tfrecord", "lance", "mds")

def iter_records(path, storage_options=None):
    """(part path, frame offset, record index, {name: Feature}) of every record, in part order."""
    from recordkit.formats.ofrecord import codec
    from recordkit.formats.ofrecord.dataset import part_paths, scan_part
    from recordkit.storage import open_source
    for part in part_paths(path, storage_options=storage_options):
        src = open_source(part, storage_options=storage_options)
        try:
            index = scan_part(src)
            data = src.pread(0, index.size)
        finally:
            src.close()
        err = index.error()
        for i, (off, n) in enumerate(zip(index.offsets.tolist(), index.lengths.tolist())):
            yield part, off - 8, i, codec.decode(data[off:off + n], path=part, offset=off - 8, index=i)
        if err is not None:
            raise err


def count_records(path, storage_options=None) -> int:
    from recordkit.formats.ofrecord.dataset import load_index, part_paths
    return sum(len(load_index(p, storage_options=storage_options))
               for p in part_paths(path, storage_options=storage_options))


def convert_records(src, dst, target: str, *, image_features=(), parts=None, shard_size=None, storage_options=None,
                    checksums: bool = False) -> int:
    """Convert an OFRecord data set record by record; the number of records written."""
    if target not in RECORD_TARGETS:
        raise UsageError(f"OFRecord records convert feature by feature to {', '.join(RECORD_TARGETS)}; for {target} "
                         f"declare the streams (--stream NAME=FORMAT:DIM:FEATURE)")
    images = list(image_features or ())
    total = count_records(src, storage_options) if parts else None
    opts = dict(parts=parts, shard_size=shard_size, total_sequences=total, checksums=checksums, storage_options=storage_options)
    if target == "webdataset":
        from recordkit.formats.webdataset import WebDatasetWriter
        writer = WebDatasetWriter(dst, [], **opts)
    elif target == "lance":
        from recordkit.formats.lance.records import LanceRecordWriter
        writer = LanceRecordWriter(dst, **opts)
    elif target == "mds":
        from recordkit.formats.mds.records import MDSRecordWriter
        writer = MDSRecordWriter(dst, images=images, **opts)
    else:
        from recordkit.formats.tfrecord import TFRecordWriter
        writer = TFRecordWriter(dst, [], **opts)
    narrowed = warned = False
    n = 0
    lengths: dict[str, int | None] = {}  # numeric feature -> its length in every record (None: it varies)
    with writer:
        for part, offset, index, rec in iter_records(src, storage_options):
            key, keyed = n, False
            kf = rec.get("key")
            if kf is not None and kf.kind == "int64_list" and len(kf) == 1:
                key, keyed = int(np.asarray(kf.value).view(np.uint64)[0]), True
            for name in images:
                f = rec.get(name)
                if f is None or f.kind != "bytes_list":
                    what = "missing" if f is None else f"a {f.kind}, not a bytes_list"
                    raise FormatError(part, f"image feature '{name}' is {what}", offset=offset, record=f"record {index}")
            if target == "webdataset":
                writer.write_sample(key, _members(rec, images, part, offset, index))
                _note_lengths(lengths, rec, images, n, skip="key" if keyed else None)
            elif target in ("lance", "mds"):  # images and other bytes as columns, byte for byte
                for name in images:
                    _image_kinds(name, rec[name], part, offset, index)
                writer.write_record(key, {k: f for k, f in rec.items() if not (keyed and k == "key")}, part=part,
                                    offset=offset, index=index)
                if target == "mds":
                    _note_lengths(lengths, rec, images, n, skip="key" if keyed else None)
            else:
                feats = {}
                for name, f in rec.items():
                    if f.kind == "bytes_list":
                        feats[name] = ("bytes_list", list(f.value))
                    elif f.kind in ("float_list", "double_list"):
                        narrowed |= f.kind == "double_list"
                        feats[name] = ("float_list", np.asarray(f.value, dtype=np.float32))
                    else:
                        feats[name] = ("int64_list", np.asarray(f.value, dtype=np.int64))
                if narrowed and not warned:
                    warnings.warn(f"{src}: double_list features narrowed to TFRecord's float32 float_list",
                                  RecordkitWarning, stacklevel=2)
                    warned = True
                writer.write_example(feats)
            n += 1
        if target == "webdataset":
            writer.declare_streams(_fixed_streams(lengths, member_field))
        elif target == "mds":
            writer.declare_streams(_fixed_streams(lengths, str))
    return n


def _note_lengths(lengths: dict, rec, images, n: int, skip: str | None) -> None:
    """Track each numeric feature's length over the records so far (None once it varies or is missing)."""
    numeric = {name: len(f.value) for name, f in rec.items()
               if name not in images and f.kind != "bytes_list" and name != skip}
    for name in set(lengths) | set(numeric):
        was = lengths.get(name, numeric.get(name) if n == 0 else None)
        lengths[name] = was if was is not None and numeric.get(name) == was else None


def _fixed_streams(lengths: dict, field) -> list:
    """Dense streams for the numeric features of one length in every record (``KEY.F.npy`` members,
    MDS columns), named as ``field(feature)`` names their data: what lets recordkit's own commands read
    the output (images and bytes stay members or columns only)."""
    from recordkit.engine.streams import StreamSpec
    return [StreamSpec(field(name), "dense", n) for name, n in sorted(lengths.items())
            if n and field(name) != "key"]


def member_field(name: str) -> str:
    """A feature name as a member field: '/' would make WebDataset read a path, so it becomes '_'."""
    return name.replace("/", "_")


def _image_kinds(feature, f, part, offset, index) -> list[str]:
    """The extension of each value of an image feature; an error naming the record unless each is JPEG or PNG."""
    kinds = []
    for i, blob in enumerate(f.value):
        ext = image_extension(blob)
        if ext is None:
            raise FormatError(part, f"image feature '{feature}' value {i} is neither JPEG nor PNG "
                                    f"(starts {bytes(blob[:8])!r})", offset=offset, record=f"record {index}")
        kinds.append(ext)
    return kinds


def _members(rec, images, part, offset, index) -> dict:
    members = {}
    for feature, f in sorted(rec.items()):
        name = member_field(feature)
        if feature in images:
            for i, (blob, ext) in enumerate(zip(f.value, _image_kinds(feature, f, part, offset, index))):
                stem = "" if len(images) == 1 and len(f.value) == 1 else (
                    name + "." if len(f.value) == 1 else f"{name}.{i}.")
                members[stem + ext] = bytes(blob)
        elif f.kind == "bytes_list":
            if len(f.value) == 1:
                members[name + ".bin"] = bytes(f.value[0])
            else:
                for i, blob in enumerate(f.value):
                    members[f"{name}.{i}.bin"] = bytes(blob)
        else:
            members[name + ".npy"] = np.asarray(f.value)
    if len(members) != sum(len(f.value) if (n in images or f.kind == "bytes_list") and len(f.value) != 1 else 1
                           for n, f in rec.items()):
        raise FormatError(part, "two features map to the same member name (a '/' became '_')", offset=offset,
                          record=f"record {index}")
    return members
