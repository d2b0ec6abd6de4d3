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
        writer = MDSRecordWriter(dst, **opts)
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
                members = _members(rec, images, part, offset, index)
                writer.write_sample(key, members)
                _note_lengths(lengths, _member_kinds(rec, images, members, keyed), n)
            elif target == "lance":  # images and other bytes as binary columns, byte for byte
                for name in images:
                    _image_kinds(name, rec[name], part, offset, index)
                writer.write_record(key, {k: f for k, f in rec.items() if not (keyed and k == "key")}, part=part,
                                    offset=offset, index=index)
            elif target == "mds":  # images as jpeg/png columns, other bytes as bytes columns, byte for byte
                for name in images:
                    _image_kinds(name, rec[name], part, offset, index)
                columns = _mds_columns(rec, keyed, part, offset, index)
                writer.write_record(key, columns, images, part=part, offset=offset, record=f"record {index}")
                _note_lengths(lengths, _fixed_lengths(columns), n)
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


def convert_samples(src, dst, target: str, *, parts=None, shard_size=None, storage_options=None,
                    checksums: bool = False) -> int:
    """Convert a WebDataset sample by sample into MDS (``converts_members``); the number of samples
    written. A member ``F.npy`` becomes the ndarray column F (its own dtype and shape), ``F.cls`` the
    int64 column F, a ``.jpg`` / ``.jpeg`` / ``.png`` member a ``jpeg`` / ``png`` column of its bytes
    unchanged, any other member a ``bytes`` column, each named by its field; the description's streams
    (else the 1-D numeric columns of one length) are recorded, so recordkit reads the set back."""
    from recordkit.formats.mds.records import MDSRecordWriter
    from recordkit.formats.sharding import read_description
    from recordkit.formats.webdataset.reader import iter_samples
    from recordkit.storage import location
    if target != "mds":
        raise UsageError(f"WebDataset samples convert member by member to mds only, not {target}")
    doc = None
    if location.isdir(src, storage_options):
        doc = read_description(src, "webdataset", storage_options, is_shard=lambda name: name.endswith(".tar"),
                               sequence_bytes=512)
    total = sum(s["sequences"] for s in doc["shards"]) if parts and doc else None
    if parts and total is None:
        total = sum(1 for _ in iter_samples(src, storage_options))
    n = 0
    lengths: dict[str, int | None] = {}
    with MDSRecordWriter(dst, parts=parts, shard_size=shard_size, total_sequences=total, checksums=checksums,
                         storage_options=storage_options) as writer:
        for shard, offset, index, key, members in iter_samples(src, storage_options):
            columns, images = _sample_columns(members, shard, offset, index)
            number = int(key) if key.isdigit() and int(key) < 1 << 64 else n  # numeric keys are keys, as read
            kept = columns.get("key")  # a record's own int64 key (OFRecord -> WebDataset wrote it as key.npy)
            if isinstance(kept, np.ndarray) and kept.dtype == np.int64 and kept.shape == (1,):
                number = int(columns.pop("key").view(np.uint64)[0])
            writer.write_record(number, columns, images, part=shard, offset=offset, record=f"sample {index}")
            _note_lengths(lengths, _fixed_lengths(columns), n)
            n += 1
        found = _fixed_streams(lengths, str)   # named by the columns, as a recorded stream names its field
        # the description's numeric streams keep their precision; bytes streams are named by their columns
        # (a member F.bin is the column F.bin)
        writer.declare_streams([s for s in doc["streams"] if not s.is_bytes] + [s for s in found if s.is_bytes]
                               if doc else found)
    return n


def converts_members(source_format: str, target: str, path, storage_options=None) -> bool:
    """Whether a conversion without ``--stream`` goes member by member: a WebDataset into MDS whose
    first sample holds members no stream reads (images, text, other bytes), which a conversion of
    its streams would leave behind."""
    if source_format != "webdataset" or target != "mds":
        return False
    from recordkit.formats.webdataset.members import extension
    from recordkit.formats.webdataset.reader import iter_samples
    for *_, members in iter_samples(path, storage_options):
        return any(extension(field) not in ("npy", "cls") for field in members)
    return False


IMAGE_MEMBERS = ("jpg", "jpeg", "png")
BYTES = "bytes"   # what ``_note_lengths`` tracks for a bytes value


def _sample_columns(members: dict, shard: str, offset: int, index: int) -> tuple[dict, list]:
    """A WebDataset sample's members as MDS column values (see ``convert_samples``), and the columns
    holding images; a member that is not what its extension says is a located error."""
    from recordkit.formats.webdataset import npy
    from recordkit.formats.webdataset.members import cls_value, extension
    columns, images = {}, []
    for field, data in sorted(members.items()):
        ext = extension(field)
        name = field[:-len(ext) - 1] if ext in ("npy", "cls") and field != ext else field
        try:
            if ext == "npy":
                dtype, shape, start, nbytes = npy.parse(data, 0, len(data))
                value = np.frombuffer(data, dtype, nbytes // max(dtype.itemsize, 1), start).reshape(shape)
            elif ext == "cls":
                value = np.array([cls_value(data)], dtype=np.int64)
            else:
                value = data
        except (ValueError, npy.NpyError, UnicodeDecodeError) as e:
            raise FormatError(shard, f"member '{field}': {e}", offset=offset, record=f"sample {index}") from None
        if name in columns:
            raise FormatError(shard, f"member '{field}' and another both name the column '{name}'", offset=offset,
                              record=f"sample {index}")
        columns[name] = value
        if ext in IMAGE_MEMBERS:
            images.append(name)
    return columns, images


def _mds_columns(rec, keyed: bool, part, offset, index) -> dict:
    """An OFRecord record's features as MDS column values: a bytes feature's one value (an MDS column
    holds one a sample: several are a located error), a numeric feature's array of its own type."""
    columns = {}
    for name, f in rec.items():
        if keyed and name == "key":
            continue
        if f.kind != "bytes_list":
            columns[name] = np.asarray(f.value)
        elif len(f.value) == 1:
            columns[name] = bytes(f.value[0])
        else:
            raise FormatError(part, f"feature '{name}' holds {len(f.value)} values: an MDS column holds one value "
                                    f"a sample", offset=offset, record=f"record {index}")
    return columns


def _fixed_lengths(columns: dict) -> dict:
    """What ``_note_lengths`` tracks of a record's columns: the length of every 1-D numeric value,
    ``BYTES`` for a bytes value (an image, text, other bytes)."""
    out: dict = {name: len(v) for name, v in columns.items() if isinstance(v, np.ndarray) and v.ndim == 1}
    out.update({name: BYTES for name, v in columns.items() if isinstance(v, bytes)})
    return out


def _member_kinds(rec, images, members: dict, keyed: bool) -> dict:
    """What ``_note_lengths`` tracks of an OFRecord record written as WebDataset members (``_members``'
    names): a numeric feature's length; a one-value bytes feature's stream, ``(BYTES, name)``: ``F``
    for the member ``F.bin``, the image's member itself (``F.jpg``, or ``jpg`` alone for the only
    image), as a recorded bytes stream names the member it reads (``webdataset.members.bytes_member``)."""
    out: dict = {}
    for name, f in rec.items():
        if keyed and name == "key":
            continue
        if f.kind != "bytes_list":
            out[name] = len(f.value)
        elif len(f.value) == 1:
            field = member_field(name)
            if name not in images:
                out[name] = (BYTES, field)   # the member F.bin, what a bytes stream F reads
                continue
            stem = "" if len(images) == 1 else field + "."
            found = [m for m in members if m.startswith(stem) and m[len(stem):] and "." not in m[len(stem):]]
            if len(found) == 1:
                out[name] = (BYTES, found[0])   # the member itself: jpg, F.png
    return out


def _note_lengths(lengths: dict, numeric: dict, n: int) -> None:
    """Track each feature's length (or bytes kind) over the records so far (None once it varies or is
    missing): ``numeric``, what ``_fixed_lengths``/``_member_kinds`` give for record ``n``."""
    for name in set(lengths) | set(numeric):
        was = lengths.get(name, numeric.get(name) if n == 0 else None)
        lengths[name] = was if was is not None and numeric.get(name) == was else None


def _fixed_streams(lengths: dict, field) -> list:
    """The streams of what every record holds alike, named as ``field(feature)`` names their data:
    dense streams for the numeric features of one length (``KEY.F.npy`` members, MDS columns), bytes
    streams for the features of one bytes value (images, text: MDS columns, WebDataset members read by
    their member name). What lets recordkit's own commands read the whole output back."""
    from recordkit.engine.streams import StreamSpec
    out = []
    for name, n in sorted(lengths.items()):
        if not n or field(name) == "key":
            continue
        if n == BYTES:
            out.append(StreamSpec(field(name), "bytes", 1))
        elif isinstance(n, tuple):
            out.append(StreamSpec(n[1], "bytes", 1))
        else:
            out.append(StreamSpec(field(name), "dense", n))
    return out


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
