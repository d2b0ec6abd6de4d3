"""Hugging Face ``save_to_disk`` directories recordkit wrote, joined into one (``--engine ray``'s write
tasks each write one): ``formats/sharding.ShardSetJoin`` with the directory's ``state.json`` and
``dataset_info.json``."""
from __future__ import annotations

import json
import uuid

from recordkit.formats.hf.description import data_files, recorded_streams
from recordkit.formats.hf.writer import INFO_KEY, _is_data_file, data_file_name
from recordkit.formats.sharding import ShardSetJoin, read_whole
from recordkit.storage import location


class HFJoin(ShardSetJoin):
    """``save_to_disk`` directories joined: the data files renamed ``data-i-of-n`` in order,
    ``state.json`` listing them, ``dataset_info.json`` counting every sequence."""
    WHAT = "Hugging Face dataset"
    DESCRIPTION = "state.json"
    AGREE = "features"

    owns = staticmethod(_is_data_file)

    def shard_name(self, i: int, n: int) -> str:
        return data_file_name(i, n)

    def read(self, src: str):
        texts = {name: read_whole(location.join(src, name), self.storage_options)
                 for name in ("state.json", "dataset_info.json")}
        # checked as the reader checks them; merged as written
        data_files(src, location.join(src, "state.json"), texts["state.json"], self.storage_options)
        recorded_streams(location.join(src, "dataset_info.json"), texts["dataset_info.json"])
        return {name: json.loads(text) for name, text in texts.items()}

    def agreed(self, doc):
        return doc["dataset_info.json"].get("features")

    def shards(self, doc) -> list[tuple[str, dict]]:
        return [(f["filename"], f) for f in doc["state.json"]["_data_files"]]

    def write(self, staged, docs: list, shards: list[tuple[str, dict]]) -> None:
        names = [name for name, _ in shards]
        sequences = sum(int((d["dataset_info.json"].get(INFO_KEY) or {}).get("sequences", 0)) for d in docs)
        info = docs[0]["dataset_info.json"]
        state = dict(docs[0]["state.json"], _data_files=[{"filename": n} for n in names],
                     _fingerprint=uuid.uuid4().hex[:16])
        info = dict(info, **{INFO_KEY: dict(info.get(INFO_KEY) or {}, sequences=sequences)})
        staged.write_file("state.json", json.dumps(state, indent=2).encode("utf-8"))
        staged.write_file("dataset_info.json", json.dumps(info, indent=2).encode("utf-8"))


def join_sets(sources: list[str], output: str, *, storage_options=None, checksums: bool = False) -> list[str]:
    """``save_to_disk`` directories written by this writer (same columns), joined in order into one
    at ``output`` (``HFJoin``; published at once: ``--engine ray``'s write tasks each write one).
    Returns the data file names."""
    return HFJoin(storage_options).join(sources, output, checksums=checksums)
