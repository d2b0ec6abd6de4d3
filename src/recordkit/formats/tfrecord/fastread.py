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
    value = np.zeros(len(pos), dtype=np.uint64)
    done = np.zeros(len(pos), dtype=bool)
    after = np.zeros(len(pos), dtype=np.int64)
    for k in range(10):
        p = pos + k
        if np.any(~done & (p >= np.minimum(limit, size))):
            raise NotCanonical
        b = arr[np.minimum(p, size - 1)].astype(np.uint64)
        live = ~done
        value[live] |= (b[live] & np.uint64(0x7F)) << np.uint64(7 * k)
        stop = live & (b < 0x80)
        after[stop] = p[stop] + 1
        done |= stop
        if done.all():
            return value, after
    raise NotCanonical


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
        nonempty = fend > p1
        pay_s = np.array(p1)
        pay_l = np.zeros(len(p), dtype=np.int64)
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


def gather(arr: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """The payload bytes ``arr[starts[i]:starts[i]+lens[i]]`` concatenated (ranges in file order)."""
    nz = lens > 0
    if not nz.any():
        return np.zeros(0, dtype=np.uint8)
    s, e = starts[nz], starts[nz] + lens[nz]
    if np.any(s[1:] < e[:-1]):
        raise NotCanonical
    total = int(lens.sum())
    if total * 8 < len(arr):  # few payload bytes (one-hot indices): index them, not the whole file
        ln = lens[nz]
        first = np.zeros(len(ln), dtype=np.int64)
        np.cumsum(ln[:-1], out=first[1:])
        return arr[np.repeat(s - first, ln) + np.arange(total, dtype=np.int64)]
    delta = np.zeros(len(arr) + 1, dtype=np.int8)
    delta[s] += 1
    delta[e] -= 1
    return arr[np.cumsum(delta[:-1], dtype=np.int8) > 0]


def decode_varints(flat: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Packed varints of each payload (``lens`` bytes each, concatenated in ``flat``): (values as
    uint64, values per payload)."""
    if len(flat) == 0:
        return np.zeros(0, np.uint64), np.zeros(len(lens), np.int64)
    term = flat < 0x80
    bounds = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=bounds[1:])
    nz = lens > 0
    if np.any(~term[bounds[1:][nz] - 1]):
        raise NotCanonical  # a varint runs past its payload
    cterm = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum(term, out=cterm[1:])
    per = cterm[bounds[1:]] - cterm[bounds[:-1]]
    v_end = np.flatnonzero(term)
    v_start = np.concatenate([[0], v_end[:-1] + 1])
    width = v_end - v_start + 1
    if width.max() > 10:
        raise NotCanonical
    digit = np.arange(len(flat), dtype=np.int64) - np.repeat(v_start, width)
    parts = (flat.astype(np.uint64) & np.uint64(0x7F)) << (digit.astype(np.uint64) * np.uint64(7))
    return np.add.reduceat(parts, v_start), per
