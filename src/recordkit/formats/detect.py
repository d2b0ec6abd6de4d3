"""Which format a path holds: by content first (magic numbers, directory layouts), then by extension.

The probes are the format registry's (``formats/registry.py``), tried in registration order.
"""
from __future__ import annotations


def sniff_offline(path: str, cache_dir) -> str | None:
    """Offline, a URL's format is told from its name (sniffing would ask the store), or, for a
    directory, from the names of its files the cache recorded (those read online); None online."""
    from recordkit.errors import UsageError
    from recordkit.formats import registry
    from recordkit.storage.location import is_url
    from recordkit.storage.range_cache import recorded_files, settings
    if not settings(cache_dir)[1] or not is_url(path):
        return None
    fmt = registry.by_extension(path)
    if fmt is None:
        names = recorded_files(cache_dir, path)
        if names:
            return _sniff_directory(path, names, None)
    if fmt is None:
        raise UsageError(f"{path}: offline, the format is told from the name alone (or a directory's files the "
                         f"cache recorded: none here) and this one does not say it: name the format (format= / --from)")
    return fmt.name


def sniff_format(path, storage_options=None, *, part_name_prefix: str | None = None,
                 cache_dir=None) -> str:
    """The registry name of the format an existing path (local or fsspec URL) holds.

    A directory: the format whose directory probe accepts its entry names (a SINGA 0.1 shard, a
    Hugging Face ``save_to_disk`` directory, an MDS ``index.json``, a ``__recordkit__.json``
    beside its shards, numbered part files, OFRecord ``part-N`` files: ``formats/directories.py``);
    with ``part_name_prefix`` (OneFlow's, ``--part-name-prefix``) a directory of
    ``PREFIX<digits>`` files is OFRecord. Any other directory, and one that two formats claim,
    is a ``NotADataSetError`` saying what it holds: a directory is one data set only when it says
    so. A file: the first format whose probe accepts its first bytes (CBF's magic number,
    Parquet's ``PAR1``, a first frame that parses as an OFRecord, SINGA's KVFile/BinFile
    framing), else its extension, else CTF.

    The extension matters for damaged files: a ``.cbf`` whose magic number is gone should be
    reported as a broken CBF file, not parsed as text. Reading offline (``cache_dir``), the name alone
    says (``sniff_offline``).
    """
    offline = sniff_offline(path, cache_dir)
    if offline is not None:
        return offline
    from recordkit.storage.probe import reusing
    with reusing(path, storage_options, cache_dir):  # a URL: one round trip for all of what follows
        return _sniff_path(path, storage_options, part_name_prefix, cache_dir)


def _sniff_path(path, storage_options, part_name_prefix, cache_dir) -> str:
    from recordkit.formats import registry
    from recordkit.storage import location
    from recordkit.storage.probe import OPENING_BLOCK
    from recordkit.storage.source import open_source
    location.ensure_regular(path, storage_options)  # a FIFO or device: "not a regular file", not "no such file"
    if location.isdir(path, storage_options):
        return _sniff_directory(path, location.listdir(path, storage_options), part_name_prefix)
    if not location.isfile(path, storage_options):
        raise FileNotFoundError(f"{path}: no such file")
    src = open_source(path, storage_options=storage_options, cache_dir=cache_dir, verify=False)
    try:
        # remotely, the first block a reader reads anyway (the look fetched it, or the cache holds it)
        head = src.pread(0, min(src.size, OPENING_BLOCK))[:8] if src.remote else src.pread(0, 8, cache=False)
        for fmt in registry.FORMATS.values():
            if fmt.file_probe and registry._load(fmt.file_probe)(path, head, src, storage_options):
                return fmt.name
    finally:
        src.close()
    fmt = registry.by_extension(path)
    if fmt is not None and fmt.file_probe is not None:
        return fmt.name
    what = _not_a_record_file(head)
    if what is not None:  # binary content that is no data set: never read as CTF text
        from recordkit.errors import UsageError
        raise UsageError(f"{path}: {what}")
    return "ctf"


# magic numbers of files that are given by mistake, and what to do instead (the fallback, CTF text, can
# start with none of them: they are not text)
_SIGNATURES = (
    (b"\x1f\x8b", "gzip-compressed, not a data set: decompress it first (gunzip) and give the file inside"),
    (b"BZh", "bzip2-compressed, not a data set: decompress it first (bunzip2)"),
    (b"\xfd7zXZ\x00", "xz-compressed, not a data set: decompress it first (unxz)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed, not a data set: decompress it first (unzstd)"),
    (b"PK\x03\x04", "a zip archive, not a data set: extract it first"),
    (b"\xff\xd8\xff", "a JPEG image, not a data set: images are read as records of one (an OFRecord bytes feature, "
                      "a SINGA BinFile, WebDataset members), e.g. `convert OFRECORD OUT --image-feature NAME`"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image, not a data set: images are read as records of one (an OFRecord bytes "
                            "feature, a SINGA BinFile, WebDataset members), e.g. `convert OFRECORD OUT --image-feature NAME`"),
)


#: the encoded images recordkit copies as they are, by magic number: (magic, file extension)
IMAGE_MAGIC = ((b"\xff\xd8\xff", "jpg"), (b"\x89PNG\r\n\x1a\n", "png"))


def image_extension(data: bytes) -> str | None:
    """``"jpg"`` or ``"png"`` by the bytes' magic number; None for anything else."""
    return next((ext for magic, ext in IMAGE_MAGIC if data[:len(magic)] == magic), None)


def _not_a_record_file(head: bytes) -> str | None:
    return next((what for magic, what in _SIGNATURES if head.startswith(magic)), None)


def streams_needed(path, fmt, storage_options=None) -> str:
    """The message for a data set of ``fmt`` (a Format that does not declare its streams) opened
    without ``--stream``: what to declare, or, for a file that looks like CSV rather than CTF
    text, how to read it as CSV."""
    text = f"{path}: declare at least one --stream NAME=FORMAT:DIM[:ALIAS] ({fmt.title} data has no streams declared in it)"
    try:
        from recordkit.storage.source import open_source
        src = open_source(str(path), storage_options=storage_options, verify=False)
        try:
            first = src.pread(0, min(src.size, 4096), cache=False).split(b"\n", 1)[0]
        finally:
            src.close()
    except (OSError, ValueError):
        return text
    if b"|" not in first and (b"," in first or b";" in first):
        return (f"{path}: looks like CSV (its first line has no '|' stream marker of CTF text): read it with "
                f"--from csv --csv-dim N (a SINGA CSV store: label, then N values), or declare the CTF streams with "
                f"--stream NAME=FORMAT:DIM[:ALIAS]")
    return text


def _sniff_directory(path, names, part_name_prefix) -> str:
    from recordkit.errors import NotADataSetError
    from recordkit.formats import registry
    from recordkit.formats.directories import holdings, not_a_data_set, visible
    names = set(names)
    found = [fmt.name for fmt in registry.FORMATS.values()
             if fmt.directory_probe and registry._load(fmt.directory_probe)(names)]
    if not found and part_name_prefix:
        import re
        if any(re.fullmatch(re.escape(part_name_prefix) + r"\d+", n) for n in names):
            found = ["ofrecord"]
    if len(found) > 1:
        raise NotADataSetError(f"{path}: holds data of several formats ({', '.join(found)}; {holdings(names)}): "
                               f"not one data set; name one file, or give each data set a directory of its own")
    if not found:
        # the format the hint names parts of: the directory's own extension's (`out.cbf/`), else its files'
        formats = [registry.by_extension(n) for n in [path, *sorted(visible(names))]]
        named = next((f for f in formats if f is not None and f.directory_probe), None)
        raise not_a_data_set(path, names, named.extensions if named is not None else ())
    return found[0]


def sniff(path, storage_options=None, *, part_name_prefix: str | None = None, cache_dir=None) -> str:
    """'cbf', 'ofrecord', 'singa', 'ctf', 'parquet', 'hf', ...: ``sniff_format`` with SINGA's
    record stores (KVFile, BinFile, a 0.1 shard directory) reported as their family 'singa'."""
    from recordkit.formats import registry
    return registry.get(sniff_format(path, storage_options, part_name_prefix=part_name_prefix,
                                     cache_dir=cache_dir)).kind


def __getattr__(name):
    if name == "BRIDGE_FORMATS":  # the bridge's shard formats: the registry entries with shards=True
        from recordkit.formats import registry
        return registry.shard_formats()
    raise AttributeError(f"module 'recordkit.formats.detect' has no attribute {name!r}")


def by_extension(path, default: str | None = None) -> str | None:
    """The format an output path names by its extension (which does not exist yet)."""
    from recordkit.formats import registry
    fmt = registry.by_extension(path)
    return fmt.name if fmt is not None else default
