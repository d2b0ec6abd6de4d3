"""Decoding SequenceExample feature lists of a whole file at once, with NumPy.

Through the protobuf package every sample costs a few Python objects (a ``Feature``, its list,
the repeated field); a corpus of short one-hot sequences has millions of samples. Here the
records' top levels are walked in Python (a handful of varints each: context ``key``, the byte
range of every wanted feature list), and then the samples of one feature list are walked for all
records *in lockstep*: iteration k decodes the k-th sample header of every record that has one,
with NumPy gathers, so the Python work is per record and per iteration, not per sample. Payloads
(packed floats, packed varint indices) are cut out of the file with one mask and decoded
column-wise.

Only the canonical encoding is taken (what recordkit, TensorFlow and the protobuf package write:
packed lists, one ``FeatureList`` per name); anything else raises ``NotCanonical`` and the reader
falls back to the protobuf path, which also produces the located errors for damaged records.
"""
from __future__ import annotations

import numpy as np


class NotCanonical(Exception):
    """Not the layout this decoder takes: use the protobuf path."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise NotCanonical
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _field(buf, pos, end):
    """(tag, start, stop) of a length-delimited field at ``pos``."""
    if pos >= end:
        raise NotCanonical
    tag = buf[pos]
    if tag & 7 != 2:
        raise NotCanonical
    n, p = _varint(buf, pos + 1, end)
    if p + n > end:
        raise NotCanonical
    return tag, p, p + n


def _key_of(buf, start, end, key_name: bytes):
    """The single int64 of context feature ``key_name``, or None."""
    pos, found = start, None
    while pos < end:
        tag, a, b = _field(buf, pos, end)
        if tag != 0x0A:
            raise NotCanonical
        name, value = None, None
        p = a
        while p < b:
            t, x, y = _field(buf, p, b)
            if t == 0x0A:
                name = buf[x:y]
            elif t == 0x12:
                value = (x, y)
            else:
                raise NotCanonical
            p = y
        if name == key_name and value is not None:
            t, x, y = _field(buf, value[0], value[1]) if value[1] > value[0] else (None, 0, 0)
            if t != 0x1A or y != value[1]:
                return None
            t2, x2, y2 = _field(buf, x, y) if y > x else (None, 0, 0)
            if t2 != 0x0A or y2 != y:
                return None
            v, p2 = _varint(buf, x2, y2)
            if p2 != y2:
                return None
            found = v
        pos = b
    return found


def walk_records(buf: bytes, offs, lens, wanted: list[bytes], key_name: bytes):
    """Per record: the key (or None) and the (start, end) of each wanted feature list's body
    (start = end = -1 when absent). Returns (keys list, starts (n, W), ends (n, W))."""
    n = len(offs)
    index = {name: i for i, name in enumerate(wanted)}
    starts = np.full((n, len(wanted)), -1, dtype=np.int64)
    ends = np.full((n, len(wanted)), -1, dtype=np.int64)
    keys = []
    for r, (o, ln) in enumerate(zip(offs.tolist(), lens.tolist())):
        pos, end = o, o + ln
        key = None
        seen_lists = False
        while pos < end:
            tag, a, b = _field(buf, pos, end)
            if tag == 0x0A:
                key = _key_of(buf, a, b, key_name)
            elif tag == 0x12:
                if seen_lists:
                    raise NotCanonical
                seen_lists = True
                p = a
                while p < b:
                    t, x, y = _field(buf, p, b)
                    if t != 0x0A:
                        raise NotCanonical
                    name, value = None, None
                    q = x
                    while q < y:
                        t2, u, v = _field(buf, q, y)
                        if t2 == 0x0A:
                            name = buf[u:v]
                        elif t2 == 0x12:
                            value = (u, v)
                        else:
                            raise NotCanonical
                        q = v
                    i = index.get(name)
                    if i is not None:
                        if starts[r, i] >= 0:
                            raise NotCanonical  # the same list twice: protobuf merges, leave it to it
                        starts[r, i], ends[r, i] = value if value is not None else (y, y)
                    p = y
            else:
                raise NotCanonical
            pos = b
        keys.append(key)
    return keys, starts, ends


def _varints_at(arr: np.ndarray, pos: np.ndarray, limit: np.ndarray):
    """Vectorized varint at each ``pos`` (none may run to ``limit``): (values, positions after)."""
    size = len(arr)
    if len(pos) == 0:
        return np.zeros(0, np.uint64), np.zeros(0, np.int64)
    lim = np.minimum(limit, size)
    if np.any(pos >= lim):
        raise NotCanonical
    b = arr[pos]
    value = (b & 0x7F).astype(np.uint64)
    after = pos + 1
    rest = np.flatnonzero(b >= 0x80)  # most lengths and indices fit one byte: only the others go on
    k = 1
    while len(rest):
        if k >= 10:
            raise NotCanonical
        p = pos[rest] + k
        if np.any(p >= lim[rest]):
            raise NotCanonical
        bk = arr[p]
        value[rest] |= (bk & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        stop = bk < 0x80
        after[rest[stop]] = p[stop] + 1
        rest = rest[~stop]
        k += 1
    return value, after


def sample_payloads(arr: np.ndarray, starts: np.ndarray, ends: np.ndarray, list_tag: int):
    """Walk the ``FeatureList`` bodies ``[starts, ends)`` (one per record; -1 = absent) in lockstep.

    Every sample must be ``Feature{<list_tag> {packed values}}`` (or an empty Feature/list).
    Returns (per-record sample counts, payload starts, payload lengths) in (record, sample) order.
    """
    n = len(starts)
    if np.any(starts < 0):
        raise NotCanonical
    pos = starts.copy()
    rec_parts, p_start, p_len = [], [], []
    active = np.flatnonzero(pos < ends)
    while len(active):
        p = pos[active]
        lim = ends[active]
        if np.any(arr[p] != 0x0A):
            raise NotCanonical
        flen, p1 = _varints_at(arr, p + 1, lim)
        fend = p1 + flen.astype(np.int64)
        if np.any(fend > lim):
            raise NotCanonical
        pay_s, pay_l = feature_payloads(arr, p1, fend, list_tag)
        rec_parts.append(active)
        p_start.append(pay_s)
        p_len.append(pay_l)
        pos[active] = fend
        active = active[fend < lim]
    if not rec_parts:
        return np.zeros(n, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    rec = np.concatenate(rec_parts)
    order = np.argsort(rec, kind="stable")
    counts = np.bincount(rec, minlength=n).astype(np.int64)
    return counts, np.concatenate(p_start)[order], np.concatenate(p_len)[order]


def feature_payloads(arr: np.ndarray, p1: np.ndarray, fend: np.ndarray, list_tag: int):
    """The packed values of the ``Feature`` bodies ``[p1, fend)``, each ``<list_tag> {packed values}``
    (or an empty Feature/list): (payload starts, payload lengths)."""
    nonempty = fend > p1
    pay_s = np.array(p1)
    pay_l = np.zeros(len(p1), dtype=np.int64)
    if nonempty.any():
        q = p1[nonempty]
        qe = fend[nonempty]
        if np.any(arr[q] != list_tag):
            raise NotCanonical
        ilen, q1 = _varints_at(arr, q + 1, qe)
        if np.any(q1 + ilen.astype(np.int64) != qe):
            raise NotCanonical
        has = qe > q1
        s = q1.copy()
        ln = np.zeros(len(q), dtype=np.int64)
        if has.any():
            r = q1[has]
            if np.any(arr[r] != 0x0A):
                raise NotCanonical  # unpacked values: leave them to protobuf
            plen, r1 = _varints_at(arr, r + 1, qe[has])
            if np.any(r1 + plen.astype(np.int64) != qe[has]):
                raise NotCanonical
            s[has] = r1
            ln[has] = plen.astype(np.int64)
        pay_s[nonempty] = s
        pay_l[nonempty] = ln
    return pay_s, pay_l


def example_features(arr, offs, lens, names: list[bytes]):
    """The ``tf.train.Example`` records' features named ``names``, for all records at once:
    ({name: (records holding it, Feature body starts, ends)}, every feature of every record is
    one of ``names``). Only the canonical layout (one ``features`` field per record, map entries
    key then value); else ``NotCanonical``."""
    n = len(offs)
    rec, tag, bs, be = _fields_lockstep(arr, offs.astype(np.int64), (offs + lens).astype(np.int64))
    if np.any(tag != 0x0A) or len(rec) != n or not np.array_equal(rec, np.arange(n)):
        raise NotCanonical  # feature lists (a SequenceExample), no features, or features twice
    owner, ns, ne, vs, ve = _map_entries(arr, bs, be)
    matched = np.zeros(len(owner), dtype=bool)
    out = {}
    for name in names:
        hit = np.flatnonzero(_names_equal(arr, ns, ne, name))
        matched[hit] = True
        out[name] = (owner[hit], vs[hit], ve[hit])
    return out, bool(matched.all())


def gather(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The payload bytes ``arr[starts[i]:starts[i]+lens[i]]`` concatenated (ranges in file order)."""
    from recordkit.formats.sharding import gather_ranges
    try:
        return gather_ranges(arr, starts, lens)
    except ValueError:
        raise NotCanonical from None


def decode_varints(flat: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Packed varints of each payload (``lens`` bytes each, concatenated in ``flat``): (values as
    uint64, values per payload)."""
    if len(flat) == 0:
        return np.zeros(0, np.uint64), np.zeros(len(lens), np.int64)
    bounds = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=bounds[1:])
    v_end = np.flatnonzero(flat < 0x80)
    nz = lens > 0
    if len(v_end) == 0 or v_end[-1] != len(flat) - 1 or np.any(flat[bounds[1:][nz] - 1] >= 0x80):
        raise NotCanonical  # a varint runs past its payload
    per = np.searchsorted(v_end, bounds[1:], side="left") - np.searchsorted(v_end, bounds[:-1], side="left")
    v_start = np.empty_like(v_end)
    v_start[0] = 0
    v_start[1:] = v_end[:-1] + 1
    width = v_end - v_start + 1
    wmax = int(width.max())
    if wmax > 10:
        raise NotCanonical
    low = (flat & 0x7F).astype(np.uint64)
    values = low[v_start]
    for j in range(1, wmax):
        more = np.flatnonzero(width > j)
        values[more] |= low[v_start[more] + j] << np.uint64(7 * j)
    return values, per


def _fields_lockstep(arr, starts, ends, expect_tag=None):
    """The length-delimited fields inside ranges ``[starts, ends)``, walked for all ranges at once.
    Returns (owner range, tag, body start, body end) per field, in (range, position) order."""
    pos = starts.copy()
    owners, tags, bs, be = [], [], [], []
    active = np.flatnonzero(pos < ends)
    while len(active):
        p = pos[active]
        lim = ends[active]
        tag = arr[p]
        if np.any(tag & 7 != 2) or (expect_tag is not None and np.any(tag != expect_tag)):
            raise NotCanonical
        ln, p1 = _varints_at(arr, p + 1, lim)
        e = p1 + ln.astype(np.int64)
        if np.any(e > lim):
            raise NotCanonical
        owners.append(active)
        tags.append(tag)
        bs.append(p1)
        be.append(e)
        pos[active] = e
        active = active[e < lim]
    if not owners:
        z = np.zeros(0, np.int64)
        return z, np.zeros(0, np.uint8), z, z
    owner = np.concatenate(owners)
    order = np.argsort(owner, kind="stable")
    return owner[order], np.concatenate(tags)[order], np.concatenate(bs)[order], np.concatenate(be)[order]


def _map_entries(arr, starts, ends):
    """Map entries (``{key: 1, value: 2}``) inside each range: (owner, name start, name end,
    value start, value end); the canonical key-then-value order only."""
    owner, _, es, ee = _fields_lockstep(arr, starts, ends, expect_tag=0x0A)
    if len(owner) == 0:
        z = np.zeros(0, np.int64)
        return owner, z, z, z, z
    if np.any(arr[es] != 0x0A):
        raise NotCanonical
    nlen, n1 = _varints_at(arr, es + 1, ee)
    ne = n1 + nlen.astype(np.int64)
    has_value = ne < ee
    vs = ne.copy()
    ve = ne.copy()
    if has_value.any():
        q = ne[has_value]
        if np.any(arr[q] != 0x12):
            raise NotCanonical
        vlen, v1 = _varints_at(arr, q + 1, ee[has_value])
        vs[has_value] = v1
        ve[has_value] = v1 + vlen.astype(np.int64)
    if np.any(ve != ee):
        raise NotCanonical
    return owner, n1, ne, vs, ve


def _names_equal(arr, ns, ne, name: bytes) -> np.ndarray:
    hit = (ne - ns) == len(name)
    idx = np.flatnonzero(hit)
    if len(idx) and len(name):
        got = arr[ns[idx][:, None] + np.arange(len(name))]
        hit[idx] = (got == np.frombuffer(name, dtype=np.uint8)).all(axis=1)
    return hit


def walk_records_columnwise(arr, offs, lens, wanted: list[bytes], key_name: bytes):
    """``walk_records`` for all records at once (same results; NotCanonical where it would be)."""
    n = len(offs)
    starts = np.full((n, len(wanted)), -1, dtype=np.int64)
    ends = np.full((n, len(wanted)), -1, dtype=np.int64)
    rec, tag, bs, be = _fields_lockstep(arr, offs.astype(np.int64), (offs + lens).astype(np.int64))
    if np.any((tag != 0x0A) & (tag != 0x12)):
        raise NotCanonical
    is_fl = tag == 0x12
    if len(np.unique(rec[is_fl])) != int(is_fl.sum()):
        raise NotCanonical  # feature_lists twice in a record: protobuf merges them
    # feature lists
    fl_rec = rec[is_fl]
    owner, ns, ne, vs, ve = _map_entries(arr, bs[is_fl], be[is_fl])
    for i, name in enumerate(wanted):
        hit = np.flatnonzero(_names_equal(arr, ns, ne, name))
        r = fl_rec[owner[hit]]
        if len(np.unique(r)) != len(r):
            raise NotCanonical
        starts[r, i] = vs[hit]
        ends[r, i] = ve[hit]
    # the key: context entry key_name -> Feature{int64_list (3){value (1) packed: one varint}}
    keys = np.zeros(n, dtype=np.uint64)
    found = np.zeros(n, dtype=bool)
    is_ctx = tag == 0x0A
    if is_ctx.any():
        c_rec = rec[is_ctx]
        owner, ns, ne, vs, ve = _map_entries(arr, bs[is_ctx], be[is_ctx])
        hit = np.flatnonzero(_names_equal(arr, ns, ne, key_name) & (ve > vs))
        if len(hit):
            s, e = vs[hit], ve[hit]
            good = arr[s] == 0x1A
            l1, p1 = _varints_at(arr, s + 1, e + 1)
            good &= p1 + l1.astype(np.int64) == e
            good &= arr[np.minimum(p1, len(arr) - 1)] == 0x0A
            l2, p2 = _varints_at(arr, np.where(good, p1 + 1, s), e + 1)
            good &= p2 + l2.astype(np.int64) == e
            val, p3 = _varints_at(arr, np.where(good, p2, s), e + 1)
            good &= p3 == e
            r = c_rec[owner[hit]]
            keys[r[good]] = val[good]
            found[r[good]] = True
    return keys, found, starts, ends
