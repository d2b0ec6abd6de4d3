"""What the shard-directory formats (WebDataset, TFRecord, MDS) share: where to cut shards,
the ``__recordkit__.json`` description a data set keeps of itself, and reading whole shards.

**Cutting.** A shard never splits a sequence. ``parts=N`` with the total number of
sequences known cuts N contiguous runs of about equal sequence counts (so the shards read in
name order give the source order, which round robin would not); ``shard_size`` (bytes) starts a
new shard after the sequence that reaches it.

**The description** (``__recordkit__.json`` in the data set's directory, beside the shards,
never inside one: a tar member would be a sample to WebDataset's own reader) records the
stream declarations (``streams_to_json``), so reading back needs no ``--stream``, and each
shard's sequence and sample counts, so a reader describes its chunks without decoding them
and notices a shard that lost records.
"""
from __future__ import annotations

import json

import numpy as np

from recordkit.errors import FormatError, UsageError
from recordkit.formats.closing import AtomicWriter
from recordkit.formats.descriptions import Fields, listed_files
from recordkit.formats.directories import DESCRIPTION
from recordkit.storage import location, open_source

META_NAME = DESCRIPTION
META_VERSION = 1


class ShardCutter:
    """Decides, sequence by sequence, which shard each sequence goes to."""

    def __init__(self, *, parts: int | None = None, shard_size: int | None = None, total: int | None = None,
                 default_size: int = 256 << 20):
        if parts is not None and int(parts) < 1:
            raise ValueError(f"parts must be >= 1, not {parts}")
        if shard_size is not None and int(shard_size) <= 0:
            raise ValueError(f"shard_size must be positive, not {shard_size}")
        if parts is not None and int(parts) > 1 and total is None:
            raise ValueError("parts=N needs the total number of sequences (total=...) to cut contiguous shards")
        self.parts = None if parts is None else int(parts)
        self.total = None if total is None else int(total)
        self.shard_size = int(shard_size) if shard_size is not None else (None if parts else default_size)
        self.shard = 0          # index of the shard being filled
        self.in_shard = 0       # sequences in it so far
        self.bytes_in_shard = 0
        self.seen = 0           # sequences assigned so far

    def _limit(self, shard: int) -> int | None:
        """Sequences that shard ``shard`` holds under ``parts`` (balanced, the first ones one more)."""
        if not self.parts or self.total is None:
            return None
        base, extra = divmod(self.total, self.parts)
        return base + (1 if shard < extra else 0)

    def assign(self, sizes: np.ndarray) -> list[tuple[int, int, int]]:
        """Runs ``(shard, start, end)`` of consecutive sequences of a chunk, given each one's size in
        bytes; a new shard number means: close the previous shard first."""
        sizes = np.asarray(sizes, dtype=np.int64)
        n = len(sizes)
        runs = []
        start = 0
        while start < n:
            end = n
            limit = self._limit(self.shard)
            if limit is not None:
                if self.in_shard >= limit and self.shard + 1 < self.parts:
                    self._next()
                    continue
                if self.shard + 1 < self.parts:
                    end = min(n, start + max(limit - self.in_shard, 0))
            if self.shard_size is not None:
                if self.in_shard and self.bytes_in_shard >= self.shard_size:
                    self._next()
                    continue
                cum = np.cumsum(sizes[start:end])
                # close after the first sequence that brings the shard to shard_size or more
                k = int(np.searchsorted(cum, self.shard_size - self.bytes_in_shard, side="left")) + 1
                end = min(end, start + max(k, 1))
            if end <= start:
                end = start + 1
            runs.append((self.shard, start, end))
            self.bytes_in_shard += int(sizes[start:end].sum())
            self.in_shard += end - start
            self.seen += end - start
            start = end
        return runs

    def _next(self) -> None:
        self.shard += 1
        self.in_shard = 0
        self.bytes_in_shard = 0


def sequence_bytes(chunk, streams, itemsize: int) -> np.ndarray:
    """Each sequence's data bytes (values, sparse indices and row pointers): what ``shard_size``
    counts for the formats that store columns (Parquet, HF) rather than encoded records."""
    n = len(chunk)
    out = np.zeros(n, dtype=np.int64)
    for spec in streams:
        col = chunk.columns[spec.name]
        so = np.asarray(col.seq_offsets, dtype=np.int64)
        counts = np.diff(so)
        if col.is_sparse:
            nnz = np.diff(np.asarray(col.indptr, dtype=np.int64)[so])
            out += nnz * (itemsize + 4) + (counts + 1) * 8
        else:
            out += counts * spec.dim * itemsize
    return out


def declared_column(chunk, spec):
    """The column of stream ``spec`` in ``chunk``, checked to be what the writer declared (dense or
    sparse or bytes, its dim): data of another shape would be written as the declared stream, silently wrong."""
    col = chunk.columns.get(spec.name)
    if col is None:
        raise ValueError(f"chunk has no stream '{spec.name}'")
    if col.is_sparse != spec.is_sparse or col.is_bytes != spec.is_bytes or col.dim != spec.dim:
        from recordkit.engine.chunk import column_kind
        raise ValueError(f"stream '{spec.name}' is declared {spec.format} dim {spec.dim}, the data is "
                         f"{column_kind(col)} dim {col.dim}")
    return col


def describe(fmt: str, streams, precision, shards: list[dict], **extra) -> bytes:
    """The ``__recordkit__.json`` text of a data set."""
    from recordkit.engine.streams import streams_to_json
    doc = {"format": fmt, "version": META_VERSION, "streams": streams_to_json(streams, precision),
           "sequences": int(sum(s["sequences"] for s in shards)), "shards": shards}
    doc.update(extra)
    return json.dumps(doc, indent=1).encode()


def move_into(src_dir: str, name: str, staged, new_name: str, storage_options=None) -> None:
    """Move file ``name`` of ``src_dir`` (and its checksum sidecar, if it has one) into a
    ``StagedDirectory`` as ``new_name``."""
    from recordkit.storage.checksum import sidecar_path
    src = location.join(src_dir, name)
    location.move(src, staged.path(new_name), storage_options)
    if location.isfile(sidecar_path(src), storage_options):
        location.move(sidecar_path(src), staged.path(new_name + ".rkcrc"), storage_options)


class ShardSetWriter(AtomicWriter):
    """The base of the writers of a directory of shards (WebDataset, TFRecord, MDS): what they
    share of writing one, once.

    The shards go to a ``StagedDirectory`` beside the target, cut where ``ShardCutter`` says
    (``_switch(shard)`` before writing a run to shard ``shard``; ``_counted`` adds the run to the
    shard's counts). ``close`` ends the last shard (an empty data set is one empty shard), lets the
    format write its description (``_describe``) and publishes the whole directory at once; any
    failure on the way discards it, so no partial data set and no temporary file stays behind.
    ``abort`` discards everything written. Closing twice is one close; aborting after a close, or
    twice, changes nothing; closing an aborted writer is a ``UsageError`` (nothing is left to
    publish). Subclasses name their shards (``shard_name``) and may keep a shard in memory
    instead of an open file (``_open_shard`` / ``_close_shard``, as MDS does: its shard header
    needs the sample count first). A format says what it is in its class line:
    ``class XWriter(ShardSetWriter, format="x", what="X directory", shard_name=..., owns=...)``."""

    FORMAT = ""
    WHAT = "data set"  # the directory's kind, in the messages about its target
    DEFAULT_SHARD_SIZE = 256 << 20

    def __init_subclass__(cls, *, format: str | None = None, what: str | None = None, shard_name=None, owns=None,
                          default_size: int | None = None, **kwargs):
        super().__init_subclass__(**kwargs)  # what a subclass leaves out, it inherits
        if format is not None:
            cls.FORMAT, cls.WHAT = format, what
        if default_size is not None:
            cls.DEFAULT_SHARD_SIZE = int(default_size)
        if shard_name is not None:
            cls.shard_name, cls.owns = staticmethod(shard_name), staticmethod(owns)

    def __init__(self, path, *, parts: int | None = None, shard_size: int | None = None,
                 total_sequences: int | None = None, checksums: bool = False, storage_options: dict | None = None):
        from recordkit.storage.staged_directory import StagedDirectory
        self.path = str(path)
        self._cutter = ShardCutter(parts=parts, shard_size=shard_size, total=total_sequences,
                                   default_size=self.DEFAULT_SHARD_SIZE)
        self._dir = StagedDirectory(self.path, owns=self.owns, storage_options=storage_options, checksums=checksums,
                                    what=self.WHAT)
        self._shard = -1
        self._file = None
        self._counts: list[dict] = []
        self._state = "open"  # then "closed" (published) or "aborted" (discarded)
        self.sequences_written = 0

    # -- what a format says ---------------------------------------------------------------------------
    @staticmethod
    def shard_name(i: int) -> str:  # pragma: no cover - every format names its shards
        raise NotImplementedError

    @staticmethod
    def owns(name: str) -> bool:  # pragma: no cover
        raise NotImplementedError

    def _describe(self) -> None:
        """Write the data set's description into ``self._dir`` (called once, at ``close``)."""

    # -- shards -----------------------------------------------------------------------------------------
    def _switch(self, shard: int) -> None:
        """Make ``shard`` the one being written, ending those before it."""
        while self._shard < shard:
            self._close_shard()
            self._shard += 1
            name = self.shard_name(self._shard)
            self._open_shard(name)
            self._counts.append({"name": name, "sequences": 0, "samples": 0})

    def _open_shard(self, name: str) -> None:
        self._file = self._dir.open(name)

    def _close_shard(self) -> None:
        if self._file is not None:
            self._file.commit()
            self._file = None

    def _counted(self, sequences: int, samples: int) -> None:
        """``sequences`` sequences holding ``samples`` samples written to the current shard."""
        self._counts[-1]["sequences"] += int(sequences)
        self._counts[-1]["samples"] += int(samples)

    # -- the end ----------------------------------------------------------------------------------------
    def close(self) -> None:
        if self._state == "closed":
            return
        if self._state == "aborted":
            raise UsageError(f"{self.path}: the {self.WHAT} was aborted (discarded): there is nothing to close")
        try:
            if self._shard < 0:
                self._switch(0)  # no sequences: one empty shard, still a data set its readers open
            self._close_shard()
            self._describe()
            self._dir.commit()
        except BaseException:
            self.abort()
            raise
        self._state = "closed"

    def abort(self) -> None:
        if self._state != "open":
            return
        self._state = "aborted"
        self._file = None  # the staged directory discards every file opened in it
        self._dir.discard()


class ShardSetJoin:
    """Data sets one writer wrote (``--engine ray``'s write tasks each write one) joined in order into
    one: every shard moved under its place in the whole, the descriptions merged, the whole
    published at once (``staged_join``). A format says where a set lists its shards and how the
    merged listing is written; the order of the work is here once:

    1. every set's description read and checked (a set without one is a located ``FormatError``),
       what must agree (the streams) compared and every listed shard found, *before* any shard
       moves: a set that does not fit is a ``FormatError`` naming its description, and every
       source is left as it was;
    2. the shards moved into the staged output under their new names (``shard_name(i, n)``: n,
       the number of shards of the whole, for formats whose names count them), the merged
       description written; a failure discards the staged output.
    """

    WHAT = "data set"
    DESCRIPTION = META_NAME  # the file whose presence says a directory is a set of this format
    AGREE = "streams"        # what sets of one conversion share, in words

    def __init__(self, storage_options=None):
        self.storage_options = storage_options

    def owns(self, name: str) -> bool:
        raise NotImplementedError  # pragma: no cover - each format's

    def shard_name(self, i: int, n: int) -> str:
        raise NotImplementedError  # pragma: no cover

    def read(self, src: str):
        """The set's description (checked as its reader checks it)."""
        raise NotImplementedError  # pragma: no cover

    def agreed(self, doc):
        """What sets that join must share."""
        raise NotImplementedError  # pragma: no cover

    def shards(self, doc) -> list[tuple[str, dict]]:
        """(file name, its entry in the description) of every shard, in order."""
        raise NotImplementedError  # pragma: no cover

    def write(self, staged, docs: list, shards: list[tuple[str, dict]]) -> None:
        """The merged description of ``docs`` (every set's, in order) listing ``shards`` (new name,
        entry) into ``staged``."""
        raise NotImplementedError  # pragma: no cover

    def join(self, sources: list[str], output: str, *, checksums: bool = False) -> list[str]:
        """The shard names of the joined set at ``output``."""
        if not sources:
            raise UsageError(f"{output}: no data sets to join")
        docs = []
        for src in sources:
            path = location.join(src, self.DESCRIPTION)
            if not location.has_file(path, self.storage_options):
                raise FormatError(src, f"no {self.DESCRIPTION}: not a {self.WHAT} recordkit wrote")
            docs.append(self.read(src))
        first = self.agreed(docs[0])
        for src, doc in zip(sources[1:], docs[1:]):
            if self.agreed(doc) != first:
                raise FormatError(location.join(src, self.DESCRIPTION),
                                  f"{self.AGREE}: differ from those of {sources[0]}: only the sets of one "
                                  f"conversion join")
        listed = [(src, name, entry) for src, doc in zip(sources, docs) for name, entry in self.shards(doc)]
        for src, name, _ in listed:  # a shard that is not there would fail the join half way through
            if not location.has_file(location.join(src, name), self.storage_options):
                raise FormatError(location.join(src, self.DESCRIPTION), f"lists {name}, which is not in {src}")
        names = [self.shard_name(i, len(listed)) for i in range(len(listed))]

        def fill(staged):
            for (src, old, _), new in zip(listed, names):
                move_into(src, old, staged, new, self.storage_options)
            self.write(staged, docs, [(new, entry) for (_, _, entry), new in zip(listed, names)])
            return names
        return staged_join(output, self.owns, self.WHAT, fill, storage_options=self.storage_options,
                           checksums=checksums)


class DescribedJoin(ShardSetJoin):
    """The join of the formats that describe themselves in ``__recordkit__.json`` (WebDataset,
    TFRecord): its ``shards`` list renamed, its ``sequences`` recounted."""

    def __init__(self, fmt: str, what: str, shard_name, owns, storage_options=None):
        super().__init__(storage_options)
        self.fmt, self.WHAT, self._name, self._owns = fmt, what, shard_name, owns

    def owns(self, name: str) -> bool:
        return self._owns(name)

    def shard_name(self, i: int, n: int) -> str:
        return self._name(i)

    def read(self, src: str):
        path = location.join(src, META_NAME)
        data = read_whole(path, self.storage_options)
        parse_description(path, data, self.fmt)  # checked as a reader checks it; merged as written
        return json.loads(data)

    def agreed(self, doc):
        return doc.get("streams")

    def shards(self, doc) -> list[tuple[str, dict]]:
        return [(s["name"], s) for s in doc["shards"]]

    def write(self, staged, docs: list, shards: list[tuple[str, dict]]) -> None:
        entries = [dict(entry, name=name) for name, entry in shards]
        doc = dict(docs[0], shards=entries, sequences=int(sum(s["sequences"] for s in entries)))
        staged.write_file(META_NAME, json.dumps(doc, indent=1).encode())


def staged_join(output: str, owns, what: str, fill, *, storage_options=None, checksums: bool = False) -> list[str]:
    """``fill(staged)`` into a ``StagedDirectory`` for ``output``, published when it returns, discarded
    if it raises: how every format's joiner publishes the joined set. Returns what ``fill`` returns."""
    from recordkit.storage.staged_directory import StagedDirectory
    with StagedDirectory(output, owns=owns, storage_options=storage_options, checksums=checksums,
                         what=what) as staged:
        return fill(staged)


def join_described(fmt: str, shard_name, owns, what: str, sources: list[str], output: str, *,
                   storage_options=None, checksums: bool = False) -> list[str]:
    """Several data sets of one shard format that describes itself in ``__recordkit__.json``,
    joined in order into one at ``output`` (``DescribedJoin``). Returns the shard names."""
    return DescribedJoin(fmt, what, shard_name, owns, storage_options).join(sources, output, checksums=checksums)


def read_description(directory: str, fmt: str, storage_options=None, *, is_shard, sequence_bytes: int,
                     files=None) -> dict | None:
    """The parsed ``__recordkit__.json`` of ``directory`` (None when there is none), checked as
    untrusted input (``descriptions.py``): its fields (``parse_description``), and the shards it
    lists against the directory: exactly its shard files (``is_shard(name)``), each holding no
    more sequences than its bytes can at ``sequence_bytes`` each, nor more samples than bytes.
    Each shard entry gains its file's ``size``. ``files``: the reader's ``storage.pool.SourcePool``
    (its one listing of a remote directory answers, no request per file)."""
    path = location.join(directory, META_NAME)
    if files is not None:
        if not files.isfile(path):
            return None
        data = files.read_whole(path)
    elif location.has_file(path, storage_options):
        data = read_whole(path, storage_options)
    else:
        return None
    doc = parse_description(path, data, fmt)
    fields = Fields(path)
    shards = doc["shards"]
    sizes = listed_files(fields, directory, [(f"shards[{i}].name", s["name"]) for i, s in enumerate(shards)],
                         is_shard, storage_options=storage_options, files=None if files is None else files.sizes())
    for i, (s, size) in enumerate(zip(shards, sizes)):
        shard = location.join(directory, s["name"])
        fields.count(s["sequences"], f"shards[{i}].sequences", unit="sequences", size=size, each=sequence_bytes,
                     name=s["name"], shard=shard)
        fields.count(s["samples"], f"shards[{i}].samples", unit="samples", size=size, each=1, name=s["name"],
                     shard=shard)
        s["size"] = size
    return doc


def parse_description(path: str, data: bytes, fmt: str) -> dict:
    """``data``, the text of ``path`` (a ``__recordkit__.json``), parsed and every field checked
    (``descriptions.Fields``): streams as ``StreamSpec``s; anything malformed is a ``FormatError``
    naming the field."""
    fields = Fields(path)
    doc = fields.document(data)
    fields.equal(doc.get("format"), "format", fmt)
    fields.equal(doc.get("version"), "version", META_VERSION)
    doc["streams"] = fields.streams(doc.get("streams"), "streams")
    shards = fields.list(doc.get("shards"), "shards")
    for i, s in enumerate(shards):
        fields.object(s, f"shards[{i}]")
        fields.name(s.get("name"), f"shards[{i}].name")
        fields.int(s.get("sequences"), f"shards[{i}].sequences")
        fields.int(s.get("samples"), f"shards[{i}].samples")
    fields.int(doc.get("sequences"), "sequences")  # the total: bookkeeping, not read
    return doc


def read_whole(path: str, storage_options=None, cache_dir=None) -> bytes:
    """A whole file (a shard is one chunk); a file that shrinks while read is a located error."""
    from recordkit.storage.pool import whole
    src = open_source(path, storage_options=storage_options, cache_dir=cache_dir)
    try:
        return whole(src, path)
    finally:
        src.close()


def sequence_lengths_of(streams, counts: dict) -> np.ndarray:
    """A sequence's length for minibatch sizing: the ``defines_mb_size`` stream's sample count,
    else the longest stream's (``counts``: stream name -> per-sequence sample counts)."""
    defining = [s.name for s in streams if s.defines_mb_size]
    if defining:
        return np.asarray(counts[defining[0]], dtype=np.int64)
    return np.max(np.vstack([np.asarray(counts[s.name], dtype=np.int64) for s in streams]), axis=0)


def offsets(counts) -> np.ndarray:
    out = np.zeros(len(counts) + 1, dtype=np.int64)
    np.cumsum(counts, out=out[1:])
    return out


def resolve_streams(path, recorded, requested):
    """(streams exposed, {stream name: field in the data set}, keeps_alias) for a bridge reader.

    The data set names its fields after the streams' names; its description (``recorded``)
    also keeps each stream's original alias (a CTF file's short name), which the reader
    exposes, so converting back writes the original names (``keeps_alias``). ``requested``
    streams (``--stream NAME=FORMAT:DIM:FIELD``) select the data set's field FIELD (the
    alias, default NAME) and name it NAME, as for CBF.
    """
    from recordkit.engine.streams import StreamSpec, check_streams
    from recordkit.errors import UsageError
    if requested is None:
        return list(recorded), {s.name: s.name for s in recorded}, True
    requested = check_streams(requested)
    if recorded is None:
        return requested, {s.name: s.alias for s in requested}, False
    known = {s.name: s for s in recorded}
    out = []
    for s in requested:
        k = known.get(s.alias)
        if k is None:
            raise UsageError(f"{path}: no stream '{s.alias}' in the data set (it has: {', '.join(known) or 'none'})")
        if k.format != s.format or k.dim != s.dim:
            raise UsageError(f"{path}: stream '{s.name}' is declared {s.format} dim {s.dim}, the data set's "
                             f"'{s.alias}' is {k.format} dim {k.dim}")
        out.append(StreamSpec(s.name, s.format, s.dim, s.alias, s.defines_mb_size or k.defines_mb_size, dtype=k.dtype))
    return out, {s.name: s.alias for s in requested}, False


def gather_ranges(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """``arr[starts[i]:starts[i]+lens[i]]`` for every i, concatenated (``arr``: a read shard's bytes,
    uint8; ranges ascending, not overlapping), copied by the compiled ``_ranges.concat_ranges``."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    nz = lens > 0
    if not nz.any():
        return np.zeros(0, dtype=arr.dtype)
    s, ln = starts[nz], lens[nz]
    e = s + ln
    if np.any(s[1:] < e[:-1]):
        raise ValueError("ranges overlap or are not in order")
    from recordkit.formats._ranges import concat_ranges
    return concat_ranges(arr, np.ascontiguousarray(s), np.ascontiguousarray(ln))
