"""``validate`` for the formats whose reader already checks everything it decodes (Parquet, Hugging
Face datasets, WebDataset, TFRecord, MDS): every chunk is loaded through the format's Deserializer,
and each one that fails is a located problem (the reader's ``FormatError``: file, byte offset,
shard/record); validation goes on with the next chunk. Each chunk loaded is also checked whole
(``csr.chunk_problem``): what ``cat`` or a minibatch could not slice is never passed. Files with a
``.rkcrc`` sidecar are checked block by block first, and digests a format's index records (MDS's
``hashes``) are compared. One function serves all of them: the format comes from the registry."""
from __future__ import annotations

from collections import Counter
from typing import Iterator

from recordkit.errors import FormatError
from recordkit.formats.csr import chunk_problem
from recordkit.formats.validate import Problem, checksum_problems, is_checksum_error


def validate(path, *, checked: Counter, storage_options=None, cache_dir=None, **_) -> Iterator[Problem]:
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    path = str(path)
    fmt = registry.get(sniff_format(path, storage_options))
    try:
        reader = fmt.open_reader(path, None, storage_options=storage_options, cache_dir=cache_dir)
    except FormatError as e:
        yield Problem.from_error(e, f"{fmt.name}-unreadable")
        return
    with reader:
        files = list(getattr(reader, "paths", None) or [path])
        checked["files"] += len(files)
        for f in files:
            yield from checksum_problems(f, storage_options=storage_options)
        digests = getattr(reader, "digest_problems", None)  # digests the format's own index records (MDS)
        if digests is not None:
            yield from digests()
        for info in reader.chunks:
            checked["chunks"] += 1
            try:
                chunk = reader.load_chunk(info.id)
            except FormatError as e:
                if not is_checksum_error(e):
                    yield Problem.from_error(e, f"{fmt.name}-malformed", record=e.record or f"chunk {info.id}")
                continue
            problem = chunk_problem(chunk)
            if problem is not None:  # a reader's oversight: what reading would fail on is reported, never passed
                yield Problem(path, f"{fmt.name}-inconsistent", f"the chunk read is inconsistent: {problem}",
                              record=f"chunk {info.id}")
                continue
            checked["sequences"] += len(chunk)
