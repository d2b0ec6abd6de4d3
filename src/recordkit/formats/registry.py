"""The format registry: every data format recordkit reads or writes, registered in one place.

A format is a sub-package under ``formats/`` (its codec) plus one ``Format`` entry here: its
name (``recordkit convert --to NAME``), the extensions that name it, how a path holding it is
recognised, a *lazy* reader factory (a Deserializer) and writer factory (``write_chunk`` /
``close`` / ``abort``), the optional extra it needs (``pip install 'recordkit[EXTRA]'``), and
what its data model can hold (sparse data, sequence keys, float64, sequence boundaries).
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
    describes_streams: bool = True               # the data carries its stream declarations (no --stream needed)
    family: str | None = None                    # what detect.sniff() calls it (kvfile/binfile: "singa")
    file_probe: str | None = None                # "module:callable"(path, head, source, storage_options) -> bool
    directory_probe: str | None = None           # "module:callable"(names) -> bool
    output_directory: bool = False               # the writer makes a directory (of parts)
    shards: bool = False                         # a bridge shard directory (formats/sharding.py description)
    validator: str | None = None                 # module with validate(path, *, checked, **options)
    joiner: str | None = None                    # "module:callable"(sources, output, *, storage_options, checksums):
                                                 # sets of this format joined into one (--engine ray's tasks)
    images: str | None = None                    # "module:callable"(path, field, *, storage_options, cache_dir):
                                                 # (encoded image, (file, record)) pairs for recordkit.images
    notes: str = ""

    @property
    def kind(self) -> str:
        """The name the sniffing helpers return (a store family for SINGA's record stores)."""
        return self.family or self.name

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


_O = "recordkit.formats.openers"

# -- the registrations (detection tries files' probes and directories' probes in this order; the
#    shard formats come before OFRecord and SINGA, whose probes parse a first frame) -----
_RV = "recordkit.formats.reader_validate"  # validation by loading every chunk through the reader
register(Format("cbf", "CNTK binary format (CBF)", "file, or a directory of part-NNNNN.cbf", (".cbf", ".bin"),
                reader=f"{_O}:open_cbf", writer=f"{_O}:create_cbf", keys=False,
                validator="recordkit.formats.cbf.validate",
                file_probe=f"{_O}:probe_cbf", directory_probe=f"{_O}:probe_cbf_parts",
                notes="keys are ordinals"))
register(Format("parquet", "Apache Parquet", "file, or a directory of part-NNNNN.parquet", (".parquet",),
                reader="recordkit.formats.parquet:ParquetDeserializer", writer="recordkit.formats.parquet:ParquetWriter",
                extra="parquet", requires=("pyarrow",), file_probe=f"{_O}:probe_parquet", validator=_RV,
                directory_probe=f"{_O}:probe_parquet_parts", images="recordkit.formats.parquet.images:encoded_images",
                notes="dense `list<fixed_size_list<float>[DIM]>`, sparse `list<struct<indices, values>>`"))
register(Format("hf", "Hugging Face datasets (`save_to_disk`)", "directory", (),
                reader="recordkit.formats.hf:HFDeserializer", writer="recordkit.formats.hf:HFWriter",
                joiner="recordkit.formats.hf.writer:join_sets", extra="hf", requires=("pyarrow",), directory_probe=f"{_O}:probe_hf", output_directory=True,
                validator=_RV, images="recordkit.formats.hf.images:encoded_images",
                notes="`datasets.load_from_disk(OUT)`; the Parquet columns"))
register(Format("lance", "Lance data set", "directory", (".lance",),
                reader="recordkit.formats.lance.reader:LanceDeserializer",
                writer="recordkit.formats.lance.writer:LanceWriter", extra="lance", requires=("lance", "pyarrow"),
                directory_probe="recordkit.formats.lance.probe:probe", output_directory=True, validator=_RV,
                notes="the Parquet columns, a fragment per chunk; other writers' columns read without --stream"))
register(Format("webdataset", "WebDataset tar shards", "directory of shard-NNNNNN.tar (or one .tar)", (".tar",),
                reader="recordkit.formats.webdataset:WebDatasetReader",
                writer="recordkit.formats.webdataset:WebDatasetWriter", extra="webdataset",
                joiner="recordkit.formats.webdataset.writer:join_sets", shards=True, validator=_RV,
                file_probe=f"{_O}:probe_webdataset", directory_probe=f"{_O}:probe_webdataset_shards",
                output_directory=True, images="recordkit.formats.webdataset.images:encoded_images",
                notes="members `KEY.NAME.npy`; sparse as indices/values/offsets members"))
register(Format("tfrecord", "TFRecord (`tf.train.SequenceExample`)", "directory of part-NNNNN.tfrecord (or one file)",
                (".tfrecord", ".tfrecords"), reader="recordkit.formats.tfrecord:TFRecordReader",
                writer="recordkit.formats.tfrecord:TFRecordWriter", shards=True, validator=_RV,
                joiner="recordkit.formats.tfrecord.writer:join_sets",
                extra="tfrecord", requires=("crc32c",), float64=False, file_probe=f"{_O}:probe_tfrecord",
                directory_probe=f"{_O}:probe_tfrecord_parts", output_directory=True,
                images="recordkit.formats.tfrecord.images:encoded_images",
                notes="feature lists NAME (sparse: NAME.indices/NAME.values); float64 narrowed to float32"))
register(Format("mds", "MosaicML Streaming (MDS)", "directory: index.json + shards", (),
                reader="recordkit.formats.mds:MDSReader", writer="recordkit.formats.mds:MDSWriter",
                joiner="recordkit.formats.mds.writer:join_sets",
                directory_probe="recordkit.formats.mds.probe:probe", output_directory=True, shards=True, validator=_RV,
                images="recordkit.formats.mds.images:encoded_images", notes="columns `ndarray:float32` NAME (sparse: NAME.indices/values/offsets)"))
register(Format("ofrecord", "OneFlow OFRecord", "directory of part-N files (or one file)", (),
                reader=f"{_O}:open_ofrecord", writer=f"{_O}:create_ofrecord", requires=("google.protobuf",),
                validator="recordkit.formats.ofrecord.validate",
                file_probe=f"{_O}:probe_ofrecord", directory_probe=f"{_O}:probe_ofrecord_parts",
                output_directory=True, describes_streams=False, notes="needs --stream to read as streams",
                images="recordkit.formats.ofrecord.images:encoded_images"))
register(Format("kvfile", "SINGA KVFile record store", "file", (), reader=f"{_O}:open_singa",
                writer=f"{_O}:create_kvfile", family="singa", sparse=False, float64=False, sequences=False,
                validator="recordkit.formats.singa.validate",
                file_probe=f"{_O}:probe_kvfile", directory_probe=f"{_O}:probe_singa_shard",
                notes="records: `features` + `label`"))
register(Format("binfile", "SINGA BinFile record store", "file", (), reader=f"{_O}:open_singa",
                writer=f"{_O}:create_binfile", family="singa", sparse=False, float64=False, sequences=False,
                validator="recordkit.formats.singa.validate",
                file_probe=f"{_O}:probe_binfile", notes="records: `features` + `label`"))
register(Format("csv", "SINGA CSV store", "file", (), reader=f"{_O}:open_csv", sparse=False,
                keys=False, sequences=False, describes_streams=False, notes="read with --from csv --csv-dim N"))
# CTF last: a file no probe claims is read as CTF text.
register(Format("ctf", "CNTK text format (CTF)", "file", (".ctf", ".txt", ".text"), reader=f"{_O}:open_ctf",
                writer=f"{_O}:create_ctf", validator="recordkit.formats.ctf.validate", describes_streams=False,
                notes="needs --stream to read"))


def get(name: str) -> Format:
    try:
        return FORMATS[name]
    except KeyError:
        raise UsageError(f"unknown format {name!r} (known: {', '.join(FORMATS)})") from None


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
            "extra | notes |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for f in FORMATS.values():
        ext = ", ".join(f"`{e}`" for e in f.extensions) or "-"
        extra = f"`recordkit[{f.extra}]`" if f.extra else "-"
        rows.append(f"| {f.title} | `{f.name}` | {f.layout} | {ext} | {yes(f.reader)} | {yes(f.writer)} | "
                    f"{yes(f.sparse)} | {yes(f.keys)} | {yes(f.float64)} | {yes(f.sequences)} | {extra} | "
                    f"{f.notes or '-'} |")
    return "\n".join(rows)


def readme_table(text: str) -> str | None:
    """The table between the markers in a README text (None if the markers are missing)."""
    a, b = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if a < 0 or b < a:
        return None
    return text[a + len(TABLE_BEGIN):b].strip("\n")


def update_readme(path: str) -> bool:
    """Rewrite the table between the markers of ``path``; True if it changed."""
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    a, b = text.find(TABLE_BEGIN), text.find(TABLE_END)
    if a < 0 or b < a:
        raise SystemExit(f"{path}: no format table markers ({TABLE_BEGIN!r} ... {TABLE_END!r})")
    new = text[:a + len(TABLE_BEGIN)] + "\n" + markdown_table() + "\n" + text[b:]
    if new != text:
        from recordkit.storage.atomic import AtomicFile
        with AtomicFile(path) as out:
            out.write(new.encode("utf-8"))
    return new != text


if __name__ == "__main__":  # python -m recordkit.formats.registry [FILE ...]
    import sys
    for p in sys.argv[1:] or TABLE_FILES:
        print(f"{p}: {'updated' if update_readme(p) else 'up to date'}")
