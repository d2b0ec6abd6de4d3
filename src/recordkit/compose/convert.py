"""``recordkit.convert``: any format recordkit reads into any format it writes, as a library call.

The format registry (``formats/registry.py``) says which reader and writer to open, so the
choice lives here once instead of in ``if``/``elif`` ladders of the command line:
``recordkit convert`` parses its arguments, calls ``convert`` and prints the result.

Before anything is written, the conversion estimates its output from the first chunk it
reads (extrapolated over the input's chunk table) and says what the target format cannot
hold: sparse streams it must write dense, float64 it narrows to float32, sequence keys or
multi-sample sequences it loses, streams it drops. Such a conversion warns; one whose output
would be more than ``MAX_GROWTH`` times its input is refused unless ``allow_densify=True``,
with the estimate in the message (a 50 KB sparse CTF file once became a 376 MB SINGA store,
silently). CTF -> CBF keeps its fast path (``formats/cbf/from_ctf.py``: the CTF kernel parses
straight into CBF records).
"""
from __future__ import annotations

import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from recordkit.engine.streams import StreamSpec, resolve_precision
from recordkit.errors import RecordkitWarning, UsageError
from recordkit.engine import DEFAULT_CHUNK_SIZE

MAX_GROWTH = 10.0


class ConversionRefused(UsageError):
    """The conversion would change the data's size or nature beyond what was allowed."""


@dataclass
class SizeEstimate:
    """What a conversion is expected to write, before it writes (from a sample of its input)."""
    input_bytes: int
    output_bytes: int
    sequences: int
    densified: list = field(default_factory=list)     # sparse streams written dense: [(name, dim)]
    narrowed: bool = False                             # float64 values written as float32
    dropped: list = field(default_factory=list)        # what the target cannot hold, in words

    @property
    def growth(self) -> float:
        """Output over input bytes (0 when the input's size is unknown: a Deserializer that reports
        no byte sizes, whose growth cannot be judged)."""
        return self.output_bytes / self.input_bytes if self.input_bytes > 0 else 0.0


@dataclass
class Conversion:
    """The result of ``convert``."""
    source: str
    output: str
    to: str
    sequences: int
    input_bytes: int
    seconds: float
    estimate: SizeEstimate | None
    reader: object = None  # the (closed) deserializer: error budget summary, streams
    notes: list = field(default_factory=list)  # one-line facts for the user (e.g. ids renumbered by CBF)

    @property
    def mb_per_second(self) -> float:
        return self.input_bytes / 1e6 / max(self.seconds, 1e-9)


# -- choosing the formats ---------------------------------------------------------------------------
def resolve_target(output, to=None, storage_options=None) -> str:
    """The format to write: ``to``, else OUT's extension, else OFRecord for an existing directory."""
    from recordkit.formats import registry
    from recordkit.storage import location
    if to is not None:
        chosen = registry.get(to)
        if chosen.writer is None:
            raise UsageError(f"recordkit does not write {to} data (it writes: {', '.join(registry.writable())})")
        return chosen.name
    fmt = registry.by_extension(output)
    if fmt is not None and fmt.writer:
        return fmt.name
    if location.isdir(output, storage_options):
        return "ofrecord"
    raise UsageError(f"cannot tell the format of {output} from its extension: use --to")


def stream_specs(streams):
    """``StreamSpec`` objects from StreamSpecs or ``NAME=FORMAT:DIM[:ALIAS]`` texts (None stays None)."""
    if streams is None:
        return None
    out = []
    for s in streams:
        if isinstance(s, StreamSpec):
            out.append(s)
        else:
            try:
                out.append(StreamSpec.parse(s))
            except ValueError as e:
                raise UsageError(str(e)) from None
    return out or None


def open_reader(src, *, source_format=None, streams=None, precision=None, storage_options=None, cache_dir=None,
                **options):
    """A Deserializer for ``src`` (a path in any registered format, sniffed unless ``source_format``
    names it; or a Deserializer, returned as is). ``streams``: StreamSpecs or ``NAME=FORMAT:DIM[:ALIAS]``
    texts (needed for CTF and OFRecord; a selection/renaming for formats that record their own).
    ``options``: the format's reader options (CTF: ``max_errors``, ``skip_sequence_ids``, ``chunk_size``,
    ``cache_index``, ``trace_level``; CSV: ``csv_dim``, ``csv_separator``, ``csv_has_label``)."""
    if not isinstance(src, (str, os.PathLike)):
        return src
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    from recordkit.storage.probe import reusing
    path = os.fspath(src)
    with reusing(path, storage_options, cache_dir):  # a remote path: one look answers detection and the open
        kind = source_format or sniff_format(path, storage_options, cache_dir=cache_dir)
        return registry.get(kind).open_reader(path, stream_specs(streams), precision=precision,
                                              storage_options=storage_options, cache_dir=cache_dir, **options)


def precision_of(reader) -> str:
    """'double' when the reader delivers float64, else 'float'."""
    dtypes = {str(s.dtype) for s in reader.streams if s.dtype is not None}
    if dtypes == {"float64"}:
        return "double"
    return "double" if getattr(reader, "dtype", None) is not None and str(reader.dtype) == "float64" else "float"


def _is_ctf(reader) -> bool:
    from recordkit.formats.ctf import CTFReader
    return isinstance(reader, CTFReader)


def output_streams(reader, target: str) -> list[StreamSpec]:
    """The streams a conversion of ``reader`` into format ``target`` writes (names, aliases)."""
    # CTF -> CTF keeps the file's short aliases, and so do formats that record them (Parquet, HF);
    # elsewhere the names are the names (CBF has no aliases)
    from recordkit.formats import registry
    if registry.get(target).aliases and not (_is_ctf(reader) or getattr(reader, "keeps_aliases", False)):
        return [StreamSpec(s.name, s.format, s.dim, None, s.defines_mb_size, s.dtype) for s in reader.streams]
    return list(reader.streams)


# -- the estimate -------------------------------------------------------------------------------------
def _input_bytes(reader, path, storage_options) -> int:
    total = sum(c.size for c in reader.chunks)
    if total == 0 and isinstance(path, (str, os.PathLike)):
        try:
            from recordkit.storage import location
            p = os.fspath(path)
            if location.isfile(p, storage_options):
                fs, target = location.filesystem(p, storage_options)
                total = int(fs.size(target))
        except Exception:  # noqa: BLE001 - an estimate without a size is still an estimate
            total = 0
    return total


def _keys_are_ids(reader) -> bool:
    from recordkit.engine.deserializer import keys_are_ids
    return keys_are_ids(reader)


def estimate(reader, sample, target: str, precision: str, *, input_bytes: int) -> SizeEstimate:
    """The output size of converting ``reader`` to ``target``, extrapolated from ``sample`` (a
    ChunkData read from it) over the input's sequence count; and what the target loses."""
    from recordkit.formats import registry
    fmt = registry.get(target)
    esize = 4 if (not fmt.float64 or resolve_precision(precision) == np.float32) else 8
    n = max(len(sample), 1)
    total_sequences = sum(c.num_sequences for c in reader.chunks)
    per_seq = 8.0  # key / framing
    densified, dropped = [], []
    streams = list(reader.streams)
    written = streams
    if fmt.records == "tuples":  # SINGA records: one features stream (+ label)
        names = [s.name for s in streams]
        feature = next((nm for nm in names if nm != "label"), names[0])
        written = [s for s in streams if s.name in (feature, "label")]
        lost = [s.name for s in streams if s not in written]
        if lost:
            dropped.append(f"stream(s) {', '.join(lost)} (a SINGA record holds one features vector and a label)")
    for spec in written:
        col = sample.columns.get(spec.name)
        if col is None:
            continue
        samples = col.num_samples
        if spec.is_bytes:
            per_seq += sum(map(len, col.values)) / n
        elif spec.is_sparse and not fmt.sparse:
            densified.append((spec.name, spec.dim))
            per_seq += samples * spec.dim * esize / n
        elif spec.is_sparse:
            per_seq += (len(col.values) * (esize + 4) + samples * 8) / n
        else:
            per_seq += (samples * spec.dim * esize + 8) / n
    narrowed = not fmt.float64 and any(s.dtype is not None and s.dtype == np.float64 for s in streams) \
        or (not fmt.float64 and resolve_precision(precision) == np.float64)
    if not fmt.keys and _keys_are_ids(reader):
        dropped.append(f"sequence keys ({target} numbers sequences by position)")
    if not fmt.sequences:
        multi = any(np.any(col.sample_counts() > 1) for col in sample.columns.values())
        if multi:
            dropped.append(f"sequence boundaries (a {target} record is one sample: each sample of a sequence "
                           f"becomes a record with the sequence's key)")
    return SizeEstimate(input_bytes, int(per_seq * total_sequences), total_sequences, densified, narrowed, dropped)


def _mb(n: float) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.1f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 1e3:.1f} KB"


def check_estimate(est: SizeEstimate, source: str, target: str, *, allow_densify: bool) -> None:
    """Warn about what the conversion changes; refuse growth beyond ``MAX_GROWTH`` unless allowed."""
    what = []
    if est.densified:
        what.append("sparse stream(s) " + ", ".join(f"{n} (dim {d})" for n, d in est.densified)
                    + f" written dense ({target} holds no sparse data)")
    if est.narrowed:
        what.append(f"float64 values narrowed to float32 ({target} holds no float64)")
    what += ["drops " + d for d in est.dropped]
    size = f"{_mb(est.input_bytes)} -> about {_mb(est.output_bytes)}"
    if est.growth > MAX_GROWTH and not allow_densify:
        raise ConversionRefused(
            f"converting {source} to {target} would grow the data about {est.growth:,.0f}x ({size})"
            + (": " + "; ".join(what) if what else "")
            + ". Pass --allow-densify (allow_densify=True) to convert anyway.")
    if what:
        sized = f"estimated {size}, {est.growth:,.1f}x" if est.input_bytes > 0 else \
            f"estimated output about {_mb(est.output_bytes)}"
        warnings.warn(f"{source} -> {target}: " + "; ".join(what) + f" ({sized})",
                      RecordkitWarning, stacklevel=3)


# -- the conversion -----------------------------------------------------------------------------------
def convert(src, dst, to: str | None = None, streams=None, *, source_format: str | None = None,
            precision: str | None = None, parts: int | None = None, shard_size: int | None = None,
            chunk_size: int | None = None, output_chunk_size: int | None = None, checksums: bool = False,
            storage_options=None, cache_dir=None, allow_densify: bool = False, progress=None, threads: int = 2,
            part_order: str = "contiguous", writer_options: dict | None = None, **reader_options) -> Conversion:
    """Convert ``src`` (a path in any readable format, or a Deserializer) into ``dst`` as ``to``
    (default: from ``dst``'s extension; an existing directory: OFRecord).

    ``streams``: the input's streams (``StreamSpec``s or ``NAME=FORMAT:DIM[:ALIAS]`` texts; CTF and
    OFRecord need them; formats that record their own take them as a selection). ``precision``:
    'float'/'double' (default: the input's). ``parts``/``shard_size``: output parts (OFRecord,
    Parquet, HF). ``chunk_size``: the CTF index chunk size (and CBF output chunks unless
    ``output_chunk_size``). ``checksums``: ``.rkcrc`` sidecars beside every output file.
    ``progress(nbytes)``: called with input bytes as they are converted. ``allow_densify``: convert
    even when the output is estimated above ``MAX_GROWTH`` times the input. ``part_order``:
    OFRecord parts as contiguous runs (file order kept) or ``"round-robin"``. ``reader_options``:
    the input format's reader options (e.g. ``allow_empty_streams``, ``max_errors``);
    ``writer_options`` the output format's (e.g. Parquet's ``content_defined_chunking``: an option
    its writer does not take is a ``UsageError``). The output appears under ``dst`` only when complete.
    """
    from recordkit.formats import registry
    from recordkit.storage import location
    dst = os.fspath(dst)
    target = resolve_target(dst, to, storage_options)
    fmt = registry.get(target)
    fmt.require("writing")
    writer_options = dict(writer_options or {})
    for option in writer_options:
        if not fmt.writer_takes(option):
            raise UsageError(f"{option} (--{option.replace('_', '-')}): {target} output has no such option")
    if isinstance(src, (str, os.PathLike)):
        s = os.fspath(src)
        if s == dst or (not location.is_url(dst) and not location.is_url(s) and os.path.exists(dst)
                        and os.path.exists(s) and os.path.samefile(s, dst)):
            raise UsageError("IN and OUT are the same file")
    if chunk_size is not None:
        reader_options["chunk_size"] = chunk_size
    reader = open_reader(src, source_format=source_format, streams=streams, precision=precision,
                         storage_options=storage_options, cache_dir=cache_dir, **reader_options)
    source_name = os.fspath(src) if isinstance(src, (str, os.PathLike)) else _name_of(reader, "input")
    try:
        return _run(reader, source_name, dst, target, precision or precision_of(reader), parts=parts,
                    shard_size=shard_size, chunk_size=output_chunk_size or chunk_size, checksums=checksums,
                    storage_options=storage_options, allow_densify=allow_densify, progress=progress,
                    threads=threads, part_order=part_order, writer_options=writer_options)
    finally:
        close = getattr(reader, "close", None)
        if close is not None and isinstance(src, (str, os.PathLike)):
            close()


def _iter_chunks(reader, threads: int):
    it = getattr(reader, "iter_chunks", None)
    if it is None:
        return (reader.load_chunk(c.id) for c in reader.chunks)
    if _is_ctf(reader):  # CTF pieces go to the writer unjoined (it takes sequences in order): one copy fewer
        return it(threads=threads, whole=False)
    return it(threads=threads)


def _chunk_bytes(reader, chunk) -> int:
    """Bytes of input behind a chunk or piece, for the progress bar."""
    if not 0 <= chunk.chunk_id < len(reader.chunks):
        return 0
    info = reader.chunks[chunk.chunk_id]
    return info.size * len(chunk) // max(info.num_sequences, 1)


def refuse_bytes(streams, fmt) -> None:
    """A ``UsageError`` when ``fmt`` cannot hold a bytes stream of ``streams`` (its registry entry says
    so: CTF, CBF and SINGA's stores hold numbers only), naming the stream and the formats that can."""
    held = [s.name for s in streams if s.is_bytes]
    if held and not fmt.bytes:
        from recordkit.formats import registry
        able = ", ".join(f.name for f in registry.FORMATS.values() if f.bytes and f.writer)
        raise UsageError(f"{fmt.name} holds numbers only, not bytes stream '{held[0]}' (strings or encoded images): "
                         f"convert to {able}, or select the numeric streams with --stream")


def _run(reader, source, dst, target, precision, *, parts, shard_size, chunk_size, checksums, storage_options,
         allow_densify, progress, threads, part_order="contiguous", writer_options=None) -> Conversion:
    from recordkit.formats import registry
    fmt = registry.get(target)
    input_bytes = _input_bytes(reader, source, storage_options)
    out_streams = output_streams(reader, target)
    refuse_bytes(out_streams, fmt)
    total_sequences = sum(c.num_sequences for c in reader.chunks)
    t0 = time.perf_counter()
    if fmt.from_text is not None and _is_ctf(reader):
        import importlib
        from_ctf = importlib.import_module(fmt.from_text)
        if from_ctf.supports(reader, resolve_precision(precision)):
            # CBF holds everything CTF does but ids: the estimate needs no sample
            est: SizeEstimate | None = SizeEstimate(input_bytes, 0, total_sequences)
            written = from_ctf.convert(reader, dst, chunk_size=chunk_size or DEFAULT_CHUNK_SIZE, threads=threads,
                                       progress=progress, storage_options=storage_options, checksums=checksums)
            ids: _SequenceIds | None = _SequenceIds(reader)
            assert ids is not None
            if ids.carried:
                ids.add(reader.index.keys)  # the fast path writes the indexed sequences in order
            from recordkit.engine.deserializer import tolerated
            summary = tolerated(reader)
            renumbered = bool(getattr(reader, "errors_counted", 0)) or bool(summary.get("empty_sequences", 0))
            return Conversion(source, dst, target, written, input_bytes, time.perf_counter() - t0, est, reader,
                              ids.note(source, dst, renumbered=renumbered))
    chunks = _iter_chunks(reader, threads)
    try:
        first = next(chunks, None)
        est = None
        if first is not None:
            est = _without_keys(estimate(reader, first, target, precision, input_bytes=input_bytes), target)
            check_estimate(est, source, target, allow_densify=allow_densify)
        writer = fmt.open_writer(dst, out_streams, precision=precision, parts=parts, shard_size=shard_size,
                                 chunk_size=chunk_size, checksums=checksums, storage_options=storage_options,
                                 total_sequences=total_sequences, part_order=part_order, **(writer_options or {}))
        ids = _SequenceIds(reader) if not fmt.keys else None
        with writer:
            if first is not None:
                _write(writer, first, source)
                if ids is not None:
                    ids.add(first.keys)
                if progress is not None:
                    progress(_chunk_bytes(reader, first))
                for chunk in chunks:
                    _write(writer, chunk, source)
                    if ids is not None:
                        ids.add(chunk.keys)
                    if progress is not None:
                        progress(_chunk_bytes(reader, chunk))
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    return Conversion(source, dst, target, writer.sequences_written, input_bytes, time.perf_counter() - t0, est,
                      reader, ids.note(source, dst) if ids is not None else [])


class _SequenceIds:
    """Whether the input's sequence ids survive into CBF, which has no key field: a CBF file's
    keys are the ordinals 0..N-1, so ids that are anything else are lost (the conversion says so
    in one note). Only inputs whose keys are ids are judged (CTF with ids, OFRecord records with
    a ``key`` feature); positions and line numbers are not ids."""

    def __init__(self, reader):
        self.carried = _keys_are_ids(reader)
        self.count = 0
        self.ordinal = True  # every key so far equals its position
        self.first = self.last = None

    def add(self, keys) -> None:
        n = len(keys)
        if not n:
            return
        if self.ordinal and not np.array_equal(np.asarray(keys, dtype=np.uint64),
                                               np.arange(self.count, self.count + n, dtype=np.uint64)):
            self.ordinal = False
        if self.first is None:
            self.first = int(keys[0])
        self.last = int(keys[-1])
        self.count += n

    def note(self, source, dst, *, renumbered: bool = False) -> list[str]:
        """The note when the ids are not already 0..N-1 (``renumbered``: sequences were dropped, so
        the keys after them shift)."""
        if not self.carried or self.first is None or (self.ordinal and not renumbered):
            return []
        return [f"CBF has no sequence ids: the sequences of {source} (ids {self.first}..{self.last}) are keyed "
                f"by position 0..N-1 in {dst}; CTF and OFRecord output keep the ids"]


def _without_keys(est: SizeEstimate, target: str) -> SizeEstimate:
    """CBF's lost ids are the note's business (it knows whether they were 0..N-1 anyway)."""
    from recordkit.formats import registry
    if not registry.get(target).keys:
        est.dropped = [d for d in est.dropped if not d.startswith("sequence keys")]
    return est


def _write(writer, chunk, source: str) -> None:
    """One chunk into the writer; a value the target cannot hold names the input file too (the
    writer knows the stream, sequence key, chunk and sample, not where the chunk came from)."""
    from recordkit.errors import UnrepresentableError
    try:
        writer.write_chunk(chunk)
    except UnrepresentableError as e:
        raise UnrepresentableError(f"{source}: {e}") from None


def _warn_dropped(est: SizeEstimate, source: str, target: str) -> None:
    if est.dropped:
        warnings.warn(f"{source} -> {target}: " + "; ".join("drops " + d for d in est.dropped), RecordkitWarning,
                      stacklevel=3)


def _name_of(reader, default: str) -> str:
    from recordkit.engine.deserializer import name_of
    return name_of(reader, default)
