"""The format registry: every data format recordkit reads or writes, registered in one place.

A format is a sub-package under ``formats/`` (its codec) plus one ``Format`` entry here: its
name (``recordkit convert --to NAME``), the extensions that name it, how a path holding it is
recognised, a *lazy* reader factory (a Deserializer) and writer factory (``write_chunk`` /
``close`` / ``abort``), the optional extra it needs (``pip install 'recordkit[EXTRA]'``), and
what its data model can hold (sparse data, sequence keys, float64, sequence boundaries, bytes).
The CLI's choices, format detection (``formats/detect.py``), ``recordkit.convert`` and the
README's and the docs' format table all read this table, so adding a format is one sub-package and one entry.

Factories are ``"module:callable"`` strings imported on first use: ``recordkit --help`` and every
command stay free of pyarrow, datasets and the like until a path in that format is opened
(``tests/test_cli_startup.py``).

Reader factories take ``(path, streams=None, *, precision=None, storage_options=None,
cache_dir=None, ...)``; writer factories ``(path, streams, *, precision="float", parts=None,
shard_size=None, checksums=False, storage_options=None, ...)`` and may name ``chunk_size`` and
``total_sequences`` (the input's sequence count, to balance ``parts``). Each gets only the
options its signature names (``_call``).
"""
from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass

from recordkit.errors import UsageError


class MissingDependency(UsageError, ImportError):
    """A format's optional dependency is not installed: names the package and the extra."""


@dataclass(frozen=True)
class Format:
    name: str
    title: str
    layout: str                                  # what a path of this format is: "file", "directory", ...
    extensions: tuple[str, ...] = ()             # lower-case, with the dot; first = the usual one
    reader: str | None = None                    # "module:callable" -> Deserializer
    writer: str | None = None                    # "module:callable" -> writer
    extra: str | None = None                     # the pip extra that installs `requires`
    requires: tuple[str, ...] = ()               # modules the codec imports
    sparse: bool = True                          # holds sparse streams as sparse
    keys: bool = True                            # keeps sequence keys (ids)
    float64: bool = True                         # keeps float64 values
    sequences: bool = True                       # keeps multi-sample sequences as such
    bytes: bool = False                          # holds bytes streams (strings, encoded images): one value a
                                                 # sequence, written back byte for byte
    describes_streams: bool = True               # the data carries its stream declarations (no --stream needed)
    records_streams: str | None = None           # "module:callable"(path, *, storage_options) -> the declarations
                                                 # recordkit's writer recorded beside the data (OFRecord's
                                                 # _recordkit_streams.json), or None: read back without --stream
    family: str | None = None                    # what detect.sniff() calls it (kvfile/binfile: "singa")
    file_probe: str | None = None                # "module:callable"(path, head, source, storage_options) -> bool
    directory_probe: str | None = None           # "module:callable"(names) -> bool: the directory says it is
                                                 # one data set of this format (formats/directories.py)
    output_directory: bool = False               # the writer makes a directory (of parts)
    shards: bool = False                         # a bridge shard directory (formats/sharding.py description)
    validator: str | None = None                 # module with validate(path, *, checked, **options)
    joiner: str | None = None                    # "module:callable"(sources, output, *, storage_options, checksums):
                                                 # sets of this format joined into one (--engine ray's tasks)
    parts: str | None = None                     # "module:callable"(path, *, storage_options) -> the files of a
                                                 # directory data set (default: every file under it)
    records: str | None = None                   # what a record is when it is not a set of streams: "features"
                                                 # (OFRecord: named features) or "tuples" (SINGA stores: key/value);
                                                 # cat/stats/inspect show them as such unless --stream is given
    aliases: bool = False                        # the writer names streams by their aliases (CTF's |ALIAS)
    from_text: str | None = None                 # module with supports(reader, dtype) / convert(reader, dst, ...):
                                                 # a direct conversion from an indexed text reader (CTF -> CBF)
    describer: str | None = None                 # "module:callable"(path, *, storage_options, lengths_out,
                                                 # chunk_size, skip_ids) -> inspect's description of one file
    ray: str | None = None                       # how `convert --engine ray` writes it: "parts" (a part per
                                                 # task), "sets" (a set per task, joined), "native" (Ray's writer)
    file_openers: str | None = None              # "module:callable"(path, streams, *, precision, storage_options,
                                                 # cache_dir, ...) -> a picklable zero-argument opener per input file
                                                 # (formats/file_openers.py): Ray's and Spark's reads plan it file by
                                                 # file, keys numbered on across files where keys=False; None: one
                                                 # input read through its reader (--engine ray does not read it)
    commands: tuple[str, ...] | None = None      # the only commands that take it (None: every command)
    commands_reason: str = ""                    # ... and why the others do not, one line
    images: str | None = None                    # "module:callable"(path, field, *, storage_options, cache_dir):
                                                 # (encoded image, (file, record)) pairs for recordkit.images
    notes: str = ""

    @property
    def kind(self) -> str:
        """The name the sniffing helpers return (a store family for SINGA's record stores)."""
        return self.family or self.name

    @property
    def needs_streams(self) -> bool:
        """Reading it needs ``--stream`` (CTF text, a CSV store): nothing in the data declares them."""
        return not (self.describes_streams or self.records_streams)

    def recorded_streams(self, path, storage_options=None):
        """The stream declarations a data set carries (None when it carries none: give ``--stream``).
        A format that describes its streams says so by opening; this answers for those that may not."""
        if self.records_streams is None:
            return None
        return _load(self.records_streams)(path, storage_options=storage_options)

    def files(self, path, storage_options=None) -> list[str]:
        """The files a data set at ``path`` consists of (``checksum`` writes a sidecar beside each):
        a file itself; a directory's parts (the format's ``parts``), else every file under it that is
        not a sidecar."""
        from recordkit.storage import location
        if not location.isdir(path, storage_options):
            return [str(path)]
        if self.parts is not None:
            return list(_load(self.parts)(path, storage_options=storage_options))
        found = []
        for name in sorted(location.listdir(path, storage_options)):
            full = location.join(str(path), name)
            if name.startswith(".") or name.endswith(location.SIDECAR_SUFFIX):
                continue
            found.extend(self.files(full, storage_options) if location.isdir(full, storage_options) else [full])
        return found

    def missing(self) -> list[str]:
        """The required modules that are not importable."""
        return [m for m in self.requires if importlib.util.find_spec(m) is None]

    def require(self, what: str = "use") -> None:
        """Raise ``MissingDependency`` naming the extra when a required module is missing."""
        missing = self.missing()
        if missing:
            hint = f"pip install 'recordkit[{self.extra}]'" if self.extra else f"pip install {' '.join(missing)}"
            raise MissingDependency(f"{what} {self.name} data needs {', '.join(missing)}, which is not installed: "
                                    f"{hint}")

    def open_reader(self, path, streams=None, **options):
        if self.reader is None:
            raise UsageError(f"recordkit does not read {self.name} data")
        self.require("reading")
        return _call(_load(self.reader), path, _selection(streams), **options)

    def openers(self, path, streams=None, **options) -> list:
        """A picklable zero-argument opener per input file of the data set at ``path`` (``file_openers``):
        what a distributed read opens once to plan and again in each task."""
        if self.file_openers is None:
            raise UsageError(f"recordkit does not plan {self.name} data file by file")
        self.require("reading")
        return _load(self.file_openers)(path, streams, **options)

    def join(self, sources: list[str], output: str, *, storage_options=None, checksums: bool = False) -> list[str]:
        """Data sets of this format (written by its writer, same streams) joined in order into one."""
        if self.joiner is None:
            raise UsageError(f"recordkit cannot join {self.name} data sets")
        self.require("writing")
        return _load(self.joiner)(sources, output, storage_options=storage_options, checksums=checksums)

    def open_images(self, path, field, **options):
        """The encoded images of ``field`` (a feature, column or member extension) of every record, with
        where each came from: what :class:`recordkit.images.ImageStage` batches take."""
        if self.images is None:
            with_images = ", ".join(f.name for f in FORMATS.values() if f.images)
            raise UsageError(f"recordkit reads no images from {self.name} data (it does from {with_images})")
        self.require("reading")
        return _call(_load(self.images), path, field, **options)

    def writer_takes(self, option: str) -> bool:
        """Whether this format's writer names ``option`` (a conversion refuses one it does not)."""
        import inspect
        return self.writer is not None and option in inspect.signature(_load(self.writer)).parameters

    def open_writer(self, path, streams, **options):
        if self.writer is None:
            raise UsageError(f"recordkit does not write {self.name} data")
        self.require("writing")
        return _call(_load(self.writer), path, streams, **options)


_STORAGE = ("storage_options", "cache_dir")


def _call(factory, *args, **options):
    """``factory(*args, **options)`` with only the options it names: a conversion offers every option
    it has (``parts``, ``total_sequences``, CTF's ``max_errors``...) and each codec takes its own. A
    factory with ``**kwargs`` also gets the storage options (``**storage``, forwarded to the files)."""
    import inspect
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return factory(*args, **options)
    taken = {k: v for k, v in options.items() if k in params and params[k].kind is not inspect.Parameter.VAR_KEYWORD}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        taken.update({k: v for k, v in options.items() if k in _STORAGE and k not in taken and v is not None})
    return factory(*args, **taken)


def _selection(streams):
    """``--stream`` texts or StreamSpecs (or None) as StreamSpecs: what every reader factory gets."""
    if not streams:
        return None
    from recordkit.engine.streams import StreamSpec
    return [s if isinstance(s, StreamSpec) else StreamSpec.parse(s) for s in streams]


def _load(ref: str):
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    if fmt.name in FORMATS:
        raise ValueError(f"format {fmt.name!r} registered twice")
    FORMATS[fmt.name] = fmt
    return fmt



# -- the registrations (detection tries files' probes and directories' probes in this order; the
#    shard formats come before OFRecord and SINGA, whose probes parse a first frame) -----
_RV = "recordkit.formats.reader_validate"  # validation by loading every chunk through the reader
_FILES = "recordkit.formats.file_openers"  # the formats Ray and Spark plan file by file
register(Format("cbf", "CNTK binary format (CBF)", "file, or a directory of part-NNNNN.cbf", (".cbf", ".bin"),
                reader="recordkit.formats.cbf.hooks:open_cbf", writer="recordkit.formats.cbf.hooks:create_cbf", keys=False, ray="parts",
                file_openers=_FILES + ":cbf",
                from_text="recordkit.formats.cbf.from_ctf", describer="recordkit.report.describe:describe_cbf",
                validator="recordkit.formats.cbf.validate",
                file_probe="recordkit.formats.cbf.hooks:probe_cbf", directory_probe="recordkit.formats.cbf.hooks:probe_cbf_parts",
                notes="keys are ordinals"))
register(Format("parquet", "Apache Parquet", "file, or a directory of part-NNNNN.parquet", (".parquet",),
                reader="recordkit.formats.parquet:ParquetDeserializer", writer="recordkit.formats.parquet:ParquetWriter",
                extra="parquet", requires=("pyarrow",), file_probe="recordkit.formats.bridge_probes:probe_parquet", validator=_RV, ray="native",
                directory_probe="recordkit.formats.bridge_probes:probe_parquet_parts", images="recordkit.formats.parquet.images:encoded_images",
                notes="dense `list<fixed_size_list<float>[DIM]>`, sparse `list<struct<indices, values>>`; other writers' number columns read without --stream", bytes=True))
register(Format("hf", "Hugging Face datasets (`save_to_disk`)", "directory", (),
                reader="recordkit.formats.hf:HFDeserializer", writer="recordkit.formats.hf:HFWriter",
                joiner="recordkit.formats.hf.join:join_sets", ray="sets", extra="hf", requires=("pyarrow",), directory_probe="recordkit.formats.bridge_probes:probe_hf", output_directory=True,
                validator=_RV, images="recordkit.formats.hf.images:encoded_images",
                notes="`datasets.load_from_disk(OUT)`; the Parquet columns", bytes=True))
register(Format("lance", "Lance data set", "directory", (".lance",),
                reader="recordkit.formats.lance.reader:LanceDeserializer",
                writer="recordkit.formats.lance.writer:LanceWriter", extra="lance", requires=("lance", "pyarrow"),
                directory_probe="recordkit.formats.lance.probe:probe", output_directory=True, validator=_RV,
                notes="the Parquet columns, a fragment per chunk; other writers' columns read without --stream", bytes=True))
register(Format("webdataset", "WebDataset tar shards", "directory of shard-NNNNNN.tar (or one .tar)", (".tar",),
                reader="recordkit.formats.webdataset:WebDatasetReader",
                writer="recordkit.formats.webdataset:WebDatasetWriter", extra="webdataset",
                joiner="recordkit.formats.webdataset.writer:join_sets", shards=True, validator=_RV, ray="sets",
                file_probe="recordkit.formats.bridge_probes:probe_webdataset", directory_probe="recordkit.formats.bridge_probes:probe_webdataset_shards",
                output_directory=True, images="recordkit.formats.webdataset.images:encoded_images",
                notes="members `KEY.NAME.npy`; sparse as indices/values/offsets members; other writers' `.npy`/`.cls` read without --stream", bytes=True))
register(Format("tfrecord", "TFRecord (`tf.train.Example` / `SequenceExample`)", "directory of part-NNNNN.tfrecord (or one file)",
                (".tfrecord", ".tfrecords"), reader="recordkit.formats.tfrecord:TFRecordReader",
                writer="recordkit.formats.tfrecord:TFRecordWriter", shards=True, validator=_RV,
                joiner="recordkit.formats.tfrecord.writer:join_sets", ray="sets",
                extra="tfrecord", requires=("crc32c",), float64=False, file_probe="recordkit.formats.bridge_probes:probe_tfrecord",
                directory_probe="recordkit.formats.bridge_probes:probe_tfrecord_parts", output_directory=True,
                images="recordkit.formats.tfrecord.images:encoded_images",
                notes="an Example per one-sample sequence, else feature lists NAME (sparse: NAME.indices/NAME.values); float64 narrowed to float32; other writers' Examples read without --stream", bytes=True))
register(Format("mds", "MosaicML Streaming (MDS)", "directory: index.json + shards", (),
                reader="recordkit.formats.mds:MDSReader", writer="recordkit.formats.mds:MDSWriter",
                joiner="recordkit.formats.mds.join:join_sets", ray="sets",
                directory_probe="recordkit.formats.mds.probe:probe", output_directory=True, shards=True, validator=_RV,
                images="recordkit.formats.mds.images:encoded_images", notes="columns `ndarray:float32` NAME (sparse: NAME.indices/values/offsets); Streaming's number columns read without --stream", bytes=True))
register(Format("ofrecord", "OneFlow OFRecord", "directory of part-N files (or one file)", (),
                reader="recordkit.formats.ofrecord.hooks:open_ofrecord", writer="recordkit.formats.ofrecord.hooks:create_ofrecord", requires=("google.protobuf",),
                parts="recordkit.formats.ofrecord.dataset:part_paths", records="features", ray="parts",
                file_openers=_FILES + ":ofrecord",
                validator="recordkit.formats.ofrecord.validate",
                file_probe="recordkit.formats.ofrecord.hooks:probe_ofrecord", directory_probe="recordkit.formats.ofrecord.hooks:probe_ofrecord_parts",
                output_directory=True, describes_streams=False, records_streams="recordkit.formats.ofrecord.dataset:read_streams",
                notes="streams recorded in `_recordkit_streams.json` by recordkit; other sets need --stream",
                images="recordkit.formats.ofrecord.images:encoded_images", bytes=True))
register(Format("kvfile", "SINGA KVFile record store", "file", (), reader="recordkit.formats.singa.hooks:open_singa", records="tuples",
                file_openers=_FILES + ":singa",
                writer="recordkit.formats.singa.hooks:create_kvfile", family="singa", sparse=False, float64=False, sequences=False,
                validator="recordkit.formats.singa.validate",
                file_probe="recordkit.formats.singa.hooks:probe_kvfile", directory_probe="recordkit.formats.singa.hooks:probe_singa_shard",
                notes="records: `features` + `label`"))
register(Format("binfile", "SINGA BinFile record store", "file", (), reader="recordkit.formats.singa.hooks:open_singa", records="tuples",
                file_openers=_FILES + ":singa",
                writer="recordkit.formats.singa.hooks:create_binfile", family="singa", sparse=False, float64=False, sequences=False,
                validator="recordkit.formats.singa.validate",
                file_probe="recordkit.formats.singa.hooks:probe_binfile", notes="records: `features` + `label`"))
register(Format("csv", "SINGA CSV store", "file", (), reader="recordkit.formats.singa.hooks:open_csv", sparse=False,
                keys=False, sequences=False, describes_streams=False, notes="read with --from csv --csv-dim N",
                commands=("convert",), commands_reason="CSV is never detected: `convert --from csv --csv-dim N` "
                                                       "reads it (then any command reads the output)"))
# CTF last: a file no probe claims is read as CTF text.
register(Format("ctf", "CNTK text format (CTF)", "file", (".ctf", ".txt", ".text"), reader="recordkit.formats.ctf.hooks:open_ctf",
                writer="recordkit.formats.ctf.hooks:create_ctf", validator="recordkit.formats.ctf.validate", describes_streams=False,
                aliases=True, describer="recordkit.report.describe:describe_ctf", file_openers=_FILES + ":ctf",
                notes="needs --stream to read"))


# -- which command takes which format ---------------------------------------------------------------------------------
# Commands that do not take a data set of every format: command -> (the formats it takes, why the others are not
# taken). Every other command takes every format (tests/test_command_matrix.py runs them all); docs/formats.md shows
# the matrix with these reasons.
COMMAND_LIMITS: dict[str, tuple[tuple[str, ...], str]] = {
    "prepare": ((), "writes SINGA stores from the CIFAR-10/MNIST binaries; it reads no data set"),
    "demo": ((), "writes and reads its own sample CTF corpus; it takes no data set"),
    "reshard": (("ofrecord",), "re-splits OFRecord parts; other formats: `convert --parts N`"),
}


def unsupported(command: str, fmt: str) -> str | None:
    """Why ``command`` does not take data sets of format ``fmt`` (one line), or None when it does."""
    limit = COMMAND_LIMITS.get(command)
    if limit is not None and fmt not in limit[0]:
        return limit[1]
    f = get(fmt)
    if f.commands is not None and command not in f.commands:
        return f.commands_reason
    return None


def get(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None


def of_kind(kind: str) -> Format:
    """The first format ``detect.sniff`` calls ``kind`` (a format name, or a family: 'singa')."""
    return next((f for f in FORMATS.values() if f.kind == kind), None) or get(kind)


def describe(fmt: Format, path, **options) -> dict:
    """inspect's description of one file of ``fmt`` (its ``describer``), given the options it names."""
    return _call(_load(fmt.describer), path, **options)


def ray_targets(how: str | None = None) -> tuple[str, ...]:
    """The formats ``convert --engine ray`` writes (``how``: only those it writes that way)."""
    return tuple(f.name for f in FORMATS.values() if f.ray and (how is None or f.ray == how))


def shard_formats() -> tuple[str, ...]:
    """The bridge's shard-directory formats (WebDataset, TFRecord, MDS, ...)."""
    return tuple(f.name for f in FORMATS.values() if f.shards)


def validators() -> dict[str, str]:
    """Format kind (``detect.sniff``'s name) -> module with ``validate(path, *, checked, **options)``."""
    return {f.kind: f.validator for f in FORMATS.values() if f.validator}


def writable() -> list[str]:
    """Format names a conversion can write (``--to`` choices)."""
    return [f.name for f in FORMATS.values() if f.writer]


def readable() -> list[str]:
    return [f.name for f in FORMATS.values() if f.reader]


def by_extension(path) -> Format | None:
    """The format an output path names by its extension (first registered wins: ``.bin`` is CBF)."""
    ext = os.path.splitext(os.fspath(path).rstrip("/"))[1].lower()
    if not ext:
        return None
    return next((f for f in FORMATS.values() if ext in f.extensions), None)


# -- the format table of README.md and docs/formats.md -----------------------------------------------------------------
TABLE_BEGIN = "<!-- format table: generated by `python -m recordkit.formats.registry` -->"
TABLE_FILES = ("README.md", "docs/formats.md")  # the pages holding the table (from the repository root)
TABLE_END = "<!-- end of format table -->"


def markdown_table() -> str:
    yes = lambda b: "yes" if b else "no"
    rows = ["| format | `--to` | path | extensions | reads | writes | sparse | keys | float64 | sequences | "
            "bytes | extra | notes |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in FORMATS.values():
        ext = ", ".join(f"`{e}`" for e in f.extensions) or "-"
        extra = f"`recordkit[{f.extra}]`" if f.extra else "-"
        rows.append(f"| {f.title} | `{f.name}` | {f.layout} | {ext} | {yes(f.reader)} | {yes(f.writer)} | "
                    f"{yes(f.sparse)} | {yes(f.keys)} | {yes(f.float64)} | {yes(f.sequences)} | {yes(f.bytes)} | {extra} | "
                    f"{f.notes or '-'} |")
    return "\n".join(rows)


MATRIX_BEGIN = "<!-- command matrix: generated by `python -m recordkit.formats.registry` -->"
MATRIX_FILES = ("README.md", "docs/formats.md")  # the pages holding the command x format matrix
MATRIX_END = "<!-- end of command matrix -->"


def markdown_matrix(commands) -> str:
    """Formats as rows, ``commands`` (the CLI's, in ``recordkit --help`` order) as columns: "yes", or
    a letter whose one-line reason follows the table."""
    reasons: dict[str, str] = {}
    rows = ["| format | " + " | ".join(f"`{c}`" for c in commands) + " |", "|---|" + "---|" * len(commands)]
    for f in FORMATS.values():
        cells = []
        for c in commands:
            why = unsupported(c, f.name)
            if why is None:
                cells.append("yes")
                continue
            mark = reasons.setdefault(why, chr(ord("a") + len(reasons)))
            cells.append(f"no ({mark})")
        rows.append(f"| `{f.name}` | " + " | ".join(cells) + " |")
    rows.append("")
    rows.extend(f"({mark}) {why}  " for why, mark in reasons.items())
    return "\n".join(rows).rstrip()


def _between(text: str, begin: str, end: str) -> str | None:
    a, b = text.find(begin), text.find(end)
    if a < 0 or b < a:
        return None
    return text[a + len(begin):b].strip("\n")


def readme_matrix(text: str) -> str | None:
    """The command matrix between its markers in a page's text (None if the markers are missing)."""
    return _between(text, MATRIX_BEGIN, MATRIX_END)


def readme_table(text: str) -> str | None:
    """The table between the markers in a README text (None if the markers are missing)."""
    a, b = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if a < 0 or b < a:
        return None
    return text[a + len(TABLE_BEGIN):b].strip("\n")


def _replace(path: str, text: str, begin: str, end: str, content: str) -> str:
    a, b = text.find(begin), text.find(end)
    if a < 0 or b < a:
        raise SystemExit(f"{path}: no generated-table markers ({begin!r} ... {end!r})")
    return text[:a + len(begin)] + "\n" + content + "\n" + text[b:]


def update_readme(path: str, commands=None) -> bool:
    """Rewrite the generated tables between their markers in ``path``: the format table, and with
    ``commands`` (the CLI's command names) the command matrix where the page has its markers; True
    if it changed."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    new = _replace(path, text, TABLE_BEGIN, TABLE_END, markdown_table())
    if commands is not None and MATRIX_BEGIN in new:
        new = _replace(path, new, MATRIX_BEGIN, MATRIX_END, markdown_matrix(commands))
    if new != text:
        from recordkit.storage.atomic import AtomicFile
        with AtomicFile(path) as out:
            out.write(new.encode("utf-8"))
    return new != text


if __name__ == "__main__":  # python -m recordkit.formats.registry [FILE ...]
    import sys
    # the script, not the module, reads the CLI's command list (the codecs know nothing of the CLI)
    commands = list(importlib.import_module("recordkit.cli.main").COMMANDS)
    for p in sys.argv[1:] or sorted(set(TABLE_FILES) | set(MATRIX_FILES)):
        print(f"{p}: {'updated' if update_readme(p, commands) else 'up to date'}")
