"""CompositeDeserializer: several deserializers read as one, sequence by sequence.

CNTK's composite reader (a reader config's ``deserializers = (...)``): the first deserializer
is primary and defines the chunks; the others contribute their streams for the same
sequences, found by key (the sequence ids of CTF files in id mode) or by position.
Unlike CNTK, which silently drops primary sequences missing elsewhere, a mismatch is
an error that names the files and the first keys or counts that differ.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from recordkit.engine.chunk import ChunkData, concat_chunks
from recordkit.engine.deserializer import ChunkInfo, Deserializer, WrapsDeserializers
from recordkit.errors import FormatError


def _path(d) -> str:
    from recordkit.engine.deserializer import name_of
    return name_of(d)


def keyed(d) -> bool:
    """True when the deserializer's keys are ids from the file (not ordinals): a CTF file in id
    mode, or a deserializer that says so (``keys_are_ids``, e.g. OFRecord records with a key)."""
    from recordkit.engine.deserializer import has_keys, keys_are_ids
    return has_keys(d) and keys_are_ids(d)


class CompositeDeserializer(WrapsDeserializers):
    """Join ``deserializers`` (streams concatenated in order).

    join: "key", "position", or "auto" (key when every deserializer has file ids).
    ``close()`` (or ``with``) closes every one of them.
    """

    def __init__(self, deserializers: Iterable[Deserializer], *, join: str = "auto") -> None:
        self.parts = list(deserializers)
        if not self.parts:
            raise ValueError("a composite needs at least one deserializer")
        if join == "auto":
            join = "key" if len(self.parts) > 1 and all(keyed(d) for d in self.parts) else "position"
        if join not in ("key", "position"):
            raise ValueError(f"join must be 'key', 'position' or 'auto', not {join!r}")
        self.join = join
        names = [s.name for d in self.parts for s in d.streams]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"stream names {sorted(dup)} appear in more than one deserializer")
        self._streams = [s for d in self.parts for s in d.streams]
        self._mb_part = next((i for i, d in enumerate(self.parts) if any(s.defines_mb_size for s in d.streams)), None)
        self.primary = self.parts[0]
        self._locate = [self._build_locator(d) for d in self.parts[1:]]

    def wrapped(self) -> list:
        return list(self.parts)

    @property
    def streams(self):
        return list(self._streams)

    @property
    def chunks(self) -> list[ChunkInfo]:
        return self.primary.chunks

    def sequence_lengths(self, chunk_id: int) -> np.ndarray:
        from recordkit.engine.deserializer import sequence_lengths
        known = sequence_lengths(self.primary, chunk_id)
        if known is not None:
            return known
        info = self.primary.chunks[chunk_id]
        return np.full(info.num_sequences, max(1, info.num_samples // max(info.num_sequences, 1)), np.int64)

    def estimated_chunk_bytes(self) -> np.ndarray:
        """Decoded bytes of each (primary) chunk: the primary's plus, from every other part, its
        share of that part's total in proportion to the chunk's sequences."""
        from recordkit.engine.memory import chunk_bytes
        own = chunk_bytes(self.primary).astype(np.float64)
        seqs = np.array([c.num_sequences for c in self.primary.chunks], dtype=np.float64)
        share = seqs / max(seqs.sum(), 1.0)
        for d in self.parts[1:]:
            own += share * float(chunk_bytes(d).sum())
        return own.astype(np.int64)

    # -- where each secondary keeps its sequences ------------------------------------------------
    def _build_locator(self, d):
        chunks = d.chunks
        counts = np.array([c.num_sequences for c in chunks], dtype=np.int64)
        chunk_of = np.repeat(np.array([c.id for c in chunks], dtype=np.int64), counts)
        index_of = np.concatenate([np.arange(n, dtype=np.int64) for n in counts]) if len(counts) else np.zeros(0, np.int64)
        if self.join == "position":
            total = sum(c.num_sequences for c in self.primary.chunks)
            if int(counts.sum()) != total:
                raise FormatError(_path(d), f"has {int(counts.sum())} sequences, but {_path(self.primary)} has "
                                            f"{total}: deserializers joined by position must hold the same number")
            return ("position", chunk_of, index_of)
        keys = np.concatenate([np.asarray(d.sequence_keys(c.id), dtype=np.uint64) for c in chunks]) \
            if chunks else np.zeros(0, np.uint64)
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        dups = sorted_keys[1:][sorted_keys[1:] == sorted_keys[:-1]]
        if len(dups):
            raise FormatError(_path(d), f"sequence key {int(dups[0])} appears more than once: cannot join by key")
        return ("key", sorted_keys, chunk_of[order], index_of[order])

    def _find(self, k: int, data: ChunkData, chunk_id: int):
        """(chunk ids, indexes) in secondary k of the primary chunk's loaded sequences."""
        loc = self._locate[k]
        d = self.parts[k + 1]
        if loc[0] == "position":
            first = sum(c.num_sequences for c in self.primary.chunks[:chunk_id])
            pos = first + (np.arange(len(data)) if data.positions is None else data.positions)
            return loc[1][pos], loc[2][pos]
        _, sorted_keys, chunk_of, index_of = loc
        at = np.searchsorted(sorted_keys, data.keys)
        at = np.minimum(at, len(sorted_keys) - 1) if len(sorted_keys) else at
        ok = (len(sorted_keys) > 0) & (sorted_keys[at] == data.keys) if len(sorted_keys) else np.zeros(len(data), bool)
        if not np.all(ok):
            missing = data.keys[~ok][:5].tolist()
            raise FormatError(_path(d), f"has no sequence with key(s) {missing} that {_path(self.primary)} has "
                                        f"(chunk {chunk_id}): deserializers joined by key must hold the same keys")
        return chunk_of[at], index_of[at]

    def load_chunk(self, chunk_id: int) -> ChunkData:
        data = self.primary.load_chunk(chunk_id)
        columns = dict(data.columns)
        all_lengths = [data.lengths]
        for k, d in enumerate(self.parts[1:]):
            cids, idx = self._find(k, data, chunk_id)
            part = self._gather(d, cids, idx)
            columns.update(part.columns)
            all_lengths.append(part.lengths)
        if self._mb_part is not None:
            lengths = all_lengths[self._mb_part]
        else:
            lengths = np.max(np.vstack(all_lengths), axis=0) if len(data) else data.lengths
        return ChunkData(chunk_id, data.keys, lengths, columns, data.positions)

    @staticmethod
    def _gather(d, cids: np.ndarray, idx: np.ndarray) -> ChunkData:
        """Sequences (chunk, described index) of d, in this order, as one ChunkData."""
        if len(cids) == 0:
            c = d.load_chunk(d.chunks[0].id) if d.chunks else None
            assert c is not None, "a part without chunks has no sequences to gather"
            return c.take(np.zeros(0, np.int64))
        srt = np.argsort(cids, kind="stable")
        keys, starts = np.unique(cids[srt], return_index=True)
        bounds = list(starts) + [len(srt)]
        parts = []
        for k, cid in enumerate(keys):
            chunk = d.load_chunk(int(cid))
            lookup = chunk.position_lookup(d.chunks[int(cid)].num_sequences)
            j = lookup[idx[srt[bounds[k]:bounds[k + 1]]]]
            if np.any(j < 0):
                raise FormatError(_path(d), f"a sequence needed by the join was dropped for an error (chunk {int(cid)})")
            parts.append(chunk.take(j))
        combined = concat_chunks(parts)
        inverse = np.empty(len(srt), dtype=np.int64)
        inverse[srt] = np.arange(len(srt))
        return combined.take(inverse)
