"""Fuzz the CBF reader: corrupt headers, offset tables and chunks must be errors.

For any bytes on disk, opening a ``CBFReader`` and loading every chunk must either work
or raise a ``recordkit.errors.RecordkitError`` (a ``FormatError`` naming the file and a
byte offset); never crash the process, hang, or allocate what a length field claims
(a count of 2^62 is an error, not an allocation). Runs in this process on purpose.
"""
from __future__ import annotations

import faulthandler
import os
import struct
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.cbf import CBFReader

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CORPUS = HERE / "corpus" / "cbf"
ORACLE = REPO / "tests" / "data" / "cbf_oracle" / "files"
SHARED = Path("/work/shared/conformance/cntk/Data/CNTKBinaryReader")

SLOW_EXAMPLE_S = 10.0
WATCHDOG_S = 120

# values a corrupted length/count/offset field is set to
EVIL = [0, 1, 2, 3, 7, 8, 12, 255, 0x7FFF, 0xFFFF, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1,
        -1, -2, -(2**31), -(2**63)]


def fuzz_settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))


# -- the CBF layout, walked independently of the reader, to find every length field -------------

def cbf_fields(data: bytes) -> list[tuple[int, int, str]]:
    """(offset, width, what) for every header, table and chunk field of a well-formed file."""
    fields = [(0, 8, "magic"), (8, 4, "version"), (len(data) - 8, 8, "header offset")]
    (hoff,) = struct.unpack_from("<q", data, len(data) - 8)
    fields += [(hoff, 8, "header magic"), (hoff + 8, 4, "chunk count"), (hoff + 12, 4, "stream count")]
    _, nchunks, nstreams = struct.unpack_from("<QII", data, hoff)
    pos = hoff + 16
    streams = []
    for _ in range(nstreams):
        storage, nlen = struct.unpack_from("<BI", data, pos)
        fields += [(pos, 1, "storage"), (pos + 1, 4, "name length")]
        pos += 5 + nlen
        etype, dim = struct.unpack_from("<BI", data, pos)
        fields += [(pos, 1, "element type"), (pos + 1, 4, "dim")]
        pos += 5
        streams.append((storage, 8 if etype else 4, dim))
    table = []
    for k in range(nchunks):
        off, nseq, nsamp = struct.unpack_from("<qII", data, pos)
        fields += [(pos, 8, "chunk offset"), (pos + 8, 4, "chunk sequences"), (pos + 12, 4, "chunk samples")]
        table.append((off, nseq))
        pos += 16
    for off, nseq in table:
        p = off
        for q in range(nseq):
            fields.append((p + 4 * q, 4, "sequence sample count"))
        p += 4 * nseq
        for storage, esize, dim in streams:
            for _ in range(nseq):
                (ns,) = struct.unpack_from("<I", data, p)
                fields.append((p, 4, "stream sample count"))
                if storage == 0:
                    p += 4 + ns * dim * esize
                    continue
                (nnz,) = struct.unpack_from("<i", data, p + 4)
                fields.append((p + 4, 4, "nnz"))
                idx = p + 8 + nnz * esize
                fields += [(idx + 4 * j, 4, "sparse index") for j in range(min(nnz, 4))]
                cnt = idx + 4 * nnz
                fields += [(cnt + 4 * j, 4, "per-sample nnz") for j in range(min(ns, 4))]
                p = cnt + 4 * ns
    return fields


def put(buf: bytearray, off: int, width: int, value: int) -> None:
    mask = (1 << (8 * width)) - 1
    buf[off:off + width] = (value & mask).to_bytes(width, "little")


def load_seeds() -> list[tuple[str, bytes, list]]:
    seeds = []
    for p in sorted(CORPUS.glob("*.cbf")):
        data = p.read_bytes()
        seeds.append((p.name, data, cbf_fields(data)))
    return seeds


SEEDS = load_seeds()


@st.composite
def corrupted(draw):
    """A seed with 1..6 corruptions: evil values in length fields, or byte-level mutations."""
    name, data, fields = draw(st.sampled_from(SEEDS))
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["field", "field", "field", "field_delta", "flip", "truncate", "insert",
                                   "delete", "splice"]))
        n = len(buf)
        if op in ("field", "field_delta"):
            off, width, _what = draw(st.sampled_from(fields))
            if off + width > n or off < 0:
                continue
            if op == "field":
                value = draw(st.sampled_from(EVIL + [n, n - 8, n - 16, n + 1]))
            else:
                old = int.from_bytes(buf[off:off + width], "little")
                value = old + draw(st.sampled_from([-16, -8, -4, -1, 1, 4, 8, 16]))
            put(buf, off, width, value)
        elif op == "flip" and n:
            i = draw(st.integers(0, n - 1))
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del buf[draw(st.integers(0, n)):]
        elif op == "insert":
            pos = draw(st.integers(0, n))
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=32))
        elif op == "delete":
            pos = draw(st.integers(0, n))
            del buf[pos:pos + draw(st.integers(1, 32))]
        elif op == "splice":
            other = draw(st.sampled_from(SEEDS))[1]
            pos = draw(st.integers(0, n))
            j = draw(st.integers(0, len(other)))
            buf = buf[:pos] + bytearray(other[j:])
    return name, bytes(buf)


# -- the contract ---------------------------------------------------------------------------------

def check_error(exc: RecordkitError, path: str) -> None:
    assert isinstance(exc, RecordkitError), f"{type(exc).__name__}: {exc}"
    if isinstance(exc, FormatError):
        assert exc.path == str(path), (exc.path, path)
        assert str(path) in str(exc), str(exc)
        assert exc.offset is not None, f"binary error without a byte offset: {exc}"


def read_cbf(path: str, *, threads: int = 1, precision=None) -> int:
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CBFReader(path, precision=precision)
        try:
            for c in r.chunks:
                r.sequence_lengths(c.id)
                r.sequence_keys(c.id)
            if threads > 1:
                for chunk in r.iter_chunks(threads=threads):
                    n += sum(1 for _ in chunk)
            else:
                for c in r.chunks:
                    n += sum(1 for _ in r.load_chunk(c.id))
        finally:
            r.close()
    return n


def run_contract(data: bytes, *, threads: int = 1, precision=None) -> None:
    with tempfile.TemporaryDirectory(prefix="rk-fuzz-cbf-") as d:
        path = os.path.join(d, "input.cbf")
        with open(path, "wb") as f:
            f.write(data)
        t0 = time.monotonic()
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
        try:
            read_cbf(path, threads=threads, precision=precision)
        except RecordkitError as e:
            check_error(e, path)
        except Exception as e:  # noqa: BLE001
            pytest.fail(f"{type(e).__name__} (not a RecordkitError) for a {len(data)}-byte input "
                        f"(threads={threads}, precision={precision}): {e!r}\ninput: {data!r}"[:4000])
        finally:
            faulthandler.cancel_dump_traceback_later()
        elapsed = time.monotonic() - t0
        assert elapsed < SLOW_EXAMPLE_S, f"{elapsed:.1f}s on {len(data)} bytes"


# -- hand-built files -------------------------------------------------------------------------------

MAGIC = 0x636E746B5F62696E


def build_cbf(streams, chunks: list[bytes], table=None) -> bytes:
    """streams: [(storage, name, etype, dim)]; chunks: raw chunk bytes; table: override rows."""
    out = bytearray(struct.pack("<QI", MAGIC, 1))
    rows = []
    for c in chunks:
        rows.append((len(out), 1, 1))
        out += c
    hoff = len(out)
    out += struct.pack("<QII", MAGIC, len(chunks), len(streams))
    for storage, name, etype, dim in streams:
        out += struct.pack("<BI", storage, len(name)) + name + struct.pack("<BI", etype, dim)
    for row in (table if table is not None else rows):
        out += struct.pack("<qII", *row)
    out += struct.pack("<q", hoff)
    return bytes(out)


def dense_chunk(value: float = 1.0) -> bytes:
    return struct.pack("<I", 1) + struct.pack("<I", 1) + struct.pack("<f", value)


# -- tests ------------------------------------------------------------------------------------------

def test_seed_fields_parse():
    assert SEEDS, f"no seeds in {CORPUS}"
    for name, data, fields in SEEDS:
        assert fields, name
        run_contract(data)
        run_contract(data, threads=2)


@fuzz_settings(1500)
@given(case=corrupted(), threads=st.sampled_from([1, 2]), precision=st.sampled_from([None, "double"]))
def test_corrupted_seeds(memory_guard, case, threads, precision):
    _, data = case
    run_contract(data, threads=threads, precision=precision)


@fuzz_settings(400)
@given(data=st.binary(max_size=200), prefix=st.booleans())
def test_random_bytes(memory_guard, data, prefix):
    if prefix:
        data = struct.pack("<QI", MAGIC, 1) + data
    run_contract(data)


@pytest.mark.parametrize("value", EVIL)
@pytest.mark.parametrize("what", ["header offset", "chunk count", "stream count", "name length", "dim",
                                  "chunk offset", "chunk sequences", "chunk samples", "sequence sample count",
                                  "stream sample count", "nnz", "sparse index", "per-sample nnz"])
def test_every_length_field(memory_guard, what, value):
    """Each kind of field of each seed, set to each evil value (2^31, 2^32-1, 2^62, negative, ...)."""
    hit = False
    for name, data, fields in SEEDS:
        for off, width, kind in fields:
            if kind != what:
                continue
            hit = True
            buf = bytearray(data)
            put(buf, off, width, value)
            run_contract(bytes(buf))
            break  # first field of this kind per seed keeps the grid small
    if not hit:
        pytest.skip(f"no seed has a '{what}' field")


@pytest.mark.parametrize("data", [
    # prefix, header (0 chunks, 0 streams), header offset 12: 36 bytes
    bytes.fromhex("6e69625f6b746e6301000000" "6e69625f6b746e630000000000000000" "0c00000000000000"),
    build_cbf([], [b"\x00" * 4], table=[(12, 1, 0)]),  # one chunk of one empty sequence, no streams
], ids=["no-chunks", "one-chunk"])
def test_zero_streams_is_a_format_error(data):
    """A header declaring no streams: the reader must say so with a FormatError, not a bare ValueError."""
    run_contract(data)


MANY_STREAMS_SCRIPT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
from recordkit.errors import RecordkitError
from recordkit.formats.cbf import CBFReader
r = CBFReader(sys.argv[1])
try:
    r.load_chunk(0)
except RecordkitError as e:
    print("ok", e)
    sys.exit(0)
except BaseException as e:
    print(type(e).__name__, e)
    sys.exit(3)
print("loaded", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
sys.exit(0)
"""


def test_many_streams_times_many_sequences_is_bounded(tmp_path):
    """decode_chunk sizes a per-(stream, sequence) table before validating anything; a small file
    with S streams and a chunk claiming N sequences must not allocate S*N*8 bytes.

    Run in a child process under a 3 GB address-space limit so a failure cannot take the
    machine's memory: within the limit the load must succeed or raise a RecordkitError."""
    import subprocess
    import sys
    nstreams = 20_000
    nseq = 60_000  # 240 KB of zero sequence counts; 20k x 60k x 8 bytes = 9.6 GB if allocated
    streams = [(0, b"s%d" % i, 0, 1) for i in range(nstreams)]
    data = build_cbf(streams, [b"\x00" * (4 * nseq)], table=[(12, nseq, 0)])
    path = tmp_path / "many_streams.cbf"
    path.write_bytes(data)
    proc = subprocess.run([sys.executable, "-c", MANY_STREAMS_SCRIPT, str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, f"rc={proc.returncode}: {proc.stdout}{proc.stderr[-2000:]}"


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")
@fuzz_settings(150)
@given(data=st.data())
def test_corrupted_shared_cntk_files(memory_guard, data):
    """The CNTK conformance binaries (small ones), read in place and corrupted."""
    paths = sorted(p for p in SHARED.glob("*.bin") if p.stat().st_size <= 64_000)
    p = data.draw(st.sampled_from(paths))
    raw = bytearray(p.read_bytes())
    fields = cbf_fields(bytes(raw))
    for _ in range(data.draw(st.integers(1, 3))):
        off, width, _ = data.draw(st.sampled_from(fields))
        put(raw, off, width, data.draw(st.sampled_from(EVIL)))
    run_contract(bytes(raw), threads=data.draw(st.sampled_from([1, 2])))
