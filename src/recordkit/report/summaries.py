"""What ``recordkit report`` keeps of an input, small and independent of its size: per-stream
summaries (``DenseStats``, ``SparseStats``, ``BytesStats``), located ``Problem``s and the
``InputReport`` the page is drawn from. ``report/stats.py`` (streams through a reader) and
``report/ofrecord_stats.py`` (OFRecord records on the wire) both fill them."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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

    @staticmethod
    def summarize(values) -> dict:
        """A chunk's bytes column (one value a sequence): its values, and those not empty (``nnz``)."""
        return {"n": len(values), "nnz": sum(1 for v in values if len(v))}

    def merge(self, part: dict) -> None:
        self.samples += part["n"]
        self.nnz += part["nnz"]


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
