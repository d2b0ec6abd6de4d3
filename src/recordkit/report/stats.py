"""The statistics behind ``recordkit report``: one pass over a data set's chunks.

Every format goes through its compiled reader: CTF/CBF/SINGA record stores as Deserializers
(``load_chunk`` on two threads, a bounded window ahead), OFRecord parts on the wire
(``FeatureStats`` for the totals ``recordkit stats`` prints, ``decode_numeric`` for value
columns). Each chunk's columns are summarized with whole-array NumPy operations; what is
kept is small and independent of the corpus size (sums per dimension, bincounts, the first
rows), so a gigabyte costs the parse and a few vector passes.

Where a full pass is not needed it is not made, and the result says so (``notes``): value
histograms use the first ``sample_rows`` samples, the image grid the first records. Errors
are collected, not raised: a reader's ``ErrorBudget`` (CTF) or the located ``FormatError``
of a chunk/record (CBF, OFRecord, SINGA) becomes an entry with its location, the pass goes
on where the format allows it, and the page shows the first ``max_shown`` of them.
"""
from __future__ import annotations

import warnings
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from recordkit.engine.presence import StreamCheckError
from recordkit.errors import ErrorBudgetExceeded, RecordkitError

SAMPLE_ROWS = 100_000          # rows kept for value histograms
SAMPLE_BYTES = 64 << 20        # ... at most this many bytes of them per stream
HIST_DIMS = 4                  # dense dimensions shown as value histograms
BINCOUNT_DIM = 1 << 22         # sparse index counts as a dense bincount up to this dimension
CLASS_LIMIT = 1000             # integer labels 0..CLASS_LIMIT-1 count as classes
IMAGES = 16                    # images in the grid


@dataclass
class Problem:
    """One error (or warning) found while reading, as the reader located it."""
    text: str
    severity: str = "error"    # "error" | "warning" | "fatal" (the pass stopped there)


class DenseStats:
    """A dense stream: ``recordkit stats`` totals, per-dimension mean/std, the first rows
    (for value histograms) and, when it is one-hot or an integer label, the class counts."""

    kind = "dense"

    def __init__(self, name: str, dim: int, note: str = ""):
        self.name, self.dim, self.note = name, int(dim), note
        self.samples = self.nnz = 0
        self.sum, self.min, self.max = 0.0, None, None
        self.col_sum = np.zeros(self.dim, np.float64)
        self.col_sumsq = np.zeros(self.dim, np.float64)
        self.row_cap = max(1, min(SAMPLE_ROWS, SAMPLE_BYTES // max(8 * self.dim, 1)))
        self._rows: list[np.ndarray] = []
        self.rows_kept = 0
        self.one_hot = self.dim > 1
        self.integer_labels = self.dim == 1
        self.class_counts = np.zeros(self.dim if self.dim > 1 else 0, np.int64)

    def add(self, values: np.ndarray) -> None:
        self.merge(self.summarize(values))

    def summarize(self, values: np.ndarray) -> dict:
        """A chunk's column reduced to a few small arrays. Pure (reads only flags that, once
        false, stay false), so it runs on the loading thread, GIL released in NumPy."""
        n = values.shape[0]
        part = {"n": n, "nnz": int(np.count_nonzero(values.reshape(-1)))}
        if not values.size:
            return part
        part["sum"] = float(values.sum(dtype=np.float64))  # as `recordkit stats`: one float64 sum per chunk
        part["min"], part["max"] = float(values.min()), float(values.max())
        v64 = values.astype(np.float64)
        part["col_sum"] = np.ones(n) @ v64  # BLAS: a reduction over axis 0 of a narrow array is slow
        part["col_sumsq"] = np.einsum("ij,ij->j", v64, v64)
        part["rows"] = np.array(values[:self.row_cap], dtype=np.float64)
        lo, hi = part["min"], part["max"]
        if self.one_hot:  # min/max rule most streams out before any elementwise test
            ok = lo >= 0 and hi <= 1 and bool(np.all((values == 0) | (values == 1))) and bool(
                np.all(values.sum(axis=1) == 1))
            part["one_hot"] = values.sum(axis=0, dtype=np.int64) if ok else None
        if self.integer_labels:
            col = values[:, 0]
            ok = lo >= 0 and hi < CLASS_LIMIT and bool(np.all(col == np.round(col)))
            part["labels"] = np.bincount(col.astype(np.int64)) if ok else None
        return part

    def merge(self, part: dict) -> None:
        """Add a chunk's summary (in chunk order: sums and the first rows as one pass would)."""
        self.samples += part["n"]
        self.nnz += part["nnz"]
        if "sum" not in part:
            return
        self.sum += part["sum"]
        self.min = part["min"] if self.min is None else min(self.min, part["min"])
        self.max = part["max"] if self.max is None else max(self.max, part["max"])
        self.col_sum += part["col_sum"]
        self.col_sumsq += part["col_sumsq"]
        if self.rows_kept < self.row_cap:
            take = part["rows"][:self.row_cap - self.rows_kept]
            self._rows.append(take)
            self.rows_kept += len(take)
        if self.one_hot:
            if part.get("one_hot") is not None:
                self.class_counts += part["one_hot"]
            else:
                self.one_hot = False
        if self.integer_labels:
            c = part.get("labels")
            if c is not None:
                if len(c) > len(self.class_counts):
                    c = c.copy()
                    c[:len(self.class_counts)] += self.class_counts
                    self.class_counts = c
                else:
                    self.class_counts[:len(c)] += c
            else:
                self.integer_labels = False

    @property
    def is_label(self) -> bool:
        return self.samples > 0 and (self.one_hot or self.integer_labels)

    @property
    def mean(self) -> np.ndarray:
        return self.col_sum / max(self.samples, 1)

    @property
    def std(self) -> np.ndarray:
        m = self.mean
        return np.sqrt(np.maximum(self.col_sumsq / max(self.samples, 1) - m * m, 0.0))

    def rows(self) -> np.ndarray:
        return np.concatenate(self._rows) if self._rows else np.zeros((0, self.dim))

    def histogram_dims(self) -> list[int]:
        """The dimensions shown as value histograms: the most varied ones (a constant
        dimension, padding or a bias, says nothing), in dimension order."""
        if self.dim <= HIST_DIMS:
            return list(range(self.dim))
        return sorted(np.argsort(-self.std, kind="stable")[:HIST_DIMS].tolist())

    def totals(self) -> dict:
        over = getattr(self, "totals_override", None)
        if over is not None:  # OFRecord: FeatureStats's numbers, those of `recordkit stats`
            return over
        return {"samples": self.samples, "nnz": self.nnz, "sum": self.sum, "min": self.min, "max": self.max}


class SparseStats:
    """A sparse stream: totals, non-zeros per sample, how often each index occurs."""

    kind = "sparse"

    def __init__(self, name: str, dim: int, note: str = ""):
        self.name, self.dim, self.note = name, int(dim), note
        self.samples = self.nnz = 0
        self.sum, self.min, self.max = 0.0, None, None
        self.nnz_per_sample = np.zeros(1, np.int64)   # bincount of non-zeros per sample
        self._dense_counts = np.zeros(self.dim, np.int64) if self.dim <= BINCOUNT_DIM else None
        self._idx: list[np.ndarray] = []              # (unique index, count) pairs, merged lazily
        self._cnt: list[np.ndarray] = []
        self.one_hot = True

    def add(self, indices: np.ndarray, values: np.ndarray, indptr: np.ndarray) -> None:
        self.merge(self.summarize(indices, values, indptr))

    def summarize(self, indices: np.ndarray, values: np.ndarray, indptr: np.ndarray) -> dict:
        """A chunk's column reduced (pure; runs on the loading thread)."""
        n = len(indptr) - 1
        per = np.bincount(np.diff(indptr)) if n else np.zeros(1, np.int64)
        part = {"n": n, "nnz": len(values), "per": per}
        if not values.size:
            return part
        part["sum"] = float(values.sum(dtype=np.float64))
        part["min"], part["max"] = float(values.min()), float(values.max())
        if self._dense_counts is not None:
            part["counts"] = np.bincount(indices, minlength=self.dim)[:self.dim]
        else:
            part["unique"] = np.unique(indices, return_counts=True)
        return part

    def merge(self, part: dict) -> None:
        n = part["n"]
        self.samples += n
        self.nnz += part["nnz"]
        c = part["per"]
        if len(c) > len(self.nnz_per_sample):
            c = c.copy()
            c[:len(self.nnz_per_sample)] += self.nnz_per_sample
            self.nnz_per_sample = c
        else:
            self.nnz_per_sample[:len(c)] += c
        if "sum" not in part:
            if n:
                self.one_hot = False
            return
        self.sum += part["sum"]
        self.min = part["min"] if self.min is None else min(self.min, part["min"])
        self.max = part["max"] if self.max is None else max(self.max, part["max"])
        # one-hot: every sample exactly one non-zero (the per-sample bincount is [0, n]), all ones
        if self.one_hot and not (len(c) == 2 and c[0] == 0 and part["min"] == 1 and part["max"] == 1):
            self.one_hot = False
        if "counts" in part:
            self._dense_counts += part["counts"]
        else:
            u, cnt = part["unique"]
            self._idx.append(u)
            self._cnt.append(cnt)
            if len(self._idx) > 64:
                self._merge()

    def _merge(self) -> None:
        if len(self._idx) > 1:
            u, inv = np.unique(np.concatenate(self._idx), return_inverse=True)
            self._idx, self._cnt = [u], [np.bincount(inv, weights=np.concatenate(self._cnt)).astype(np.int64)]

    def index_counts(self) -> tuple[np.ndarray, np.ndarray]:
        """(index, occurrences) of every index that occurs at least once."""
        if self._dense_counts is not None:
            used = np.flatnonzero(self._dense_counts)
            return used, self._dense_counts[used]
        self._merge()
        return (self._idx[0], self._cnt[0]) if self._idx else (np.zeros(0, np.int64), np.zeros(0, np.int64))

    @property
    def is_label(self) -> bool:
        return self.samples > 0 and self.one_hot

    @property
    def class_counts(self) -> np.ndarray:
        idx, cnt = self.index_counts()
        out = np.zeros(self.dim, np.int64)
        out[idx] = cnt
        return out

    def totals(self) -> dict:
        return {"samples": self.samples, "nnz": self.nnz, "sum": self.sum, "min": self.min, "max": self.max}


class BytesStats:
    """A bytes feature (OFRecord ``bytes_list``): value counts and sizes; images when they are."""

    kind = "bytes"

    def __init__(self, name: str, note: str = ""):
        self.name, self.note, self.dim = name, note, None
        self.samples = self.nnz = 0
        self.image_format = None

    def totals(self) -> dict:
        over = getattr(self, "totals_override", None)
        return over if over is not None else {"samples": self.samples, "nnz": self.nnz, "sum": None, "min": None,
                                              "max": None}


@dataclass
class InputReport:
    """What the page shows about one input."""
    path: str
    format: str = "?"
    unit: str = "sequences"                           # what `sequences` counts: "records" for record stores
    per_record: bool = False                          # streams counted per record (features of OFRecord records)
    bytes: int = 0
    details: dict = field(default_factory=dict)       # format-specific lines: version, store kind, mode...
    streams: list = field(default_factory=list)       # DenseStats | SparseStats | BytesStats
    sequences: int = 0
    samples: int = 0
    chunks: int = 0
    chunk_label: str = "chunks"
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))  # bincount of sequence lengths
    problems: list = field(default_factory=list)      # Problem, the first max_shown
    errors: int = 0                                   # all errors found (shown or not)
    warnings: int = 0
    complete: bool = True                             # False: the pass stopped at a fatal error
    notes: list = field(default_factory=list)         # what was sampled, and how
    images: list = field(default_factory=list)        # {"data": encoded bytes | "pixels": array, "mime", "label"}
    max_shown: int = 20

    def add_problem(self, text: str, severity: str = "error") -> None:
        if severity == "error" or severity == "fatal":
            self.errors += 1
        else:
            self.warnings += 1
        if severity == "fatal":
            self.complete = False
        if len(self.problems) < self.max_shown or severity == "fatal":
            self.problems.append(Problem(text, severity))

    def add_lengths(self, lengths: np.ndarray) -> None:
        if len(lengths):
            c = np.bincount(np.asarray(lengths, dtype=np.int64))
            if len(c) > len(self.lengths):
                c[:len(self.lengths)] += self.lengths
                self.lengths = c
            else:
                self.lengths[:len(c)] += c

    def length_summary(self) -> dict:
        n = int(self.lengths.sum())
        if n == 0:
            return {"count": 0}
        values = np.arange(len(self.lengths))
        cum = np.cumsum(self.lengths)
        q = lambda p: int(values[np.searchsorted(cum, p * n, side="left")])
        used = np.flatnonzero(self.lengths)
        return {"count": n, "min": int(used[0]), "max": int(used[-1]),
                "mean": float((values * self.lengths).sum() / n), "median": q(0.5), "p90": q(0.9), "p99": q(0.99)}

    def stream(self, name: str):
        return next(s for s in self.streams if s.name == name)


def collect(path: str, *, streams=None, max_errors: int = 1000, max_shown: int = 20, progress=None,
            threads: int = 2, **options) -> InputReport:
    """The statistics of one input, its format sniffed from the content. ``streams``: the
    ``StreamSpec``s a CTF file needs (CBF: a selection; OFRecord: ignored, features are
    discovered); ``options``: CTF reader options (``chunk_size``, ``skip_sequence_ids``...) and
    ``storage_options``. ``progress``: an object with ``update(bytes)``."""
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    from recordkit.formats.singa.records import holds_image_records
    storage_options = options.get("storage_options")
    fmt = registry.of_kind("singa") if options.get("store") else registry.get(
        sniff_format(path, storage_options, part_name_prefix=options.get("part_name_prefix")))
    store = fmt.records == "tuples"  # a record store: tuples, their values decoded as records where they are
    rep = InputReport(str(path), max_shown=max_shown)
    rep.format = fmt.kind
    if fmt.records is not None:
        rep.unit = "records"
    if fmt.records == "features":  # records of named features, summarized on the wire
        from recordkit.report import ofrecord_stats
        parts = {k: options[k] for k in ("data_part_num", "part_name_prefix", "part_name_suffix_length")
                 if options.get(k) is not None}
        rep.per_record = True
        ofrecord_stats.collect(rep, path, storage_options=storage_options, progress=progress, **parts)
        return rep
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if store and holds_image_records(_store_kind(path, options)):
                _singa_tuples(rep, path, True, storage_options, progress, store=_store_kind(path, options))
                return rep
            reader = _open(rep, fmt, path, streams, max_errors, options)
        except RecordkitError as e:
            if store and not rep.streams:
                # not (all) SINGA 0.x records: every tuple as bytes, the reason on the page
                _singa_tuples(rep, path, False, storage_options, progress, reason=str(e), store=options.get("store"))
                return rep
            rep.add_problem(str(e), "fatal")
            _take_warnings(rep, caught)
            return rep
        with reader:
            _walk(rep, reader, progress, threads, caught)
            if store:
                _singa_images(rep, path, reader.kind, storage_options)
        _take_warnings(rep, caught)
    return rep


def _store_kind(path, options) -> str:
    from recordkit.formats.singa.store import open as open_store
    with open_store(str(path), "read", options.get("store"), storage_options=options.get("storage_options")) as s:
        return s.kind


def _singa_tuples(rep: InputReport, path, image_records: bool, storage_options, progress, reason: str = "",
                  store: str | None = None) -> None:
    """A SINGA store tuple by tuple (the stores have no chunk index; their API reads one tuple
    at a time): value sizes, and for BinFile's 1.x ``ImageRecord``s the labels (class balance)
    and the first JPEG images. ``reason``: why the values are not read as 0.x records."""
    from recordkit.formats.singa import records
    from recordkit.formats.singa.store import open as open_store
    rep.chunk_label = "chunks"
    value = BytesStats("value")
    label = DenseStats("label", 1)
    labels = []
    shapes = set()
    sizes: list[int] = []
    at = 0
    try:
        with open_store(str(path), "read", store, storage_options=storage_options) as s:
            rep.details["store"] = s.kind
            rep.bytes = _size(path, storage_options)
            while True:
                at = s.position[0]
                item = s.read()
                if item is None:
                    break
                i = rep.sequences
                rep.sequences += 1
                value.samples += 1
                value.nnz += 1
                sizes.append(len(item[1]))
                if image_records:
                    try:
                        rec = records.decode_image_record_v1(item[1], path=str(path), offset=at, record=f"tuple {i}")
                    except RecordkitError as e:
                        rep.add_problem(str(e))
                        continue
                    shapes.add(tuple(rec["shape"]))
                    if rec["label"]:
                        labels.append(rec["label"][0])
                    if len(rep.images) < IMAGES and rec["pixel"][:3] == b"\xff\xd8\xff":
                        rep.images.append({"data": rec["pixel"], "mime": "image/jpeg", "alt": f"tuple {i}",
                                           "label": ",".join(map(str, rec["label"])) or None})
                if len(labels) >= 65536:
                    label.add(np.asarray(labels, np.float64)[:, None])
                    labels.clear()
    except RecordkitError as e:
        rep.add_problem(f"{e} (the tuples after it cannot be read)", "fatal")
    if labels:
        label.add(np.asarray(labels, np.float64)[:, None])
    rep.samples = rep.sequences
    if sizes:
        v = np.asarray(sizes)
        rep.details["value bytes"] = f"{v.min():,} .. {v.max():,} (mean {v.mean():,.1f})"
    rep.streams.append(value)
    if label.samples:
        rep.streams.append(label)
    if image_records:
        value.image_format = "JPEG" if rep.images else None
        rep.details["records"] = "SINGA 1.x ImageRecord" + (
            f", shape {' or '.join(str(list(x)) for x in sorted(shapes)[:3])}" if shapes else "")
    if reason and rep.complete:  # (a broken framing is the reason itself, on the page as the fatal error)
        rep.notes.append(f"the values are not SINGA records ({reason}): each tuple is shown as bytes")
    if rep.images:
        rep.notes.append(f"Sampled: the image grid shows the first {len(rep.images)} records")
    if progress is not None:
        progress.update(rep.bytes)


def _singa_images(rep: InputReport, path, store_kind: str, storage_options) -> None:
    """The first records' images: SINGA 0.x records hold raw pixels (CHW with their shape),
    1.x ``ImageRecord``s (BinFile) encoded JPEG bytes. Records that are not images give none."""
    from recordkit.formats.singa import records
    from recordkit.formats.singa.store import open as open_store
    try:
        with open_store(str(path), "read", store_kind, storage_options=storage_options) as s:
            for i in range(IMAGES):
                item = s.read()
                if item is None:
                    break
                key, value = item
                if records.holds_image_records(store_kind):
                    rec = records.decode_image_record_v1(value, path=str(path), record=f"tuple {i}")
                    if rec["pixel"][:3] == b"\xff\xd8\xff":
                        rep.images.append({"data": rec["pixel"], "mime": "image/jpeg", "alt": f"tuple {i}",
                                           "label": ",".join(map(str, rec["label"])) or None})
                    continue
                rec = records.decode_record(value, path=str(path), record=f"tuple {i}")
                pixels = _image_array(rec["pixel"] if rec["pixel"] is not None else rec["data"])
                if pixels is None:
                    return
                rep.images.append({"pixels": pixels, "mime": "image/png", "alt": f"tuple {i}",
                                   "label": rec["label"]})
    except RecordkitError:
        return  # the walk has reported it with its location
    if rep.images:
        rep.notes.append(f"Sampled: the image grid shows the first {len(rep.images)} records")


def _image_array(a):
    """An (H, W) or (H, W, 3) array from a record's pixels, or None when they are not an image
    (CHW with 1 or 3 channels, HWC, 2-D, or flat squares: MNIST's 784 = 28 x 28)."""
    if a is None:
        return None
    a = np.asarray(a)
    if a.ndim == 1:
        n = a.size
        side = int(round(np.sqrt(n)))
        if side * side == n and side > 1:
            return a.reshape(side, side)
        side = int(round(np.sqrt(n / 3)))
        if 3 * side * side == n and side > 1:
            return a.reshape(3, side, side).transpose(1, 2, 0)
        return None
    if a.ndim == 3 and a.shape[0] in (1, 3) and a.shape[2] not in (1, 3):
        a = a.transpose(1, 2, 0)
    if a.ndim == 3 and a.shape[2] == 1:
        a = a[:, :, 0]
    if a.ndim == 2 or (a.ndim == 3 and a.shape[2] == 3):
        return a
    return None


def _open(rep: InputReport, fmt, path, streams, max_errors, options):
    storage = {k: options[k] for k in ("storage_options", "cache_dir") if options.get(k) is not None}
    if fmt.records == "tuples":
        from recordkit.formats.singa.deserializer import SingaRecordDeserializer
        reader = SingaRecordDeserializer(path, options.get("store"), storage_options=storage.get("storage_options"))
        rep.details["store"] = reader.kind
        rep.chunk_label = "chunks (of 4096 tuples)"
        rep.bytes = _size(path, storage.get("storage_options"))
        return reader
    # every other format as the registry opens it: CTF with its declared streams, the formats that
    # declare their own (OFRecord written by recordkit, Parquet, HF, Lance, WebDataset, TFRecord, MDS...)
    if fmt.needs_streams and not streams:
        from recordkit.errors import UsageError
        from recordkit.formats.detect import streams_needed
        raise UsageError(streams_needed(path, fmt, storage.get("storage_options")))
    reader_opts = {k: options[k] for k in ("chunk_size", "skip_sequence_ids", "precision") if options.get(k) is not None}
    reader = fmt.open_reader(path, streams or None, max_errors=max_errors, **reader_opts, **storage)
    index = getattr(reader, "index", None)
    if hasattr(index, "id_mode"):  # a text index: how sequences are delimited
        rep.details["mode"] = "sequence ids" if index.id_mode else "one sequence per line"
    if getattr(reader, "version", None) is not None:  # a binary format's version (CBF)
        rep.details["version"] = reader.version
    header = getattr(reader, "header", None)
    rep.bytes = getattr(index, "file_size", None) or getattr(header, "file_size", None) or sum(
        c.size for c in reader.chunks)
    return reader


def _size(path, storage_options) -> int:
    from recordkit.storage import open_source
    src = open_source(str(path), storage_options=storage_options, verify=False)
    try:
        return src.size
    finally:
        src.close()


def _walk(rep: InputReport, reader, progress, threads: int, caught) -> None:
    """Every chunk once: load (bounded window ahead on ``threads`` threads), summarize."""
    specs = reader.streams
    for s in specs:
        rep.streams.append(SparseStats(s.name, s.dim) if s.is_sparse else DenseStats(s.name, s.dim))
    by_name = {s.name: s for s in rep.streams}
    infos = reader.chunks
    rep.chunks = len(infos)
    with ThreadPoolExecutor(max(1, threads)) as pool:
        pending = deque()
        it = iter(infos)
        def load(chunk_id):
            try:
                chunk, late = reader.load_chunk(chunk_id), None
            except StreamCheckError as e:
                # raised after the last chunk was parsed and counted, and only once: the chunk
                # is loaded again for its statistics, the error goes on the page
                chunk, late = reader.load_chunk(chunk_id), e
            return chunk, late, {name: (by_name[name].summarize(col.indices, col.values, col.indptr) if col.is_sparse
                                  else by_name[name].summarize(col.values)) for name, col in chunk.columns.items()}

        for info in it:
            pending.append((info, pool.submit(load, info.id)))
            if len(pending) > threads:
                break
        while pending:
            info, fut = pending.popleft()
            nxt = next(it, None)
            if nxt is not None:
                pending.append((nxt, pool.submit(load, nxt.id)))
            try:
                chunk, late, parts = fut.result()
            except ErrorBudgetExceeded as e:
                _take_warnings(rep, caught)
                rep.add_problem(f"{e} (the pass stopped here: raise --max-errors to read past it)", "fatal")
                for _, f in pending:
                    f.cancel()
                return
            except RecordkitError as e:
                # a chunk the reader refuses (CBF, SINGA): located, the other chunks still count
                _take_warnings(rep, caught)
                rep.add_problem(str(e))
                if progress is not None:
                    progress.update(info.size)
                continue
            _take_warnings(rep, caught)
            if late is not None:
                rep.add_problem(str(late))
            rep.sequences += len(chunk)
            rep.add_lengths(chunk.lengths)
            for name, part in parts.items():
                by_name[name].merge(part)
            if progress is not None:
                progress.update(info.size)
    rep.samples = int((np.arange(len(rep.lengths)) * rep.lengths).sum())
    check = getattr(reader, "check_stream_presence", None)
    if check is not None:
        try:
            check()
        except RecordkitError as e:
            rep.add_problem(str(e))
    for st in rep.streams:
        if isinstance(st, DenseStats) and st.samples > st.rows_kept:
            st.note = (f"sampled: value histograms from the first {st.rows_kept:,} of {st.samples:,} samples; "
                       f"mean and std from all")


def _take_warnings(rep: InputReport, caught: list) -> None:
    """Move the reader's warnings recorded so far onto the report: tolerated errors (they
    carry ``[error K of at most N]``) as errors, the rest as warnings."""
    while caught:
        w = caught.pop(0)
        text = str(w.message)
        if "[error " in text and " of at most " in text:
            rep.add_problem(text, "error")
        elif "further warnings of this kind" not in text:
            rep.add_problem(text, "warning")


def stream_rows(rep: InputReport) -> list[dict]:
    """The overview table of streams (and what ``recordkit stats`` prints for each)."""
    rows = []
    for s in rep.streams:
        kind = getattr(s, "feature_kind", s.kind)
        if getattr(s, "is_label", False):
            kind += (", one-hot labels" if s.dim <= CLASS_LIMIT else ", one-hot") if s.one_hot else ", integer labels"
        if isinstance(s, BytesStats) and s.image_format:
            kind += f", {s.image_format} images"
        rows.append({"name": s.name, "kind": kind, "dim": s.dim, **s.totals()})
    return rows


def fmt_number(v) -> str:
    """Numbers as ``recordkit stats`` prints them (``%.6g``; ``-`` for none)."""
    return "-" if v is None else f"{v:.6g}"


def human_size(n: int) -> str:
    x = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if x < 1024:
            return f"{n:,} bytes" if unit == "bytes" else f"{x:.1f} {unit} ({n:,} bytes)"
        x /= 1024
    return f"{x:.1f} TiB ({n:,} bytes)"
