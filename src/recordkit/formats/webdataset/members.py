"""WebDataset members by extension: the streams of shards other tools wrote (``webdataset.TarWriter``).

A sample of such a shard is ``KEY.npy``, ``KEY.cls``, ``KEY.jpg``, ``KEY.txt``, ``KEY.json``...
(the field after the key's first dot, its extension telling the encoding). Without a
description, the streams are inferred from the first ``INFER_SAMPLES`` samples:

* ``FIELD.npy`` / ``npy``: a numeric array of shape (d,) is one sample of a dense stream of dim d,
  shape (T, d) a sequence of T samples; d the same in every sample;
* ``FIELD.cls`` / ``cls``: an integer label as decimal text, a dense stream of dim 1;
* anything else (images ``.jpg``/``.png``/``.webp``..., ``.txt``, ``.json``, other bytes): a bytes
  stream, the member's bytes as they are in the shard (an image byte-identical, a text in the
  UTF-8 its writer encoded it in).

A member every sample does not have, or of a dim that changes, is refused, naming the member and
the ``--stream`` list that selects the others.

A stream is named after the field without its extension (``npy`` and ``cls`` alone keep their
name); its alias is the member field, so ``--stream label=dense:1:cls`` selects the ``.cls``
members of any shard and names the stream ``label``. Later samples are checked against the
inferred streams (a missing or extra member, another dim) by the reader, located.

Integer values (``.cls``, integer ``.npy``) become float32/float64 only where exact
(``formats/integers.py``).
"""
from __future__ import annotations

import numpy as np

from recordkit.engine.streams import StreamSpec, stream_arguments
from recordkit.errors import FormatError
from recordkit.formats.directories import DESCRIPTION
from recordkit.formats.webdataset import npy

INFER_SAMPLES = 16
IMAGES = ("jpg", "jpeg", "png", "webp", "gif", "bmp", "tif", "tiff", "ppm", "pgm")
TEXTS = ("txt", "text", "json", "jsonl", "cbor", "html", "xml")


def extension(field: str) -> str:
    return field.rsplit(".", 1)[-1].lower()


def bytes_field(name: str) -> str:
    """The member field recordkit's writer gives bytes stream ``name``: the name itself when it ends in
    an extension that says what it holds (``jpg``, ``image.png``, ``txt``), else ``NAME.bin``."""
    ext = extension(name)
    return name if ext in IMAGES + TEXTS + ("bin",) and ext not in ("npy", "cls") else name + ".bin"


def bytes_member(alias: str, present) -> str:
    """The member field a bytes stream of ``alias`` reads: ``alias`` itself where the shard has it
    (another tool's ``jpg``), else recordkit's ``bytes_field``."""
    return alias if alias in present else bytes_field(alias)


def member_of(alias: str, present) -> str:
    """The member field a stream of ``alias`` reads: ``ALIAS.npy`` (recordkit's own layout) where the
    shard has it, else ``ALIAS`` itself when it is an ``.npy`` or ``.cls`` field."""
    own = alias + ".npy"
    if own not in present and alias in present and extension(alias) in ("npy", "cls"):
        return alias
    return own


def cls_value(data: bytes) -> int:
    """The integer of a ``.cls`` member (decimal text, as ``webdataset.TarWriter`` writes it)."""
    text = data.decode("ascii").strip()
    if not text or not (text.lstrip("+-").isdigit()):
        raise ValueError(f"{data[:40]!r} is not an integer")
    value = int(text)
    if not -2**63 <= value < 2**63:
        raise ValueError(f"{text[:40]} is outside int64")
    return value


def _describe(field, data):
    """(dim, samples) of one member, or raise ValueError saying why it is no stream."""
    ext = extension(field)
    if ext == "npy":
        dtype, shape, _, _ = npy.parse(data, 0, len(data))
        if dtype.kind not in "fiu":
            raise ValueError(f"an array of {dtype}, not numbers")
        if len(shape) == 1 and shape[0] > 0:
            return shape[0], 1
        if len(shape) == 2 and shape[1] > 0:
            return shape[1], shape[0]
        raise ValueError(f"an array of shape {shape}, not (dim,) or (samples, dim)")
    if ext == "cls":
        cls_value(data)
        return 1, 1
    return None, 1  # a bytes stream: images, text, JSON, ... as they are


def infer(path, samples) -> list[StreamSpec]:
    """The streams of the first samples: ``samples`` = [(key, {field: bytes}, header offset, index)]."""
    key0, first, offset, _ = samples[0]
    streams, refused, used = [], [], set()
    for field in sorted(first):
        dim, why = None, None
        for key, members, _, i in samples:
            if field not in members:
                why = f"sample '{key}' ({i}) has no member '{field}' (sample 0 has)"
                break
            try:
                d, _ = _describe(field, members[field])
            except (ValueError, npy.NpyError, UnicodeDecodeError) as e:
                why = f"member '{field}' of sample '{key}' is {e}"
                break
            if i and d != dim:
                why = f"member '{field}' has dim {dim} in sample 0, {d} in sample {i}"
                break
            dim = d
        if why:
            refused.append(why)
            continue
        ext = extension(field)
        name = field[:-len(ext) - 1] if field != ext else field
        if name in used:
            name = field.replace(".", "_")
        used.add(name)
        streams.append(StreamSpec(name, "dense", dim, alias=field) if dim is not None
                       else StreamSpec(name, "bytes", 1, alias=field))
    if refused:
        hint = (f"select the others with {stream_arguments(streams)}" if streams else
                "declare the streams with --stream NAME=dense:DIM:FIELD")
        raise FormatError(path, f"no {DESCRIPTION} stream description, and the streams cannot be inferred from the "
                                f"members: {'; '.join(refused)}; {hint}",
                          offset=offset, record="sample 0")
    if not streams:
        raise FormatError(path, f"sample '{key0}' has no members to read as streams", offset=offset,
                          record="sample 0")
    return streams


def to_floats(values: np.ndarray, dtype):
    """Numeric member values as ``dtype`` and the index of the first integer it does not hold exactly."""
    from recordkit.formats.integers import exact_floats
    if values.dtype.kind in "iu":
        return exact_floats(values, dtype)
    return values.astype(dtype, copy=False), None
