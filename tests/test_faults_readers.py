"""Readers on files that change under them: truncated or grown after the reader opened them.

Contract (for every reader): a file that shrinks after open gives a ``RecordkitError``
naming the file, or a consistent snapshot (only whole records that were there); a file
that grows after open gives a snapshot of what was indexed at open (or an error); never a
crash of the process (SIGBUS from touching a truncated mmap past EOF), never silently
wrong data (a record cut short delivered as if it were whole).

Every case runs in a child process so a signal cannot take pytest down: the child prints
one ``RESULT {json}`` line and exits 0, or prints ``RKERR <message>`` and exits 0 when a
RecordkitError was raised; anything else (a signal, another exception) fails the test.
Files are several pages long and truncated to far fewer pages, so a reader that keeps a
stale mmap touches whole pages past EOF (the SIGBUS case, not the zero-filled tail page).

(Reproducers of the bugs these tests found, a SIGBUS from memory-mapped CBF/OFRecord reads and
SINGA tuples cut short by a truncation delivered as data, are now plain regression tests.)
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 120  # per child; each case takes about a second

PRELUDE = textwrap.dedent("""
    import json, os, sys, traceback
    import numpy as np
    from recordkit.errors import RecordkitError

    def done(result):
        print("RESULT " + json.dumps(result), flush=True)
        sys.exit(0)

    def shrink(path, size):
        with open(path, "r+b") as f:
            f.truncate(size)

    def grow(path, data):
        with open(path, "ab") as f:
            f.write(data)

    ARGS = json.loads(sys.argv[1])
""")

EPILOGUE_WRAP = """
try:
{body}
except RecordkitError as e:
    print("RKERR " + type(e).__name__ + ": " + str(e).replace(chr(10), " "), flush=True)
    sys.exit(0)
"""


def run_child(body: str, **args):
    """Run ``body`` (indented into a try block) in a fresh interpreter; return ('result', obj) or
    ('error', message). Fails the test on a signal, a non-Recordkit exception or a hang."""
    code = PRELUDE + EPILOGUE_WRAP.format(body=textwrap.indent(textwrap.dedent(body), "    "))
    env = dict(os.environ)
    env["PYTHONFAULTHANDLER"] = "1"
    try:
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(args)], capture_output=True, text=True,
                              timeout=TIMEOUT, cwd=str(REPO), env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reader hung (> {TIMEOUT}s)")
    out, err = proc.stdout, proc.stderr
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        pytest.fail(f"child killed by {sig} (a crash, not a RecordkitError)\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    if proc.returncode != 0:
        pytest.fail(f"child exited {proc.returncode} without a RecordkitError\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    for line in out.splitlines():
        if line.startswith(("RESULT ", "RKERR ")):
            if os.environ.get("RK_FAULT_LOG"):  # outcome log for reports: RK_FAULT_LOG=/tmp/x.log pytest ...
                with open(os.environ["RK_FAULT_LOG"], "a") as log:
                    log.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}  {line[:300]}\n")
        if line.startswith("RESULT "):
            return "result", json.loads(line[7:])
        if line.startswith("RKERR "):
            return "error", line[6:]
    pytest.fail(f"child printed no result\nstdout:\n{out}\nstderr:\n{err[-3000:]}")


def assert_error_names(message: str, path) -> None:
    assert os.path.basename(str(path)) in message, f"error does not name the file: {message}"


# ---------------------------------------------------------------------------------------------
# CTF: indexed at open, chunks read with pread
# ---------------------------------------------------------------------------------------------
CTF_SEQS = 400


def make_ctf(path: Path) -> list[list[float]]:
    """CTF_SEQS sequences of 2 rows, ~150 bytes each (about 60 KB: many pages, several chunks)."""
    rows, expect = [], []
    for i in range(CTF_SEQS):
        vals = [float(i), float(i) + 0.5, float(-i), 1.25, 2.5, 3.75, 5.0, 6.25]
        row = " ".join(f"{v:.2f}" for v in vals)
        rows.append(f"{i} |x {row}\n{i} |x {row}\n")
        expect.append(vals)
    path.write_text("".join(rows))
    return expect


CTF_BODY = """
from recordkit import StreamSpec
from recordkit.formats.ctf import CTFReader
path = ARGS["path"]
r = CTFReader(path, [StreamSpec("x", "dense", 8)], chunk_size=4096)
nchunks = len(r.chunks)
if ARGS["op"] == "truncate":
    shrink(path, ARGS["size"])
elif ARGS["op"] == "grow":
    grow(path, ARGS["data"].encode())
elif ARGS["op"] == "rewrite":  # same size, different (and broken) contents
    with open(path, "r+b") as f:
        f.write(b"#" * os.path.getsize(path))
firsts = []
if ARGS["mode"] == "iter":
    for c in r.iter_chunks(threads=ARGS.get("threads", 2)):
        for s in c:
            firsts.append(s.data["x"][:, 0].tolist())
else:
    for k in range(nchunks):
        for s in r.load_chunk(k):
            firsts.append(s.data["x"][:, 0].tolist())
done({"nchunks": nchunks, "firsts": firsts})
"""


@pytest.mark.parametrize("mode", ["iter", "load"])
@pytest.mark.parametrize("size", [0, 1000, "mid-line"], ids=["to-0", "to-1000", "mid-line"])
def test_ctf_truncated_after_open(tmp_path, mode, size):
    p = tmp_path / "d.ctf"
    make_ctf(p)
    full = p.stat().st_size
    if size == "mid-line":
        size = full // 2 + 7
    kind, got = run_child(CTF_BODY, path=str(p), op="truncate", size=size, mode=mode)
    assert kind == "error", f"truncated file read without an error: {len(got['firsts'])} sequences"
    assert_error_names(got, p)
    assert "shrank" in got or "truncat" in got.lower()


@pytest.mark.parametrize("mode", ["iter", "load"])
def test_ctf_grown_after_open_reads_the_snapshot(tmp_path, mode):
    p = tmp_path / "d.ctf"
    expect = make_ctf(p)
    extra = "".join(f"{i} |x 9 9 9 9 9 9 9 9\n" for i in range(CTF_SEQS, CTF_SEQS + 50))
    kind, got = run_child(CTF_BODY, path=str(p), op="grow", data=extra, mode=mode)
    assert kind == "result", got
    assert got["firsts"] == [[v[0], v[0]] for v in expect]


def test_ctf_grown_on_the_last_sequence_reads_the_snapshot(tmp_path):
    """Appending rows that continue the last sequence (same id) after open: the indexed size wins."""
    p = tmp_path / "d.ctf"
    expect = make_ctf(p)
    extra = f"{CTF_SEQS - 1} |x 7 7 7 7 7 7 7 7\n"
    kind, got = run_child(CTF_BODY, path=str(p), op="grow", data=extra, mode="load")
    assert kind == "result", got
    assert got["firsts"] == [[v[0], v[0]] for v in expect]


def test_ctf_rewritten_in_place_is_an_error_not_a_crash(tmp_path):
    """Same size, contents replaced: the index no longer matches; must be an error (or data the
    parser accepts), never a crash."""
    p = tmp_path / "d.ctf"
    make_ctf(p)
    kind, got = run_child(CTF_BODY, path=str(p), op="rewrite", mode="iter")
    if kind == "error":
        assert_error_names(got, p)


# ---------------------------------------------------------------------------------------------
# CBF: header + offset table read at open, chunks decoded by the kernel (mmap today)
# ---------------------------------------------------------------------------------------------
def make_cbf(path: Path) -> list[float]:
    from recordkit import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    firsts = []
    with CBFWriter(path, [StreamSpec("x", "dense", 64), StreamSpec("y", "sparse", 1000)], chunk_size=8192) as w:
        for i in range(300):
            n = 1 + i % 5
            x = np.full((n, 64), float(i), np.float32)
            import scipy.sparse as sp
            y = sp.csr_matrix((np.ones(n), (np.arange(n), (np.arange(n) * 7 + i) % 1000)), shape=(n, 1000))
            w.write({"x": x, "y": y})
            firsts.append(float(i))
    return firsts


CBF_BODY = """
from recordkit.formats.cbf import CBFReader
path = ARGS["path"]
r = CBFReader(path)
nchunks = len(r.chunks)
if ARGS["op"] == "truncate":
    shrink(path, ARGS["size"])
elif ARGS["op"] == "grow":
    grow(path, bytes(ARGS["grow"]))
firsts = []
if ARGS["mode"] == "lengths":
    out = [r.sequence_lengths(k).tolist() for k in range(nchunks)]
    done({"nchunks": nchunks, "lengths": out})
chunks = r.iter_chunks(threads=2) if ARGS["mode"] == "iter" else (r.load_chunk(k) for k in range(nchunks))
for c in chunks:
    for s in c:
        firsts.append(float(s.data["x"][0, 0]))
done({"nchunks": nchunks, "firsts": firsts})
"""

CBF_MMAP = ("CBFReader mmaps the file at open; a chunk past the new EOF is a whole page beyond it, and the "
            "kernel's read of the memoryview raises SIGBUS (expected to pass once the reader uses pread)")


@pytest.mark.parametrize("mode", ["load", "iter", "lengths"])
@pytest.mark.parametrize("size", ["header", "half"])
def test_cbf_truncated_after_open(tmp_path, mode, size):
    p = tmp_path / "d.cbf"
    make_cbf(p)
    full = p.stat().st_size
    assert full > 8 * 4096
    cut = 4096 if size == "header" else full // 2
    kind, got = run_child(CBF_BODY, path=str(p), op="truncate", size=cut, mode=mode)
    assert kind == "error", f"truncated file read without an error: {got if kind == 'error' else len(got)}"
    assert_error_names(got, p)


@pytest.mark.parametrize("mode", ["load", "iter"])
def test_cbf_grown_after_open_reads_the_snapshot(tmp_path, mode):
    p = tmp_path / "d.cbf"
    expect = make_cbf(p)
    kind, got = run_child(CBF_BODY, path=str(p), op="grow", grow=list(range(256)) * 64, mode=mode)
    assert kind == "result", got
    assert got["firsts"] == expect


# ---------------------------------------------------------------------------------------------
# OFRecord: parts indexed at open, payloads read from an mmap made on first use of a part
# ---------------------------------------------------------------------------------------------
OFR_RECORDS = 64
OFR_FLOATS = 1024  # 4 KB payloads: a record per page


def make_ofrecord(d: Path, parts: int = 2) -> list[Path]:
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    with OFRecordWriter(d, parts) as w:
        for i in range(OFR_RECORDS):
            w.write({"img": np.full(OFR_FLOATS, i, np.float32), "label": np.array([i], np.int32)})
    return sorted(x for x in d.iterdir() if x.name.startswith("part-"))


OFR_BODY = """
from recordkit.formats.ofrecord.reader import OFRecordReader
d = ARGS["dir"]
part = ARGS["part"]
r = OFRecordReader(d, batch_size=4, epochs=1)
if ARGS["when"] == "open":  # after open (index built), before the first read
    if ARGS["op"] == "truncate":
        shrink(part, ARGS["size"])
    else:
        grow(part, bytes(ARGS["grow"]))
if ARGS["api"] == "batches":
    it = r.batches({"img": ((ARGS["floats"],), np.float32), "label": ((), np.int32)})
else:
    it = iter(r)
labels, consistent, n = [], True, 0
for batch in it:
    n += 1
    if ARGS["api"] == "batches":
        lab = batch["label"].tolist()
        consistent &= bool((batch["img"] == batch["label"][:, None].astype(np.float32)).all())
    else:
        lab = []
        for rec in batch:
            lv = int(np.asarray(rec["label"].value if hasattr(rec["label"], "value") else rec["label"]).ravel()[0])
            iv = np.asarray(rec["img"].value if hasattr(rec["img"], "value") else rec["img"]).ravel()
            consistent &= bool(len(iv) == ARGS["floats"] and (iv == lv).all())
            lab.append(lv)
    labels += lab
    if ARGS["when"] == "mid" and n == 2:  # mid-iteration: the part is already mapped
        if ARGS["op"] == "truncate":
            shrink(part, ARGS["size"])
        else:
            grow(part, bytes(ARGS["grow"]))
done({"labels": labels, "consistent": consistent})
"""

OFR_MMAP = ("OFRecordReader reads payloads from an mmap of the part made on first use and slices it by the "
            "open-time index; a part truncated after that is read past EOF: SIGBUS (expected to pass once the "
            "reader uses pread)")


def _ofr_case(tmp_path, api, when, op, size=None):
    d = tmp_path / "ofr"
    parts = make_ofrecord(d)
    part = parts[0]
    if size == "small":
        size = 4096 + 100
    return part, run_child(OFR_BODY, dir=str(d), part=str(part), api=api, when=when, op=op, size=size,
                           grow=list(range(256)) * 40, floats=OFR_FLOATS)


def _check_truncated(part, kind, got):
    if kind == "error":
        assert_error_names(got, part)
        return
    # a snapshot is acceptable only if every record delivered is whole and correct
    assert got["consistent"], "records cut by the truncation were delivered as data"
    assert len(got["labels"]) == len(set(got["labels"]))


@pytest.mark.parametrize("api", ["records", "batches"])
@pytest.mark.parametrize("size", [0, "small"], ids=["to-0", "to-1-page"])
def test_ofrecord_truncated_after_open(tmp_path, api, size):
    """Truncated between open (index) and the first read: the part is mapped at its new size."""
    part, (kind, got) = _ofr_case(tmp_path, api, "open", "truncate", size)
    _check_truncated(part, kind, got)
    if kind == "result":  # must not deliver all records: the truncated part lost most of its
        assert len(got["labels"]) < OFR_RECORDS


@pytest.mark.parametrize("api", ["records", "batches"])
@pytest.mark.parametrize("size", [0, "small"], ids=["to-0", "to-1-page"])
def test_ofrecord_truncated_mid_iteration(tmp_path, api, size):
    part, (kind, got) = _ofr_case(tmp_path, api, "mid", "truncate", size)
    _check_truncated(part, kind, got)


@pytest.mark.parametrize("api", ["records", "batches"])
@pytest.mark.parametrize("when", ["open", "mid"])
def test_ofrecord_grown_reads_the_snapshot(tmp_path, api, when):
    part, (kind, got) = _ofr_case(tmp_path, api, when, "grow")
    assert kind == "result", got
    assert got["consistent"]
    assert sorted(got["labels"]) == list(range(OFR_RECORDS))


# ---------------------------------------------------------------------------------------------
# SINGA stores: buffered file reads, size taken at open
# ---------------------------------------------------------------------------------------------
SINGA_TUPLES = 200
SINGA_VALUE = 300


def make_singa(path: Path, kind: str) -> None:
    from recordkit.formats import singa
    with singa.open(str(path), "create", kind) as s:
        for i in range(SINGA_TUPLES):
            assert s.write(f"{i:06d}".encode(), bytes([i % 256]) * SINGA_VALUE)


SINGA_BODY = """
from recordkit.formats import singa
path = ARGS["path"]
s = singa.open(path, "read", ARGS["kind"])
keys, consistent, error, bad = [], True, None, []
try:
    while True:
        item = s.read()
        if item is None:
            break
        k, v = item
        i = int(k)
        if v != bytes([i % 256]) * ARGS["vlen"]:
            consistent = False
            bad.append([i, len(v)])
        keys.append(i)
        if len(keys) == ARGS["after"]:
            if ARGS["op"] == "truncate":
                shrink(path, ARGS["size"])
            else:
                grow(path, bytes(ARGS["grow"]))
except RecordkitError as e:  # an error is fine, but what was delivered before it must be whole
    error = type(e).__name__ + ": " + str(e)
s.close()
done({"keys": keys, "consistent": bool(consistent), "error": error, "bad": bad})
"""


def _singa_case(tmp_path, kind, op, size, after):
    p = tmp_path / f"s.{kind}"
    make_singa(p, kind)
    full = p.stat().st_size
    if size == "mid-value":
        size = full // 2 + 150  # tuple 100 starts at full // 2 (kvfile and binfile): this is inside its value
    return p, run_child(SINGA_BODY, path=str(p), kind=kind, op=op, size=size, after=after, vlen=SINGA_VALUE,
                        grow=list(range(256)) * 8)


SINGA_SHORT_READ = ("FramedStore checks each length against the size taken at open, then trusts f.read(n) to "
                    "return n bytes (kvfile.py _parse: key = f.read(klen); framed.py _take: f.read(n)): after a "
                    "truncation the tuple cut by it is delivered with a short value, and only the next read() "
                    "raises 'tuple cut short'")


@pytest.mark.parametrize("kind", ["kvfile", "binfile"])
@pytest.mark.parametrize("size", [0, "mid-value"], ids=["to-0", "mid-value"])
@pytest.mark.parametrize("after", [1, 20], ids=["after-1", "after-20"])
def test_singa_truncated_mid_iteration(tmp_path, kind, size, after, request):
    p, (kind_, got) = _singa_case(tmp_path, kind, "truncate", size, after)
    assert kind_ == "result"
    assert got["consistent"], f"tuples cut by the truncation were delivered as data: {got['bad']} [(key, length)]"
    if got["error"] is not None:
        assert_error_names(got["error"], p)
        return
    # Buffered reads may legitimately deliver what was already buffered (a snapshot) ...
    assert got["keys"] == list(range(len(got["keys"])))
    # ... but not the whole store as if nothing had happened, unless it was all in the buffer
    # (it is not: the store is ~60 KB, well beyond one read buffer).
    assert len(got["keys"]) < SINGA_TUPLES, "truncation went unnoticed: every tuple read"


@pytest.mark.parametrize("kind", ["kvfile", "binfile"])
def test_singa_grown_mid_iteration_reads_the_snapshot(tmp_path, kind):
    p, (kind_, got) = _singa_case(tmp_path, kind, "grow", None, 20)
    assert kind_ == "result", got
    assert got["consistent"]
    assert got["keys"] == list(range(SINGA_TUPLES))
