"""OFRecord records into an MDS data set feature by feature (no ``--stream``): encoded images as
Streaming's ``jpeg`` / ``png`` columns and other bytes as ``bytes`` columns, byte for byte
(``formats/records_bridge.py`` drives it).

The columns come from the first record: ``key`` (``uint64``: the record's one-value int64 ``key``
feature, else its position), then per feature, named as in the record:

* an image feature (``--image-feature``): ``jpeg`` or ``png`` by its bytes' magic number. Streaming
  decodes these columns to images (``streaming.base.format.mds.encodings.JPEG``/``PNG``: the bytes
  as they are, opened with PIL), recordkit's image stage reads them as they are
  (``formats/mds/images.py``);
* another bytes feature: ``bytes``;
* a numeric feature: ``ndarray:float32|float64|int32|int64`` (the list's own type), a 1-D array a
  record.

An MDS column holds one value a sample of one encoding: a bytes feature with several values, an
image of the other kind than the first record's, or a record whose features differ from the first
record's (one missing, added, of another kind) is an error naming the part, the byte offset and the
record. The numeric features of one length in every record are recorded as dense streams
(``declare_streams``), so recordkit reads the set back without ``--stream``.
"""
from __future__ import annotations

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.detect import image_extension
from recordkit.formats.mds.writer import KEY_COLUMN, MDSWriter, _shape_heads

_NUMBERS = {"float_list": "float32", "double_list": "float64", "int32_list": "int32", "int64_list": "int64"}
_IMAGES = {"jpg": "jpeg", "png": "png"}  # detect.image_extension -> Streaming's encoding


class MDSRecordWriter(MDSWriter):
    def __init__(self, path, *, images=(), parts=None, shard_size=None, total_sequences=None, checksums: bool = False,
                 storage_options=None, **_):
        self.images = set(images)  # the image features' names
        self._streams = []
        self.dtype = np.dtype(np.float32)
        self._start(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences, checksums=checksums,
                    storage_options=storage_options)
        self._set_columns({KEY_COLUMN: "uint64"})  # until the first record says more
        self._fixed = False

    def declare_streams(self, streams) -> None:
        """The numeric columns that hold one length in every record, as dense streams (in ``index.json``'s
        ``recordkit`` object at ``close``)."""
        self._streams = list(streams)

    def _columns_of(self, features: dict, where: dict) -> dict:
        cols = {KEY_COLUMN: "uint64"}
        for name, f in features.items():
            if name == KEY_COLUMN:
                raise FormatError(where["path"], f"feature '{KEY_COLUMN}' ({f.kind} of {len(f.value)}) is not the "
                                                 f"record's one int64 key, and '{KEY_COLUMN}' is the MDS column of "
                                                 f"the key", offset=where["offset"], record=where["record"])
            if f.kind != "bytes_list":
                cols[name] = "ndarray:" + _NUMBERS[f.kind]
            elif name in self.images:
                cols[name] = _IMAGES[image_extension(bytes(f.value[0]))] if len(f.value) else "jpeg"
            else:
                cols[name] = "bytes"
        return cols

    def write_record(self, key: int, features: dict, *, part: str, offset: int, index: int) -> None:
        """One record: ``features`` {name: Feature} (the key feature left out when it is the key; the
        image features' bytes checked to be JPEG or PNG by the caller)."""
        where = dict(path=part, offset=offset, record=f"record {index}")
        cols = self._columns_of(features, where)
        if not self._fixed:
            self._set_columns(cols)
            self._fixed = True
        elif cols != dict(zip(self.column_names, self.column_encodings)):
            raise FormatError(part, f"the record's columns ({_listed(cols)}) differ from the first record's "
                                    f"({_listed(dict(zip(self.column_names, self.column_encodings)))}): an MDS "
                                    f"column holds one encoding in every sample", offset=offset,
                              record=f"record {index}")
        sizes, parts = [], []
        for name, enc in zip(self.column_names, self.column_encodings):
            if name == KEY_COLUMN:
                parts.append(np.uint64(key).astype("<u8").tobytes())
                continue
            f = features[name]
            if f.kind == "bytes_list":
                if len(f.value) != 1:
                    raise FormatError(part, f"feature '{name}' holds {len(f.value)} values: an MDS {enc} column "
                                            f"holds one a sample", offset=offset, record=f"record {index}")
                blob = bytes(f.value[0])
            else:
                values = np.ascontiguousarray(f.value, dtype=np.dtype(enc.split(":")[1]).newbyteorder("<"))
                head = _shape_heads(np.array([len(values)], dtype=np.int64), None)[0]
                blob = head.tobytes() + values.tobytes()
            sizes.append(len(blob))
            parts.append(blob)
        sample = np.frombuffer(np.asarray(sizes, "<u4").tobytes() + b"".join(parts), dtype=np.uint8)
        for shard, _, _ in self._cutter.assign(np.array([len(sample) + 4])):
            self._switch(shard)
        self._samples.append((sample, np.array([len(sample)], dtype=np.int64)))
        self._counted(1, 1)
        self.sequences_written += 1


def _listed(cols: dict) -> str:
    return ", ".join(f"{n} {e}" for n, e in sorted(cols.items()) if n != KEY_COLUMN) or "none"
