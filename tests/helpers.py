"""Small helpers shared by the unit tests."""
from __future__ import annotations

import warnings

from recordkit import StreamSpec
from recordkit.formats.ctf import CTFReader


def write(tmp_path, text, name="data.ctf"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def read_all(path, streams, **kw):
    """All sequences as (key, {name: dense ndarray | csr}) plus the reader, warnings captured."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = CTFReader(path, streams, **kw)
        seqs = [(s.key, s.data) for s in reader]
    return seqs, reader, [str(w.message) for w in caught]


def dense(name, dim, alias=None, **kw):
    return StreamSpec(name, "dense", dim, alias, **kw)


def sparse(name, dim, alias=None, **kw):
    return StreamSpec(name, "sparse", dim, alias, **kw)
