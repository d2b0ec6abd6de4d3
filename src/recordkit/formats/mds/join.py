"""MDS data sets recordkit wrote, joined into one (``--engine ray``'s write tasks each write one):
``formats/sharding.ShardSetJoin`` with MDS's description, ``index.json``."""
from __future__ import annotations

import json

from recordkit.errors import FormatError
from recordkit.formats.mds.index import read_index
from recordkit.formats.mds.writer import INDEX, owns, shard_name
from recordkit.formats.sharding import ShardSetJoin, read_whole
from recordkit.storage import location


class MDSJoin(ShardSetJoin):
    """MDS sets joined: their ``index.json`` shard entries (hashes, sizes) renamed and listed in
    order, recordkit's per-shard counts likewise."""
    WHAT = "MDS directory"
    DESCRIPTION = INDEX

    owns = staticmethod(owns)

    def shard_name(self, i: int, n: int) -> str:
        return shard_name(i)

    def read(self, src: str):
        index = read_index(src, self.storage_options)  # checked as the reader checks it; merged as written
        if index.streams is None:
            raise FormatError(index.path, "no recordkit object: not an MDS data set recordkit wrote")
        return json.loads(read_whole(location.join(src, INDEX), self.storage_options))

    def agreed(self, doc):
        return doc["recordkit"].get("streams")

    def shards(self, doc) -> list[tuple[str, dict]]:
        return [(info["raw_data"]["basename"], {"info": info, "count": count})
                for info, count in zip(doc["shards"], doc["recordkit"]["shards"])]

    def write(self, staged, docs: list, shards: list[tuple[str, dict]]) -> None:
        first = docs[0]
        counts = [dict(e["count"], name=name) for name, e in shards]
        index = dict(first, shards=[dict(e["info"], raw_data=dict(e["info"]["raw_data"], basename=name))
                                    for name, e in shards])
        index["recordkit"] = dict(first["recordkit"], shards=counts, sequences=int(sum(c["sequences"] for c in counts)))
        staged.write_file(INDEX, json.dumps(index, sort_keys=True).encode())


def join_sets(sources: list[str], output: str, *, storage_options=None, checksums: bool = False) -> list[str]:
    """MDS data sets written by this writer (same columns), joined in order into one at ``output``
    (``MDSJoin``: shards renumbered, ``index.json`` entries and recordkit's counts merged, the whole
    published at once; ``--engine ray``'s write tasks each write one). Returns the shard names."""
    return MDSJoin(storage_options).join(sources, output, checksums=checksums)
