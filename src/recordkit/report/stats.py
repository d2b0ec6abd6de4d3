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

import numpy as np

from recordkit.engine.presence import StreamCheckError
from recordkit.errors import ErrorBudgetExceeded, RecordkitError

from recordkit.report.summaries import (  # noqa: F401  (the summaries, also named here)
    SAMPLE_ROWS, SAMPLE_BYTES, HIST_DIMS, BINCOUNT_DIM, CLASS_LIMIT, IMAGES, Problem,
    DenseStats, SparseStats, BytesStats, InputReport)


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
        rep.streams.append(BytesStats(s.name) if s.is_bytes else SparseStats(s.name, s.dim) if s.is_sparse
                           else DenseStats(s.name, s.dim))
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
