"""``recordkit report`` for OFRecord data sets: features discovered, walked on the wire.

A part is read once and indexed in memory (its length prefixes). The totals per feature are
``FeatureStats``'s (the compiled walk behind ``recordkit stats``, so the page shows the same
numbers); a record it cannot take is decoded by protobuf, whose located error goes on the
page (the record is left out, the walk goes on, as ``recordkit validate`` lists every
problem). Numeric features of a fixed length become dense columns through ``decode_numeric``
(a slice of records at a time), summarized like any dense stream; ``bytes_list`` features
holding JPEG or PNG give the image grid (the first records, embedded as they are).
"""
from __future__ import annotations

import numpy as np

from recordkit.formats.ofrecord.summary import add_decoded
from recordkit.errors import FormatError
from recordkit.report.summaries import IMAGES, BytesStats, DenseStats, InputReport

SLICE = 4096  # records per decode_numeric call (bounds the float64 block)
IMAGE_MAGIC = {b"\xff\xd8\xff": ("JPEG", "image/jpeg"), b"\x89PNG\r\n\x1a\n": ("PNG", "image/png")}


def _image_kind(value: bytes):
    for magic, kind in IMAGE_MAGIC.items():
        if value.startswith(magic):
            return kind
    return None


def _read_part(path, storage_options):
    from recordkit.formats.ofrecord.dataset import read_part
    return read_part(path, storage_options)


def collect(rep: InputReport, path, *, storage_options=None, progress=None, data_part_num=None,
            part_name_prefix: str = "part-", part_name_suffix_length: int = -1) -> None:
    from recordkit.formats.ofrecord import _kernel, codec
    from recordkit.formats.ofrecord.dataset import part_paths
    rep.chunk_label = "parts"
    try:
        paths = part_paths(str(path), data_part_num, part_name_prefix, part_name_suffix_length,
                           storage_options=storage_options)
    except (FormatError, OSError) as e:
        rep.add_problem(str(e), "fatal")
        return
    rep.chunks = len(paths)
    acc = _kernel.FeatureStats()
    dense: dict[str, DenseStats] = {}
    ragged: set[str] = set()
    kinds: dict[str, str] = {}
    images: list = []
    image_feature = label_feature = None
    for part in paths:
        index, data = _read_part(part, storage_options)
        rep.bytes += index.size
        buf = np.frombuffer(data, dtype=np.uint8)
        offsets = np.ascontiguousarray(index.offsets, dtype=np.int64)
        lengths = np.ascontiguousarray(index.lengths, dtype=np.int64)
        bad = []
        start = 0
        while (r := acc.add(buf, offsets, lengths, start)) >= 0:
            off, n = int(offsets[r]), int(lengths[r])
            try:
                rec = codec.decode(data[off:off + n], path=part, offset=off - 8, index=r)
            except FormatError as e:
                rep.add_problem(str(e))
                bad.append(r)
            else:
                add_decoded(acc, rec)
            start = r + 1
        for r in np.flatnonzero(lengths == 0).tolist():
            rep.add_problem(f"{part}: byte offset {int(offsets[r]) - 8}, record {r}: record has no features")
            bad.append(r)
        good = np.ones(len(index), dtype=bool)
        good[bad] = False
        rep.sequences += int(good.sum())
        first = int(np.argmax(good)) if good.any() else None
        if first is not None:
            off, n = int(offsets[first]), int(lengths[first])
            for name, f in codec.decode(data[off:off + n], path=part, offset=off - 8, index=first).items():
                if name in kinds:
                    if kinds[name] != f.kind:
                        ragged.add(name)
                    continue
                kinds[name] = f.kind
                if f.kind == "bytes_list":
                    if image_feature is None and len(f) == 1 and _image_kind(bytes(f.value[0])):
                        image_feature = name
                elif name not in dense and len(f) > 0:
                    dense[name] = DenseStats(name, len(f))
            if label_feature is None:
                label_feature = _label_feature(kinds, dense)
        g_off, g_len = offsets[good], lengths[good]
        for name, st in dense.items():
            if name in ragged:
                continue
            for lo in range(0, len(g_off), SLICE):
                block, problem = _kernel.decode_numeric(buf, g_off[lo:lo + SLICE], g_len[lo:lo + SLICE],
                                                        name.encode("utf-8"), st.dim, "float64", 0)
                if problem is not None:  # missing in some records, or lengths vary: no per-dimension view
                    ragged.add(name)
                    break
                st.add(block)
        if image_feature is not None and len(images) < IMAGES:
            for r in np.flatnonzero(good)[:IMAGES - len(images)].tolist():
                off, n = int(offsets[r]), int(lengths[r])
                rec = codec.decode(data[off:off + n], path=part, offset=off - 8, index=r)
                f = rec.get(image_feature)
                if f is None or f.kind != "bytes_list" or not len(f):
                    continue
                value = bytes(f.value[0])
                kind = _image_kind(value)
                if kind is None:
                    continue
                label = rec.get(label_feature) if label_feature else None
                images.append({"data": value, "mime": kind[1], "alt": f"{part} record {r}",
                               "label": None if label is None or not len(label) else _label_text(label.value[0])})
        err = index.error()
        if err is not None:
            rep.add_problem(f"{err} (the records after it in this part cannot be read)")
        if progress is not None:
            progress.update(index.size)
    totals = acc.result()
    for name, t in totals.items():
        kind = codec.KINDS[t["kind"] - 1]
        over = {"samples": t["records"], "nnz": t["values"], "sum": t["sum"],
                "min": t["min"], "max": t["max"]}
        if kind == "bytes_list":
            st = BytesStats(name)
            if name == image_feature:
                st.image_format = "/".join(sorted({im["mime"].split("/")[1].upper() for im in images})) or "JPEG/PNG"
        elif name in dense and name not in ragged:
            st = dense[name]
        else:
            st = DenseStats(name, 0, note="lengths vary between records (or the feature is missing from some): "
                                          "no per-dimension view")
            st.dim = None
        st.feature_kind = kind
        st.totals_override = over
        rep.streams.append(st)
    rep.samples = rep.sequences
    if images:
        rep.images = images
        rep.notes.append(f"Sampled: the image grid shows the first {len(images)} records' {image_feature!r} images")


def _label_feature(kinds: dict, dense: dict):
    """The feature shown under each image: a one-value numeric feature named like a label
    (``label``, ``class``), else the first one-value int64 feature that is not the sequence key."""
    single = [n for n, st in dense.items() if st.dim == 1]
    for word in ("label", "class"):
        for n in single:
            if word in n.lower():
                return n
    return next((n for n in single if kinds[n] == "int64_list" and n != "key"), None)


def _label_text(v) -> str:
    f = float(v)
    return str(int(f)) if f.is_integer() else f"{f:g}"
