"""Records into an MDS data set column by column (no ``--stream``): OFRecord records feature by
feature, WebDataset samples member by member (``formats/records_bridge.py`` drives both). Encoded
images become Streaming's ``jpeg`` / ``png`` columns and other bytes ``bytes`` columns, byte for byte.

The columns come from the first record: ``key`` (``uint64``: the record's own int64 key where it
has one, else its numeric WebDataset key, else its position), then a column per value, named as
the bridge names it:

* an image (an ``--image-feature``, a ``.jpg`` / ``.jpeg`` / ``.png`` member): ``jpeg`` or ``png``
  by its bytes' magic number. Streaming decodes these columns to images
  (``streaming.base.format.mds.encodings.JPEG``/``PNG``: the bytes as they are, opened with PIL);
  recordkit's image stage reads them as they are (``formats/mds/images.py``);
* other bytes: ``bytes``;
* numbers (a numeric feature, an ``.npy`` or ``.cls`` member): ``ndarray:DTYPE`` of their own type
  and shape (one or two axes).

An MDS column holds one value of one encoding a sample: an image that is neither JPEG nor PNG, or
a record whose columns differ from the first record's (one missing, added, of another encoding: an
image of the other kind) is an error naming the source file, the byte offset and the record. The
streams the columns hold (``declare_streams``) go to ``index.json``'s ``recordkit`` object, so
recordkit reads the set back without ``--stream``.
"""
from __future__ import annotations

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.detect import image_extension
from recordkit.formats.mds.writer import KEY_COLUMN, MDSWriter, _shape_heads

_IMAGES = {"jpg": "jpeg", "png": "png"}  # detect.image_extension -> Streaming's encoding


class MDSRecordWriter(MDSWriter):
    def __init__(self, path, *, parts=None, shard_size=None, total_sequences=None, checksums: bool = False,
                 storage_options=None, **_):
        self._streams = []
        self.dtype = np.dtype(np.float32)
        self._start(path, parts=parts, shard_size=shard_size, total_sequences=total_sequences, checksums=checksums,
                    storage_options=storage_options)
        self._set_columns({KEY_COLUMN: "uint64"})  # until the first record says more
        self._fixed = False

    def declare_streams(self, streams) -> None:
        """The streams the columns hold (``index.json``'s ``recordkit`` object at ``close``): what lets
        recordkit read the set back without ``--stream``."""
        self._streams = list(streams)
        dtypes = {s.dtype for s in self._streams if s.dtype is not None}
        if len(dtypes) == 1:  # the precision the streams were written in (float64 data stays float64)
            self.dtype = np.dtype(dtypes.pop())

    def write_record(self, key: int, columns: dict, images=(), *, part: str, offset: int, record: str) -> None:
        """One record: ``columns`` {name: bytes, or a numeric array of one or two axes}; ``images``:
        the names whose bytes are encoded images (JPEG or PNG, else an error). ``part``, ``offset`` and
        ``record`` say where the record is in its source (for errors)."""
        where = dict(offset=offset, record=record)
        encodings = {KEY_COLUMN: "uint64"}
        blobs = {KEY_COLUMN: np.uint64(key).astype("<u8").tobytes()}
        for name, value in columns.items():
            if name == KEY_COLUMN:
                raise FormatError(part, f"'{KEY_COLUMN}' is the MDS column of the record's key: a feature or member "
                                        f"of that name that is not its one int64 key has no column", **where)
            encodings[name], blobs[name] = _encoded(name, value, name in images, part, where)
        if not self._fixed:
            self._set_columns(encodings)
            self._fixed = True
        elif encodings != dict(zip(self.column_names, self.column_encodings)):
            raise FormatError(part, f"the record's columns ({_listed(encodings)}) differ from the first record's "
                                    f"({_listed(dict(zip(self.column_names, self.column_encodings)))}): an MDS "
                                    f"column holds one encoding in every sample", **where)
        sizes = [len(blobs[c]) for c, size in zip(self.column_names, self.column_sizes) if size is None]
        sample = np.frombuffer(np.asarray(sizes, "<u4").tobytes() + b"".join(blobs[c] for c in self.column_names),
                               dtype=np.uint8)
        for shard, _, _ in self._cutter.assign(np.array([len(sample) + 4])):
            self._switch(shard)
        self._samples.append((sample, np.array([len(sample)], dtype=np.int64)))
        self._counted(1, 1)
        self.sequences_written += 1


def _encoded(name: str, value, image: bool, part: str, where: dict) -> tuple[str, bytes]:
    """(MDS encoding, bytes) of one column value."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        blob = bytes(value)
        if not image:
            return "bytes", blob
        ext = image_extension(blob)
        if ext is None:
            raise FormatError(part, f"image '{name}' is neither JPEG nor PNG (starts {blob[:8]!r})", **where)
        return _IMAGES[ext], blob
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype.kind not in "biuf" or arr.ndim > 2:
        raise FormatError(part, f"'{name}' is an array of {arr.dtype} of shape {arr.shape}: an MDS ndarray column "
                                f"of recordkit's holds numbers of one or two axes", **where)
    arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
    head = _shape_heads(np.array([arr.shape[0]], dtype=np.int64), None if arr.ndim == 1 else arr.shape[1])[0]
    return "ndarray:" + arr.dtype.name, head.tobytes() + arr.tobytes()


def _listed(cols: dict) -> str:
    return ", ".join(f"{n} {e}" for n, e in sorted(cols.items()) if n != KEY_COLUMN) or "none"
