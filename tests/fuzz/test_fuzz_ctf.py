"""Fuzz the CTF reader: mutated seed files must never crash, hang or blow up memory.

The contract under test, for any bytes on disk:

* the process survives (a segfault in the compiled kernel kills pytest, which reports it);
* the only exceptions are ``recordkit.errors.RecordkitError`` subclasses;
* a ``FormatError`` names the file (``.path`` and the message) and a position
  (``.line``/``.column`` for text, or ``.offset``);
* no example takes long (inputs are small, so slowness means a hang or a quadratic path);
* the peak RSS of the process does not grow by more than 500 MB over a run.

Examples run in this process on purpose: a crash must take the test run down with it.
"""
from __future__ import annotations

import faulthandler
import json
import os
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from recordkit import StreamSpec
from recordkit.errors import FormatError, RecordkitError
from recordkit.formats.ctf import CTFReader

HERE = Path(__file__).parent
REPO = HERE.parent.parent
CORPUS = HERE / "corpus" / "ctf"
ORACLE = REPO / "tests" / "data" / "ctf_oracle" / "inputs"
SHARED = Path("/work/shared/conformance/cntk/Data/CNTKTextFormatReader")

SLOW_EXAMPLE_S = 10.0          # a small input that takes this long is a hang
WATCHDOG_S = 120               # a true hang: dump tracebacks and end the process

def fuzz_settings(n: int) -> settings:
    return settings(max_examples=n, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


# -- seeds and streams -------------------------------------------------------------------------

def infer_streams(data: bytes, limit_lines: int = 200) -> list[StreamSpec]:
    """Declare every input the text uses: sparse if it has ``index:value`` pairs, else dense
    with the most values seen on a line (used only for seeds without a JSON description)."""
    dense: dict[str, int] = {}
    sparse: dict[str, int] = {}
    for line in data.splitlines()[:limit_lines]:
        for part in line.split(b"|")[1:]:
            toks = part.split()
            if not toks or toks[0].startswith(b"#"):
                continue
            try:
                name = toks[0].decode("ascii")
            except UnicodeDecodeError:
                continue
            vals = toks[1:]
            if any(b":" in v for v in vals):
                top = 0
                for v in vals:
                    head = v.split(b":", 1)[0]
                    if head.isdigit():
                        top = max(top, int(head))
                sparse[name] = max(sparse.get(name, 1), top + 1)
            else:
                dense[name] = max(dense.get(name, 1), len(vals))
    specs = []
    for name, dim in dense.items():
        if name not in sparse:
            specs.append(StreamSpec(name, "dense", min(dim, 1 << 16)))
    for name, dim in sparse.items():
        specs.append(StreamSpec(name, "sparse", min(dim, 1 << 20)))
    if not specs:
        specs = [StreamSpec("a", "dense", 3), StreamSpec("b", "sparse", 10, "b")]
    return specs


def _streams_for(path: Path, data: bytes) -> list[StreamSpec]:
    meta = path.with_suffix(".json")
    if meta.exists():
        d = json.loads(meta.read_text())
        return [StreamSpec(s["name"], s["format"], s["dim"], s.get("alias") or s["name"]) for s in d["streams"]]
    return infer_streams(data)


def load_seeds(max_bytes: int = 8192) -> list[tuple[str, bytes, list[StreamSpec]]]:
    seeds = []
    paths = sorted(CORPUS.glob("*.ctf"))
    for p in paths:
        data = p.read_bytes()
        oracle = ORACLE / p.name
        specs = _streams_for(oracle if oracle.exists() else p, data)
        seeds.append((p.name, data, specs))
    return seeds


SEEDS = load_seeds()
SEED_NAMES = [s[0] for s in SEEDS]
GENERIC_STREAMS = [StreamSpec("a", "dense", 3), StreamSpec("b", "sparse", 10, "b")]

# byte strings that tend to hit the parser's edges
TOKENS = [
    b"\x00", b"\r", b"\r\n", b"\n", b"\n\n", b"|", b"||", b":", b"::", b" ", b"\t", b"|#", b"|# c\n",
    b"-", b"+", b".", b"e", b"E", b"e-", b"1e", b"1e+", b"-.", b"+-1", b"nan", b"inf", b"-inf", b"0x1p3",
    b"9" * 400, b"1" + b"0" * 40, b"0." + b"0" * 400 + b"1", b"1e99999", b"1e-99999", b"-1e308", b"4.9e-324",
    b"18446744073709551615", b"18446744073709551616", b"99999999999999999999999",
    b"4294967295:1", b"4294967296:1", b"2147483647:1", b"2147483648:1", b"-1:1", b"1:", b":1", b"1:1:1",
    b"9223372036854775807 ", b"18446744073709551615 |a 1", b"0 |a 1 2 3", b"|a", b"|b", b"|a ", b"|b 1:1",
    b"\xef\xbb\xbf", b"\xff\xfe", b"\xff", b"\x80", b"\xc3\xa9",
    b"|a " + b"1 " * 2000, b"|b " + b"1:1 " * 1000, b"x" * 5000, b" " * 3000, b"\n" * 500,
]


@st.composite
def mutated(draw, allow_splice_from=None):
    """A seed with 1..8 byte-level mutations."""
    k = draw(st.integers(0, len(SEEDS) - 1))
    name, data, specs = SEEDS[k]
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        op = draw(st.sampled_from(["flip", "set", "truncate", "insert", "token", "delete", "dup", "splice",
                                   "crlf", "lf", "nul"]))
        n = len(buf)
        pos = draw(st.integers(0, max(n, 0)))
        if op == "flip" and n:
            i = min(pos, n - 1)
            buf[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "set" and n:
            buf[min(pos, n - 1)] = draw(st.integers(0, 255))
        elif op == "truncate":
            del buf[pos:]
        elif op == "insert":
            buf[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        elif op == "token":
            buf[pos:pos] = draw(st.sampled_from(TOKENS))
        elif op == "delete":
            del buf[pos:pos + draw(st.integers(1, 64))]
        elif op == "dup":
            ln = draw(st.integers(1, 200))
            buf[pos:pos] = buf[pos:pos + ln] * draw(st.integers(1, 20))
        elif op == "splice":
            other = SEEDS[draw(st.integers(0, len(SEEDS) - 1))][1]
            j = draw(st.integers(0, len(other)))
            buf = buf[:pos] + bytearray(other[j:j + draw(st.integers(1, 2000))])
        elif op == "crlf":
            buf = bytearray(bytes(buf).replace(b"\n", b"\r\n", draw(st.integers(1, 50))))
        elif op == "lf":
            buf = bytearray(bytes(buf).replace(b"\n", b"\r", draw(st.integers(1, 50))))
        elif op == "nul":
            buf[pos:pos] = b"\x00" * draw(st.integers(1, 16))
    return name, bytes(buf), specs


# -- the contract ---------------------------------------------------------------------------------

def check_error(exc: RecordkitError, path: str) -> None:
    """Every error must be recordkit's own; a FormatError names the file and a position."""
    assert isinstance(exc, RecordkitError), f"{type(exc).__name__}: {exc}"
    if isinstance(exc, FormatError):
        assert exc.path == str(path), (exc.path, path)
        assert str(path) in str(exc), str(exc)
        assert exc.line is not None or exc.offset is not None, f"error without a position: {exc}"


def read_ctf(path: str, specs, *, max_errors: int, skip_ids: bool, chunk_size: int, threads: int,
             whole: bool = True) -> int:
    """Read every chunk (touching every sequence); return the number of sequences.

    Raises only what the reader raises; callers decide what is allowed."""
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = CTFReader(path, specs, max_errors=max_errors, skip_sequence_ids=skip_ids, chunk_size=chunk_size)
        try:
            for chunk in r.iter_chunks(threads=threads, whole=whole):
                for seq in chunk:
                    n += 1
            if threads > 1 and r.chunks:
                r.load_chunk(len(r.chunks) - 1, threads=threads)
        finally:
            r.close()
    return n


def run_contract(data: bytes, specs, *, max_errors: int, skip_ids: bool, chunk_size: int, threads: int,
                 whole: bool = True) -> None:
    with tempfile.TemporaryDirectory(prefix="rk-fuzz-ctf-") as d:
        path = os.path.join(d, "input.ctf")
        with open(path, "wb") as f:
            f.write(data)
        t0 = time.monotonic()
        faulthandler.dump_traceback_later(WATCHDOG_S, exit=True)
        try:
            read_ctf(path, specs, max_errors=max_errors, skip_ids=skip_ids, chunk_size=chunk_size,
                     threads=threads, whole=whole)
        except RecordkitError as e:
            check_error(e, path)
        except Exception as e:  # noqa: BLE001 - anything else breaks the contract
            pytest.fail(f"{type(e).__name__} (not a RecordkitError) for input {data[:300]!r}"
                        f"{'...' if len(data) > 300 else ''} with max_errors={max_errors} "
                        f"skip_sequence_ids={skip_ids} chunk_size={chunk_size} threads={threads}: {e!r}")
        finally:
            faulthandler.cancel_dump_traceback_later()
        elapsed = time.monotonic() - t0
        assert elapsed < SLOW_EXAMPLE_S, f"{elapsed:.1f}s on {len(data)} bytes: {data[:200]!r}"


RUN_OPTIONS = dict(
    max_errors=st.sampled_from([0, 1, 1000]),
    skip_ids=st.booleans(),
    chunk_size=st.sampled_from([1, 7, 32, 100, 1 << 20]),
    threads=st.sampled_from([1, 2, 3]),
)


# -- tests ------------------------------------------------------------------------------------

def test_seeds_read_cleanly():
    """The unmutated corpus is the baseline: every seed reads under its own streams."""
    assert SEEDS, f"no seeds in {CORPUS}"
    for name, data, specs in SEEDS:
        for threads, chunk in ((1, 1 << 20), (2, 16)):
            run_contract(data, specs, max_errors=1000, skip_ids=False, chunk_size=chunk, threads=threads)


@fuzz_settings(2000)
@given(case=mutated(), **RUN_OPTIONS)
def test_mutated_seeds(memory_guard, case, max_errors, skip_ids, chunk_size, threads):
    name, data, specs = case
    run_contract(data, specs, max_errors=max_errors, skip_ids=skip_ids, chunk_size=chunk_size, threads=threads)


@fuzz_settings(1000)
@given(case=mutated(), chunk_size=st.sampled_from([1, 5, 64]), max_errors=st.sampled_from([0, 1000]))
def test_mutated_seeds_generic_streams_pieces(memory_guard, case, chunk_size, max_errors):
    """Streams that do not match the file, pieces yielded as they are (``whole=False``)."""
    _, data, _ = case
    run_contract(data, GENERIC_STREAMS, max_errors=max_errors, skip_ids=False, chunk_size=chunk_size,
                 threads=2, whole=False)


@fuzz_settings(1000)
@given(data=st.one_of(
    st.binary(max_size=512),
    st.lists(st.sampled_from(TOKENS + [b"1", b"2", b"0", b"a", b"b", b" |a 1 2 3", b" |b 3:1"]), max_size=40)
      .map(b"".join),
), **RUN_OPTIONS)
def test_random_bytes(memory_guard, data, max_errors, skip_ids, chunk_size, threads):
    run_contract(data, GENERIC_STREAMS, max_errors=max_errors, skip_ids=skip_ids, chunk_size=chunk_size,
                 threads=threads)


@pytest.mark.parametrize("text", [
    b"|a 1 2 3\n" * 3 + b"|a " + b"7" * 100000 + b"\n",            # one huge number
    b"|a " + b"1 " * 200000 + b"\n",                                   # far too many values on a line
    b"|b " + b"1:1 " * 100000 + b"\n",                                 # a long sparse sample
    b"|a 1 2 3" + b"x" * (5 << 20) + b"\n|a 1 2 3\n",                  # a line longer than the scan block
    b"0 |a 1 2 3\n" + b"0 |a 1 2 3\r\n" * 2000,                        # one long sequence, CRLF mix
    b"".join(b"%d |a 1 2 3\n" % (i % 7) for i in range(3000)),          # ids reused non-adjacently
    b"18446744073709551615 |a 1 2 3\n18446744073709551616 |a 1 2 3\n",  # id at/after 2^64
    b"|b 18446744073709551615:1 18446744073709551616:2 9223372036854775808:3\n",
    b"\x00" * 10000,
    b"|" * 10000 + b"\n",
    b"\r" * 10000,
    b"|a 1e400 -1e400 1e-400\n|a nan inf -inf\n",
])
@pytest.mark.parametrize("max_errors", [0, 1000])
def test_extreme_inputs(memory_guard, text, max_errors):
    for skip_ids in (False, True):
        for threads, chunk in ((1, 1 << 20), (2, 64)):
            run_contract(text, GENERIC_STREAMS, max_errors=max_errors, skip_ids=skip_ids, chunk_size=chunk,
                         threads=threads)


def _shared_seeds(limit: int = 12_000):
    if not SHARED.is_dir():
        return []
    return sorted(p for p in SHARED.glob("*.txt") if p.stat().st_size <= limit)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} not present")
@fuzz_settings(400)
@given(data=st.data(), max_errors=st.sampled_from([0, 1000]), threads=st.sampled_from([1, 2]))
def test_mutated_shared_cntk_files(memory_guard, data, max_errors, threads):
    """The CNTK conformance inputs, read in place and mutated (bit flips, truncation, tokens)."""
    paths = _shared_seeds()
    p = data.draw(st.sampled_from(paths))
    raw = bytearray(p.read_bytes())
    specs = infer_streams(bytes(raw))
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(raw)))
        op = data.draw(st.sampled_from(["flip", "truncate", "token"]))
        if op == "flip" and pos < len(raw):
            raw[pos] ^= 1 << data.draw(st.integers(0, 7))
        elif op == "truncate":
            del raw[pos:]
        else:
            raw[pos:pos] = data.draw(st.sampled_from(TOKENS))
    run_contract(bytes(raw), specs, max_errors=max_errors, skip_ids=data.draw(st.booleans()),
                 chunk_size=data.draw(st.sampled_from([16, 512, 1 << 20])), threads=threads)
