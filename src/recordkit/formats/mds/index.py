"""``index.json`` of an MDS directory, read as untrusted input (``formats/descriptions.py``).

Every field the reader uses is checked for its JSON type and range before use: the shards must
be exactly the directory's ``*.mds`` files, each once, of the size ``raw_data.bytes`` says; a
shard's ``samples`` must fit in its bytes (the sample table takes 4 bytes a sample, each sample
its fixed-size columns and a 4-byte size per variable-size column); the columns' three lists
must agree. The ``recordkit`` object (stream declarations, per-shard counts) must describe the
same shards. MosaicML's own fields that recordkit does not read (``size_limit``,
``zip_data``) are left alone.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from recordkit.errors import FormatError
from recordkit.formats.descriptions import Fields, listed_files, shown
from recordkit.formats.mds.writer import FORMAT, INDEX
from recordkit.formats.sharding import read_whole
from recordkit.storage import location

INDEX_VERSION = 2
RECORDKIT_VERSION = 1
MAX_SHARD_BYTES = (1 << 32) - 1  # sample offsets are uint32


@dataclass
class IndexShard:
    name: str                                     # raw_data.basename
    path: str
    samples: int                                  # MDS samples: recordkit's sequences
    columns: list[tuple[str, str, int | None]]    # (name, encoding, fixed size or None)
    nbytes: int                                   # raw_data.bytes, as the index says
    frames: int                                   # recordkit's sample count, else ``samples``
    hashes: dict = field(default_factory=dict)    # raw_data.hashes: {algorithm: hex digest} (Streaming's)


@dataclass
class MDSIndex:
    path: str
    streams: list | None                          # the recorded declarations (None: not written by recordkit)
    shards: list[IndexShard]


def read_index(directory: str, storage_options=None, cache_dir=None, *, files=None) -> MDSIndex:
    """The checked ``index.json`` of ``directory``. ``files``: the reader's ``storage.pool.SourcePool``
    (the index read through it, the shards checked against its one listing: no request per file)."""
    path = location.join(directory, INDEX)
    fields = Fields(path)
    data = read_whole(path, storage_options, cache_dir) if files is None else files.read_whole(path)
    doc = fields.document(data)
    fields.equal(doc.get("version"), "version", INDEX_VERSION)
    entries = fields.list(doc.get("shards"), "shards")
    shards = [_shard(fields, info, f"shards[{i}]") for i, info in enumerate(entries)]
    sizes = listed_files(fields, directory, [(f"shards[{i}].raw_data.basename", name)
                                             for i, (name, *_) in enumerate(shards)],
                         lambda n: n.endswith(".mds"), storage_options=storage_options,
                         files=None if files is None else files.sizes())
    out = []
    for i, ((name, n, cols, nbytes, hashes), size) in enumerate(zip(shards, sizes)):
        if nbytes != size:  # a shard cut short or replaced: said where the bytes are
            raise FormatError(location.join(directory, name), f"shard has {size} bytes, index.json says {nbytes} "
                                                              f"(shards[{i}].raw_data.bytes; truncated or replaced?)",
                              offset=min(size, nbytes))
        nvar = sum(1 for _, _, s in cols if s is None)
        fixed = sum(s for _, _, s in cols if s is not None)
        # the sample count and the last offset, then per sample: its offset, its sizes, its fixed columns
        fields.count(n, f"shards[{i}].samples", unit="samples", size=size, each=4 + 4 * nvar + fixed, name=name,
                     base=8)
        out.append(IndexShard(name, location.join(directory, name), n, cols, nbytes, n, hashes))
    streams = _recordkit(fields, doc.get("recordkit"), out, sizes) if "recordkit" in doc else None
    return MDSIndex(path, streams, out)


def _shard(fields: Fields, info, at: str):
    """(basename, samples, columns, bytes, hashes) of one ``shards`` entry."""
    fields.object(info, at)
    fields.equal(info.get("format"), f"{at}.format", FORMAT)
    if info.get("compression") is not None:
        raise fields.fail(f"{at}.compression", f"{shown(info['compression'])}: only uncompressed MDS is read")
    raw = fields.object(info.get("raw_data"), f"{at}.raw_data")
    name = fields.name(raw.get("basename"), f"{at}.raw_data.basename")
    nbytes = fields.int(raw.get("bytes"), f"{at}.raw_data.bytes", 0, MAX_SHARD_BYTES)
    hashes = fields.object(raw.get("hashes", {}), f"{at}.raw_data.hashes")
    for algo, digest in hashes.items():
        fields.text(digest, f"{at}.raw_data.hashes.{algo}")
    n = fields.int(info.get("samples"), f"{at}.samples")
    names = fields.list(info.get("column_names"), f"{at}.column_names")
    encodings = fields.list(info.get("column_encodings"), f"{at}.column_encodings")
    sizes = fields.list(info.get("column_sizes"), f"{at}.column_sizes")
    if not len(names) == len(encodings) == len(sizes):
        raise fields.fail(at, f"column_names, column_encodings and column_sizes differ in length "
                              f"({len(names)}, {len(encodings)}, {len(sizes)})")
    cols, seen = [], set()
    for j, (c, enc, size) in enumerate(zip(names, encodings, sizes)):
        fields.text(c, f"{at}.column_names[{j}]")
        if c in seen:
            raise fields.fail(f"{at}.column_names[{j}]", f"column {shown(c)} is named twice")
        seen.add(c)
        fields.text(enc, f"{at}.column_encodings[{j}]")
        if size is not None:
            fields.int(size, f"{at}.column_sizes[{j}]", 0, MAX_SHARD_BYTES)
        cols.append((c, enc, size))
    return name, n, cols, nbytes, dict(hashes)


def _recordkit(fields: Fields, rk, shards: list[IndexShard], sizes: list[int]):
    """The ``recordkit`` object: the recorded streams; each shard's frame (sample) count is set."""
    fields.object(rk, "recordkit")
    fields.equal(rk.get("format"), "recordkit.format", FORMAT)
    fields.equal(rk.get("version"), "recordkit.version", RECORDKIT_VERSION)
    streams = fields.streams(rk.get("streams"), "recordkit.streams")
    counts = fields.list(rk.get("shards"), "recordkit.shards")
    if len(counts) != len(shards):
        raise fields.fail("recordkit.shards", f"{len(counts)} entries, but 'shards' lists {len(shards)} shards")
    for i, (c, shard, size) in enumerate(zip(counts, shards, sizes)):
        at = f"recordkit.shards[{i}]"
        fields.object(c, at)
        if "name" in c:
            fields.equal(c["name"], f"{at}.name", shard.name)
        fields.equal(fields.int(c.get("sequences"), f"{at}.sequences"), f"{at}.sequences", shard.samples)
        shard.frames = fields.count(c.get("samples"), f"{at}.samples", unit="samples", size=size, each=1,
                                    name=shard.name)
    fields.int(rk.get("sequences"), "recordkit.sequences")  # the total: bookkeeping, not read
    return streams
