"""SINGA 0.x input layers as plain Python iterators of NumPy batches (spec §4).

SINGA's ``RecordInputLayer`` and ``CSVInputLayer`` read (key, value) tuples from a store,
parse them into a ``[batchsize] + shape`` float blob plus int labels, and normalise with
``x = (x - mean) / std``. The iterators here reproduce that behaviour so a job's data
pipeline can be checked (or replaced) without SINGA:

* the source is any re-iterable of ``(key, value)`` pairs (a list, a store object whose
  ``__iter__`` starts over, or a zero-argument callable returning a fresh iterator), so
  this module does not depend on the store classes;
* ``random_skip`` draws one integer uniformly in ``[0, random_skip]`` *inclusive* and
  discards that many tuples once, before the first batch, wrapping at the end;
* epochs wrap **mid-batch** (3 records, batch 2 -> (0,1), (2,0), (1,2), ...) and the
  iterator never ends, as in SINGA (use ``itertools.islice`` or ``num_batches``);
* ``shuffle`` is an addition (SINGA never shuffled) and off by default; when on, each
  pass over the store is a fresh permutation (the values of one pass are held in memory);
* the configured ``shape`` wins over a record's own ``shape`` field, as in SINGA.
"""
from __future__ import annotations

from typing import Iterable, Iterator, Sequence

import numpy as np

from recordkit.errors import FormatError
from recordkit.formats.singa.csvfile import parse_csv_record
from recordkit.formats.singa.records import RecordProto, _parse

__all__ = ["RecordInputLayer", "CSVInputLayer", "mean_from_record_store", "mean_from_csv_store",
           "parse_record_value", "parse_csv_line"]

def _count(shape: Sequence[int]) -> int:
    return int(np.prod(tuple(shape), dtype=np.int64))


# ---------------------------------------------------------------- record parsing

def parse_record_value(value: bytes, shape: Sequence[int], *, path="<store>", record=None) -> tuple[np.ndarray, int]:
    """One RecordProto value -> (float32 features of ``shape``, label), as RecordInputLayer did.

    ``data`` wins over ``pixel``; pixel bytes are unsigned 0-255. SINGA only logged an
    error for a record with neither; an unusable record is an error here.
    """
    msg = _parse(RecordProto, value, path, None, record)
    n = _count(shape)
    if len(msg.data):
        feats = np.array(msg.data, dtype=np.float32)
        what = "data"
    elif msg.pixel:
        feats = np.frombuffer(msg.pixel, dtype=np.uint8).astype(np.float32)
        what = "pixel"
    else:
        raise FormatError(path, "record has neither data nor pixel", record=record)
    if feats.size != n:
        raise FormatError(path, f"record {what} has {feats.size} values, the configured shape "
                          f"{list(shape)} needs {n}", record=record)
    return feats.reshape(tuple(shape)), (msg.label if msg.HasField("label") else 0)


def mean_from_record_store(pairs: Iterable[tuple[bytes, bytes]], shape: Sequence[int], *,
                           path="<mean store>") -> np.ndarray:
    """The mean/std vector in a RecordProto store's first tuple (``image_mean.bin``).

    Like SINGA's ``LoadRecord`` it requires float ``data`` of exactly ``prod(shape)``
    values; a pixel-only record is refused.
    """
    for _, value in pairs:
        msg = _parse(RecordProto, value, path, None, "tuple 0")
        if len(msg.data) != _count(shape):
            raise FormatError(path, f"mean/std record has {len(msg.data)} data values, shape {list(shape)} "
                              f"needs {_count(shape)}", record="tuple 0")
        return np.array(msg.data, dtype=np.float32).reshape(tuple(shape))
    raise FormatError(path, "mean/std store is empty")


# ---------------------------------------------------------------- CSV parsing

def parse_csv_line(text: str | bytes, shape: Sequence[int], *, separator: str = ",", has_label: bool = True,
                   deploy: bool = False, path="<store>", line: int | None = None) -> tuple[np.ndarray, int]:
    """One CSV value -> (float32 features of ``shape``, label) like CSVInputLayer::Parse.

    The label is the first token only when ``has_label`` and not ``deploy`` (deploy data
    must not carry a label column); then exactly ``prod(shape)`` numbers must follow —
    too few or too many is an error (SINGA aborted). The tokenizer quirk and the
    ``stoi``/``stof`` prefix parsing are ``csvfile.parse_csv_record``'s; ``line`` is
    the 1-based line number used in error messages.
    """
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text)
    if text[-1:] in ("\n", b"\n"):  # a raw text line; TextFileStore values come without it
        text = text[:-1]
    label, feats = parse_csv_record(text, _count(shape), separator=separator, has_label=has_label,
                                    deploy=deploy, path=path, line=line)
    return feats.reshape(tuple(shape)), (0 if label is None else label)


def mean_from_csv_store(lines: Iterable, shape: Sequence[int], *, separator: str = ",",
                        path="<mean store>") -> np.ndarray:
    """Mean/std from the first line of a text store: ``prod(shape)`` values, never a label.

    Accepts plain lines or (key, value) pairs.
    """
    for item in lines:
        value = item[1] if isinstance(item, tuple) else item
        return parse_csv_line(value, shape, separator=separator, has_label=False, path=path, line=1)[0]
    raise FormatError(path, "mean/std store is empty")


# ---------------------------------------------------------------- the iterators

class _StoreInputLayer:
    """Batching, skipping, wrapping and normalisation shared by both layers (StoreInputLayer +
    SingleLabelRecordLayer in SINGA); subclasses only parse one value."""

    def __init__(self, source, batchsize: int, shape: Sequence[int], *, random_skip: int = 0,
                 shuffle: bool = False, seed=None, mean=None, mean_value: float | None = None, std=None,
                 std_value: float | None = None, num_batches: int | None = None, path="<store>"):
        if batchsize < 1:
            raise ValueError("batchsize must be >= 1")
        if random_skip < 0:
            raise ValueError("random_skip must be >= 0")
        if std_value is not None and std is None and std_value == 0:
            raise ValueError("std_value must not be 0")
        self.source = source
        self.batchsize = int(batchsize)
        self.shape = tuple(int(d) for d in shape)
        self.random_skip = int(random_skip)
        self.shuffle = shuffle
        self.rng = np.random.default_rng(seed)
        self.num_batches = num_batches
        self.path = path
        self.mean = self._vector(mean, mean_value, "mean")
        self.std = self._vector(std, std_value, "std")
        self.skipped: int | None = None  # how many tuples random_skip discarded, once drawn

    def _vector(self, array, value, what):
        """A file-loaded vector wins over a scalar, which is broadcast (SINGA's order)."""
        if array is not None:
            arr = np.asarray(array, dtype=np.float32)
            if arr.size != _count(self.shape):
                raise ValueError(f"{what} has {arr.size} values, shape {list(self.shape)} needs {_count(self.shape)}")
            return arr.reshape(self.shape)
        if value is not None:
            return np.full(self.shape, value, dtype=np.float32)
        return None

    def _pass(self) -> Iterator:
        """One pass over the store (SeekToFirst), shuffled if asked."""
        it = self.source() if callable(self.source) else iter(self.source)
        if not self.shuffle:
            return it
        values = list(it)
        return iter([values[i] for i in self.rng.permutation(len(values))])

    def _tuples(self) -> Iterator[tuple[int, bytes]]:
        """Endless (index, value) stream with SINGA's wrap-around; empty after a rewind is an error."""
        index = 0
        while True:
            got = False
            for _, value in self._pass():
                got = True
                yield index, value
                index += 1
            if not got:
                raise FormatError(self.path, "the store is empty (SINGA: no tuple after SeekToFirst)")

    def parse(self, value, index: int) -> tuple[np.ndarray, int]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        tuples = self._tuples()
        if self.skipped is None:
            self.skipped = int(self.rng.integers(0, self.random_skip, endpoint=True)) if self.random_skip else 0
        for _ in range(self.skipped):
            next(tuples)
        produced = 0
        while self.num_batches is None or produced < self.num_batches:
            images = np.empty((self.batchsize,) + self.shape, dtype=np.float32)
            labels = np.empty(self.batchsize, dtype=np.int32)
            for k in range(self.batchsize):
                index, value = next(tuples)
                images[k], labels[k] = self.parse(value, index)
            if self.mean is not None:
                images -= self.mean
            if self.std is not None:
                images /= self.std
            yield images, labels
            produced += 1


class RecordInputLayer(_StoreInputLayer):
    """SINGA's RecordInputLayer (doc name ProtoRecordInputLayer) over RecordProto values.

    Yields ``(images float32 [batchsize] + shape, labels int32 [batchsize])``; keys are
    ignored, ``data`` floats win over ``pixel`` bytes, a missing label reads as 0. Pass the
    CIFAR mean as ``mean=mean_from_record_store(image_mean_pairs, shape)``.
    """

    def parse(self, value, index):
        return parse_record_value(value, self.shape, path=self.path, record=f"tuple {index}")


class CSVInputLayer(_StoreInputLayer):
    """SINGA's CSVInputLayer (doc name CSVRecordInputLayer) over text lines.

    ``separator``: every character is a delimiter. With ``has_label`` (default) and not
    ``deploy`` the first column is the integer label; otherwise all columns are features
    and labels come back as 0.
    """

    def __init__(self, source, batchsize: int, shape: Sequence[int], *, separator: str = ",",
                 has_label: bool = True, deploy: bool = False, **kwargs):
        super().__init__(source, batchsize, shape, **kwargs)
        if not separator:
            raise ValueError("separator must not be empty")
        self.separator = separator
        self.has_label = has_label
        self.deploy = deploy

    def parse(self, value, index):
        return parse_csv_line(value, self.shape, separator=self.separator, has_label=self.has_label,
                              deploy=self.deploy, path=self.path, line=index + 1)
