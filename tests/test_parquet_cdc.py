"""Content-defined Parquet pages (`convert --content-defined-chunking`, default for hf:// outputs): a data
set that grows by 1% keeps most of its data pages byte for byte, which fixed-size pages do not where
the new rows land inside the data; each page is found by parsing the page headers of every column chunk."""
import hashlib

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from recordkit.engine.chunk import ChunkData, DenseColumn  # noqa: E402
from recordkit.engine.streams import StreamSpec  # noqa: E402
from recordkit.formats.parquet.writer import ParquetWriter, cdc_supported, content_defined_chunking_for  # noqa: E402

needs_cdc = pytest.mark.skipif(not cdc_supported(), reason="content-defined chunking needs pyarrow >= 21")
CDC = {"min_chunk_size": 2048, "max_chunk_size": 8192}  # small pages: many of them in a small test file
PAGE = 4096  # fixed pages of about the same size, for the comparison


# -- Parquet page headers: Thrift compact protocol, just enough to step over a PageHeader ------------
def _varint(buf, i):
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _skip(buf, i, kind):
    """Step over one compact-protocol value of type ``kind``; return (value or None, next offset)."""
    if kind in (1, 2):  # bool in a field header
        return kind == 1, i
    if kind == 3:
        return buf[i], i + 1
    if kind in (4, 5, 6):
        v, i = _varint(buf, i)
        return (v >> 1) ^ -(v & 1), i
    if kind == 7:
        return None, i + 8
    if kind == 8:
        n, i = _varint(buf, i)
        return None, i + n
    if kind in (9, 10):
        head = buf[i]
        i += 1
        n, elem = head >> 4, head & 0x0F
        if n == 15:
            n, i = _varint(buf, i)
        for _ in range(n):
            _, i = (None, i + 1) if elem in (1, 2) else _skip(buf, i, elem)
        return None, i
    if kind == 11:
        n, i = _varint(buf, i)
        if n:
            kv = buf[i]
            i += 1
            for _ in range(n):
                _, i = _skip(buf, i, kv >> 4)
                _, i = _skip(buf, i, kv & 0x0F)
        return None, i
    if kind == 12:
        return _struct(buf, i)
    raise ValueError(f"thrift type {kind}")


def _struct(buf, i):
    fields, last = {}, 0
    while True:
        head = buf[i]
        i += 1
        if head == 0:
            return fields, i
        delta, kind = head >> 4, head & 0x0F
        if delta:
            fid = last + delta
        else:
            v, i = _varint(buf, i)
            fid = (v >> 1) ^ -(v & 1)
        fields[fid], i = _skip(buf, i, kind)
        last = fid


def page_hashes(path) -> list[bytes]:
    """The digest of every page (header and data) of every column chunk of a Parquet file."""
    data = path.read_bytes()
    meta = pq.ParquetFile(path).metadata
    out = []
    for g in range(meta.num_row_groups):
        for c in range(meta.num_columns):
            col = meta.row_group(g).column(c)
            start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
            i, end = start, start + col.total_compressed_size
            while i < end:
                header, body = _struct(data, i)
                stop = body + header[3]  # field 3: compressed_page_size
                out.append(hashlib.sha256(data[i:stop]).digest())
                i = stop
            assert i == end
    return out


def kept(before, after) -> float:
    """The share of the first file's pages found unchanged in the second."""
    found = set(after)
    return sum(h in found for h in before) / len(before)


# -- the data ---------------------------------------------------------------------------------------
def write(path, keys, cdc, change: int | None = None):
    """One sequence of one 8-value sample per key, the values a function of the key (so the same
    rows are the same bytes in both writes); ``change``: the row whose value 3 is changed."""
    keys = np.asarray(keys, dtype=np.uint64)
    values = np.random.default_rng(1).normal(size=(int(keys.max()) + 1, 8)).astype(np.float32)[keys.astype(np.int64)]
    if change is not None:
        values[change, 3] += 1.0
    n = len(keys)
    chunk = ChunkData(0, keys, np.ones(n, np.int64), {"x": DenseColumn(values, np.arange(n + 1, dtype=np.int64))})
    with ParquetWriter(str(path), [StreamSpec("x", "dense", 8)], content_defined_chunking=cdc, data_page_size=PAGE,
                       compression="none") as w:
        w.write_chunk(chunk)
    return page_hashes(path)


N = 20_000
GROWN = N + N // 100  # 1% more rows


@needs_cdc
def test_rows_appended_at_the_end_leave_the_content_defined_pages_of_the_first_write(tmp_path):
    before = write(tmp_path / "a.parquet", np.arange(N), CDC)
    after = write(tmp_path / "b.parquet", np.arange(GROWN), CDC)
    assert len(before) >= 50
    assert kept(before, after) >= 0.9


@needs_cdc
def test_rows_inserted_inside_keep_most_content_defined_pages_and_fewer_fixed_pages(tmp_path):
    keys = np.arange(GROWN)
    old = np.concatenate([keys[:N // 3], keys[N // 3 + N // 100:]])  # the new 1% went in a third of the way
    cdc = kept(write(tmp_path / "a.parquet", old, CDC), write(tmp_path / "b.parquet", keys, CDC))
    fixed = kept(write(tmp_path / "c.parquet", old, False), write(tmp_path / "d.parquet", keys, False))
    assert cdc >= 0.85, cdc
    assert fixed <= 0.5, fixed  # the pages after the new rows all shift
    assert cdc - fixed >= 0.35


def test_the_parsed_pages_cover_every_column_chunk_and_a_changed_value_changes_one_page(tmp_path):
    a = write(tmp_path / "a.parquet", np.arange(2000), False)
    assert write(tmp_path / "b.parquet", np.arange(2000), False) == a and len(a) > 4
    changed = write(tmp_path / "c.parquet", np.arange(2000), False, change=1000)
    assert len(changed) == len(a) and sum(h not in set(a) for h in changed) == 1


def test_hf_targets_default_to_content_defined_pages_where_pyarrow_has_them(monkeypatch):
    import recordkit.formats.parquet.writer as writer
    assert content_defined_chunking_for("hf://datasets/me/set/train.parquet", None) is cdc_supported()
    assert content_defined_chunking_for("out.parquet", None) is False
    assert content_defined_chunking_for("hf://datasets/me/set/train.parquet", False) is False
    monkeypatch.setattr(writer, "cdc_supported", lambda: False)
    assert content_defined_chunking_for("hf://datasets/me/set/train.parquet", None) is False
    from recordkit.errors import UsageError
    with pytest.raises(UsageError, match="needs pyarrow >= 21"):
        content_defined_chunking_for("out.parquet", True)


@needs_cdc
def test_convert_option_writes_content_defined_pages_and_other_formats_refuse_it(tmp_path, capsys):
    from recordkit.cli.main import main
    src = tmp_path / "a.ctf"
    src.write_text("".join(f"|x {i} {i + 1}\n" for i in range(50)))
    assert main(["convert", str(src), str(tmp_path / "a.parquet"), "--stream", "x=dense:2",
                 "--content-defined-chunking"]) == 0
    assert main(["convert", str(tmp_path / "a.parquet"), str(tmp_path / "b.parquet"),
                 "--no-content-defined-chunking"]) == 0
    assert pq.read_table(tmp_path / "a.parquet").equals(pq.read_table(tmp_path / "b.parquet"))
    capsys.readouterr()
    assert main(["convert", str(src), str(tmp_path / "a.cbf"), "--stream", "x=dense:2",
                 "--content-defined-chunking"]) == 2
    assert "cbf output has no such option" in capsys.readouterr().err
