"""Re-creations of SINGA 0.2/0.3's ``examples/{cifar10,mnist}/create_data`` programs.

Jobs written for SINGA 0.x expect the exact stores those programs produced, so the output
here is byte-identical to theirs (spec §5.2, §5.3):

* CIFAR-10: ``train_data.bin`` / ``test_data.bin`` are KVFiles with keys ``"%05d"`` (a
  running index over all batch files) and RecordProto values {shape [3,32,32], label,
  pixel = the 3072 CHW bytes}; ``image_mean.bin`` is a one-tuple KVFile keyed ``"mean"``
  whose RecordProto holds {shape, data = float32 mean}. The mean is accumulated in
  float32, one image at a time, then divided by the image count in float32 — the C++
  arithmetic, reproduced with NumPy float32 operations (IEEE, hence identical rounding).
* MNIST: one KVFile per IDX image/label pair, keys ``"%08d"``, RecordProto {shape
  [rows, cols], label, pixel}; no mean file.

Deliberate differences from SINGA, all on inputs SINGA would have mangled silently: batch
files of any whole number of images are accepted (SINGA read exactly 10000 and did not
notice short files), truncated or oversized inputs and out-of-range labels raise
``FormatError`` naming the file and byte offset, and the outputs of one run appear as a set
(``StagedDirectory``: train, test and mean files all new or all old, never train new with test
old after a kill; where the directory cannot be swapped, e.g. it is the working directory,
each file still appears whole).
KVFile tuples are ``<Q`` key length, key, ``<Q`` value length, value (spec §1.1), framed
by the store module's ``kvfile.encode_tuple`` and written through ``AtomicFile`` directly
(no store object is needed for a one-shot, create-mode write).
"""
from __future__ import annotations

import gzip
import struct
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from recordkit.storage.atomic import AtomicFile
from recordkit.errors import FormatError
from recordkit.storage import location
from recordkit.formats.singa.kvfile import encode_tuple
from recordkit.formats.singa.records import encode_image_record, encode_mean_record
from recordkit.storage.staged_directory import StagedDirectory

__all__ = ["prepare_cifar10", "prepare_mnist", "convert_mnist", "kv_tuple",
           "CIFAR_TRAIN_FILES", "CIFAR_TEST_FILE", "CIFAR_SHAPE", "CIFAR_IMAGE_BYTES"]

CIFAR_OUTPUTS = ("train_data.bin", "test_data.bin", "image_mean.bin")
CIFAR_TRAIN_FILES = tuple(f"data_batch_{i}.bin" for i in range(1, 6))
CIFAR_TEST_FILE = "test_batch.bin"
CIFAR_SHAPE = (3, 32, 32)
CIFAR_IMAGE_BYTES = 3 * 32 * 32
_CIFAR_ROW = 1 + CIFAR_IMAGE_BYTES
_CIFAR_CLASSES = 10

MNIST_PAIRS = (("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "train_data.bin"),
               ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "test_data.bin"))
_IDX_IMAGES_MAGIC = 2051
_IDX_LABELS_MAGIC = 2049

def kv_tuple(key: bytes, value: bytes) -> bytes:
    """One KVFile tuple: 8-byte LE key length, key, 8-byte LE value length, value (no header)."""
    if not value:
        raise ValueError("KVFile cannot store an empty value (SINGA's Insert refuses it)")
    return encode_tuple(key, value)


class _KVFileOut:
    """Atomic KVFile output: tuples go to a temporary file that replaces ``path`` on success."""

    def __init__(self, path):
        self._file = AtomicFile(path)
        self.count = 0

    def write(self, key: str, value: bytes) -> None:
        self._file.write(kv_tuple(key.encode("ascii"), value))
        self.count += 1

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self._file.__exit__(exc_type, exc, tb)


def _progress(total: int, desc: str, enabled: bool):
    """A tqdm bar on stderr, shown only when asked for and stderr is a terminal."""
    return tqdm(total=total, desc=desc, unit="img", disable=not enabled or not sys.stderr.isatty())


# ---------------------------------------------------------------- CIFAR-10

def _cifar_count(path: Path) -> int:
    """Images in a CIFAR-10 batch file; a partial trailing image is an error, not ignored."""
    if not location.has_file(path):  # a FIFO: "not a regular file", not "missing"
        raise FormatError(path, "CIFAR-10 batch file is missing")
    size = path.stat().st_size
    whole, rest = divmod(size, _CIFAR_ROW)
    if rest:
        raise FormatError(path, f"truncated CIFAR-10 image: {rest} of {_CIFAR_ROW} bytes "
                          f"(label byte + {CIFAR_IMAGE_BYTES} pixels)", offset=whole * _CIFAR_ROW,
                          record=f"image {whole}")
    return whole


def _cifar_images(path: Path, count: int):
    """Yield (label, pixel bytes) per image, checking labels are CIFAR-10 classes.

    A label byte above 9 means the file is not CIFAR-10 (CIFAR-100 has two label bytes);
    SINGA would have stored it (as a signed char) and carried on.
    """
    with location.open_local(path) as f:
        raw = np.fromfile(f, dtype=np.uint8)
    if raw.size != count * _CIFAR_ROW:
        raise FormatError(path, f"file changed size while reading ({raw.size} bytes)", offset=raw.size)
    rows = raw.reshape(count, _CIFAR_ROW)
    bad = np.flatnonzero(rows[:, 0] >= _CIFAR_CLASSES)
    if bad.size:
        i = int(bad[0])
        raise FormatError(path, f"label {int(rows[i, 0])} is not a CIFAR-10 class (0-9)",
                          offset=i * _CIFAR_ROW, record=f"image {i}")
    for row in rows:
        yield int(row[0]), row[1:]


def _write_cifar_store(out_path: Path, sources, counts, bar, mean_acc=None) -> int:
    """Write one CIFAR store, keys ``%05d`` running over all source files; optionally sum pixels."""
    with _KVFileOut(out_path) as out:
        for path, count in zip(sources, counts):
            for label, pixels in _cifar_images(path, count):
                out.write("%05d" % out.count, encode_image_record(label, pixels.reshape(CIFAR_SHAPE)))
                if mean_acc is not None:
                    np.add(mean_acc, pixels, out=mean_acc, casting="unsafe")  # float32 += uint8, like C++
                bar.update(1)
        return out.count


def prepare_cifar10(src_dir, out_dir, progress: bool = True) -> dict[str, int]:
    """Convert ``cifar-10-batches-bin`` into SINGA's train/test/mean KVFiles.

    Every input is size-checked before anything is written, so a bad batch file fails
    fast. Returns ``{output path: number of tuples}``.
    """
    src, out = Path(src_dir), Path(out_dir)
    train = [src / name for name in CIFAR_TRAIN_FILES]
    test = [src / CIFAR_TEST_FILE]
    train_counts = [_cifar_count(p) for p in train]
    test_counts = [_cifar_count(p) for p in test]
    if sum(train_counts) == 0:
        raise FormatError(src, "the CIFAR-10 training batches hold no images (the mean would be 0/0)")
    mean_acc = np.zeros(CIFAR_IMAGE_BYTES, dtype=np.float32)
    results = {}
    with StagedDirectory(out, CIFAR_OUTPUTS.__contains__, foreign="keep") as staged, \
            _progress(sum(train_counts) + sum(test_counts), "cifar10", progress) as bar:
        n_train = _write_cifar_store(staged.path("train_data.bin"), train, train_counts, bar, mean_acc)
        results[str(out / "train_data.bin")] = n_train
        mean = (mean_acc / np.float32(n_train)).astype(np.float32)  # float32 / float(count)
        with _KVFileOut(staged.path("image_mean.bin")) as mean_out:
            mean_out.write("mean", encode_mean_record(mean.reshape(CIFAR_SHAPE)))
        results[str(out / "image_mean.bin")] = 1
        results[str(out / "test_data.bin")] = _write_cifar_store(staged.path("test_data.bin"), test, test_counts, bar)
    return results


# ---------------------------------------------------------------- MNIST

def _open_idx(path: Path):
    """Open an IDX file, falling back to the ``.gz`` the MNIST site ships when it is absent."""
    if location.has_file(path):
        return location.open_local(path), path
    gz = path.with_name(path.name + ".gz")
    if location.has_file(gz):
        return gzip.open(gz, "rb"), gz
    raise FormatError(path, "MNIST IDX file is missing (nor is there a .gz)")


def _read_exact(f, n: int, path: Path, offset: int, what: str, record=None) -> bytes:
    """Read exactly ``n`` bytes or fail naming the offset where the data stops."""
    try:
        data = f.read(n)
    except (EOFError, OSError) as exc:  # a cut or corrupt .gz
        raise FormatError(path, f"cannot read {what}: {exc}", offset=offset, record=record) from None
    if len(data) != n:
        raise FormatError(path, f"truncated {what}: {len(data)} of {n} bytes", offset=offset, record=record)
    return data


def _idx_header(f, path: Path, magic: int, dims: int) -> tuple[int, ...]:
    """Check the big-endian magic and return the dimension sizes (as SINGA's CHECKs did)."""
    words = struct.unpack(f">{1 + dims}I", _read_exact(f, 4 * (1 + dims), path, 0, "IDX header"))
    if words[0] != magic:
        raise FormatError(path, f"IDX magic is {words[0]}, expected {magic}", offset=0)
    return words[1:]


def convert_mnist(image_file, label_file, output, progress: bool = True) -> int:
    """One run of SINGA's ``mnist/create_data.bin <images> <labels> <output>``; returns the count."""
    image_path, label_path = Path(image_file), Path(label_file)
    images, image_path = _open_idx(image_path)
    with images:
        labels, label_path = _open_idx(label_path)
        with labels:
            n_images, rows, cols = _idx_header(images, image_path, _IDX_IMAGES_MAGIC, 3)
            (n_labels,) = _idx_header(labels, label_path, _IDX_LABELS_MAGIC, 1)
            if n_images != n_labels:
                raise FormatError(image_path, f"{n_images} images but {label_path} has {n_labels} labels",
                                  offset=4)
            size = rows * cols
            with _KVFileOut(output) as out, _progress(n_images, Path(output).name, progress) as bar:
                for i in range(n_images):
                    pixels = _read_exact(images, size, image_path, 16 + i * size, "image", f"image {i}")
                    label = _read_exact(labels, 1, label_path, 8 + i, "label", f"label {i}")[0]
                    if label > 127:  # SINGA stored the byte as a signed char: a negative label
                        raise FormatError(label_path, f"label byte {label} is not a class index",
                                          offset=8 + i, record=f"label {i}")
                    value = encode_image_record(label, np.frombuffer(pixels, np.uint8).reshape(rows, cols))
                    out.write("%08d" % i, value)
                    bar.update(1)
                for f, path, what, end in ((images, image_path, "image", 16 + n_images * size),
                                           (labels, label_path, "label", 8 + n_images)):
                    try:
                        more = f.read(1)
                    except (EOFError, OSError) as exc:
                        raise FormatError(path, f"cannot read past the last {what}: {exc}", offset=end) from None
                    if more:
                        raise FormatError(path, f"data after the last {what} (the header says {n_images})",
                                          offset=end)
            return n_images


def prepare_mnist(src_dir, out_dir, progress: bool = True) -> dict[str, int]:
    """Both Makefile runs: ``train-*`` -> ``train_data.bin``, ``t10k-*`` -> ``test_data.bin``.

    Returns ``{output path: number of tuples}``.
    """
    src, out = Path(src_dir), Path(out_dir)
    for images, labels, _ in MNIST_PAIRS:  # fail before writing anything when a file is absent
        for name in (images, labels):
            if not location.has_file(src / name) and not location.has_file(src / (name + ".gz")):
                raise FormatError(src / name, "MNIST IDX file is missing (nor is there a .gz)")
    with StagedDirectory(out, {target for _, _, target in MNIST_PAIRS}.__contains__, foreign="keep") as staged:
        return {str(out / target): convert_mnist(src / images, src / labels, staged.path(target), progress)
                for images, labels, target in MNIST_PAIRS}
