"""Regenerate the CTF golden files from CNTK 2.7 (the oracle).

    /work/shared/tools/cntk-oracle python tools/oracle/ctf_golden.py [CASE ...]

Runs under the oracle's Python 3.6 (keep it 3.6-compatible). For every
tests/data/ctf_oracle/inputs/<case>.ctf with its sidecar <case>.json it reads the file with
CNTK's C++ CTF reader (MinibatchSource(CTFDeserializer(...), randomize=False, max_sweeps=1),
next_minibatch(1), so each minibatch is exactly one sequence; as_sequences() per stream,
sparse streams densified) and writes tests/data/ctf_oracle/expected/<case>.json.

What a golden holds (see tools/oracle/README.md):
  sequences       per sequence, per stream name: list of samples, each a list of dim values.
                  float precision: CNTK's float32 values, verbatim.
                  double precision: CNTK's Python API can only deliver float32 (the composite
                  MinibatchSource forces precision=float), so these are the correctly rounded
                  doubles float(text) from reference_parse() below, and cntk_float32 holds what
                  CNTK delivered; every double cast to float32 is checked against it.
  cntk_float32    (double cases only) CNTK's float32 values.
  differences     values where CNTK differs from correct rounding (np.float32(float(text)) for
                  float): position, the text, CNTK's value and the correctly rounded value.
                  recordkit is expected to produce the correctly rounded value there.
  spec_keys       sequence keys per the spec (line number in line mode, the id in id mode),
                  from reference_parse(): CNTK's Python API does not expose keys.
  cntk_stderr     CNTK's warnings while reading (messages name the path relative to the repo).
  error           instead of sequences, when CNTK throws: the message (call stack removed).

The reference parser is independent of recordkit: a direct transcription of
shared spec section 2.6/2.7 (lexing only; the arithmetic is Python's correctly rounded float()).
Its sample structure must agree with CNTK's on every case or this script fails.
"""
import glob
import hashlib
import json
import os
import re
import sys
import tempfile
import warnings

import numpy as np

warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join("tests", "data", "ctf_oracle")
INPUTS = os.path.join(DATA, "inputs")
EXPECTED = os.path.join(DATA, "expected")

# ----------------------------------------------------------------------------------------------
# Reference lexer/parser (spec 2.2, 2.3, 2.6, 2.7), for valid inputs plus dropped samples.

NL, BAR, HASH, COLON = 0x0A, 0x7C, 0x23, 0x3A
NUMBER = re.compile(rb"[+-]?[0-9]+(?:\.[0-9]+(?:[eE][+-]?[0-9]+)?|\.|[eE][+-]?[0-9]+)?")
DIGITS = re.compile(rb"[0-9]+")


def is_value_delim(c):
    return c == 0x20 or c == 0x09


def is_printable(c):
    return 0x20 <= c < 0x80


def is_column_delim(c):
    return is_value_delim(c) or (not is_printable(c) and c != NL)


def _skip_to_next_input(b, i, end):
    while i < end and b[i] != BAR and b[i] != NL:
        i += 1
    return i


def _parse_row(b, i, end, streams_by_alias, out):
    """Parse one row starting at i; append samples to out[name]; return the index after the row."""
    while i < end and 0x30 <= b[i] <= 0x39:  # sequence id (skipped in line mode too)
        i += 1
    while i < end:
        c = b[i]
        if c == NL:
            return i + 1
        if is_column_delim(c):
            i += 1
            continue
        if c != BAR:
            out.setdefault("__errors__", []).append("unexpected %r" % chr(c))
            i = _skip_to_next_input(b, i, end)
            continue
        i += 1
        if i < end and b[i] == HASH:
            i = _skip_to_next_input(b, i + 1, end)
            continue
        j = i
        while j < end and not (is_value_delim(b[j]) or b[j] == BAR or not is_printable(b[j])):
            j += 1
        name = b[i:j].decode("ascii")
        i = j
        spec = streams_by_alias.get(name)
        if spec is None:  # unknown (or empty) name: skipped
            if not name:
                out.setdefault("__errors__", []).append("empty name")
            i = _skip_to_next_input(b, i, end)
            continue
        sample, ok = [], True
        while True:
            while i < end and is_value_delim(b[i]):
                i += 1
            if i >= end or b[i] == BAR or not is_printable(b[i]):
                break
            if spec["format"] == "sparse":
                m = DIGITS.match(b, i)
                if not m or m.end() >= end or b[m.end()] != COLON:
                    ok = False
                    break
                idx = int(m.group())
                n = NUMBER.match(b, m.end() + 1)
                if not n or idx >= spec["dim"]:
                    ok = False
                    break
                sample.append((idx, n.group().decode("ascii")))
                i = n.end()
            else:
                n = NUMBER.match(b, i)
                if not n:
                    ok = False
                    break
                sample.append(n.group().decode("ascii"))
                i = n.end()
        if ok and spec["format"] == "dense" and len(sample) > spec["dim"]:
            ok = False
        if not ok:
            out.setdefault("__errors__", []).append("dropped %s sample" % name)
            i = _skip_to_next_input(b, i, end)
            continue
        out.setdefault(spec["name"], []).append(sample)
    return i


def reference_parse(data, streams, skip_ids):
    """[(key, {stream name: [sample, ...]})]; dense sample = [text, ...], sparse = [(index, text), ...]."""
    b = bytearray(data)
    i, line = 0, 0
    if b[:3] == b"\xef\xbb\xbf":
        i = 3
    while i < len(b) and b[i] in b" \t\n\r\x0b\x0c":
        line += b[i] == NL
        i += 1
    line_mode = skip_ids or b[i] == BAR
    by_alias = dict((s["alias"], s) for s in streams)
    # split the rest into (line number, start, end-after-newline)
    rows = []
    while i < len(b):
        j = b.find(b"\n", i)
        j = len(b) if j < 0 else j + 1
        rows.append((line, i, j))
        line += 1
        i = j
    seqs = []
    if line_mode:
        for ln, s, e in rows:
            out = {}
            _parse_row(b, s, e, by_alias, out)
            seqs.append((ln, out))
        return seqs
    cur_id, out = None, None
    for ln, s, e in rows:
        m = DIGITS.match(b, s)
        if m and m.end() < len(b):
            rid = int(m.group())
            if rid != cur_id or out is None:
                out = {}
                seqs.append((rid, out))
                cur_id = rid
        elif out is None:
            raise ValueError("reference: first line has no id")
        _parse_row(b, s, e, by_alias, out)
    return seqs


def reference_values(samples, spec, dtype):
    """Samples of one stream -> (values ndarray (n, dim) in dtype, texts [[text or None]])."""
    n, d = len(samples), spec["dim"]
    vals = np.zeros((n, d), dtype=dtype)
    texts = [[None] * d for _ in range(n)]
    for r, sample in enumerate(samples):
        if spec["format"] == "dense":
            for c, t in enumerate(sample):
                vals[r, c] = dtype(float(t))
                texts[r][c] = t
        else:
            for idx, t in sample:  # duplicates are summed in the target precision, in file order
                vals[r, idx] = dtype(vals[r, idx] + dtype(float(t)))
                texts[r][idx] = t if texts[r][idx] is None else texts[r][idx] + " + " + t
    return vals, texts


# ----------------------------------------------------------------------------------------------
# CNTK side

class CaptureStderr(object):
    """Capture C++ writes to fd 2."""

    def __enter__(self):
        sys.stderr.flush()
        self.tmp = tempfile.TemporaryFile()
        self.saved = os.dup(2)
        os.dup2(self.tmp.fileno(), 2)
        return self

    def __exit__(self, *exc):
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.tmp.seek(0)
        text = self.tmp.read().decode("utf-8", "replace")
        self.tmp.close()
        self.lines = [ln for ln in text.splitlines()
                      if ln.strip() and not ln.startswith("Selected CPU as the process wide default device")]
        return False


def clean_message(msg):
    msg = str(msg)
    for cut in ("\n\n[CALL STACK]", "[CALL STACK]"):
        if cut in msg:
            msg = msg.split(cut)[0]
    return msg.strip()


def read_with_cntk(cntk, rel_path, spec):
    from cntk.io import MinibatchSource, CTFDeserializer, StreamDef, StreamDefs
    streams = spec["streams"]
    defs = {}
    for s in streams:
        defs[s["name"]] = StreamDef(field=s["alias"], shape=s["dim"], is_sparse=s["format"] == "sparse")
    variables = {}
    for s in streams:
        variables[s["name"]] = cntk.sequence.input_variable(s["dim"], is_sparse=s["format"] == "sparse")
    d = CTFDeserializer(rel_path, StreamDefs(**defs))
    d["maxErrors"] = int(spec.get("max_errors", 0))
    if spec.get("skip_sequence_ids"):
        d["skipSequenceIds"] = True
    src = MinibatchSource(d, randomize=False, max_sweeps=1, max_errors=int(spec.get("max_errors", 0)))
    info = dict((si.m_name, si) for si in src.stream_infos())
    seqs = []
    while True:
        mb = src.next_minibatch(1)
        if not mb:
            break
        seq = {}
        for s in streams:
            v = mb[info[s["name"]]]
            if v.num_sequences != 1:
                raise RuntimeError("expected one sequence per minibatch, got %d" % v.num_sequences)
            if s["format"] == "sparse":
                (m,) = v.as_sequences(variables[s["name"]])
                arr = np.array(m.toarray(), dtype=np.float32, copy=True)
            else:
                (arr,) = v.as_sequences()
                arr = np.array(arr, dtype=np.float32, copy=True).reshape(-1, s["dim"])
            seq[s["name"]] = arr
            del v
        seqs.append(seq)
        # Drop every reference into the minibatch before asking for the next one: CNTK's
        # prefetch thread reuses the buffers and fails with "Cannot resize the matrix because
        # it is a view" if Python still holds one.
        del mb
    return seqs


def read_with_cntk_retrying(cntk, rel_path, spec, attempts=3):
    for k in range(attempts):
        try:
            return read_with_cntk(cntk, rel_path, spec)
        except Exception as e:
            if "because it is a view" not in str(e) or k == attempts - 1:
                raise


def direct_float32(text):
    """The float32 nearest to the decimal text itself (no intermediate double), ties to even.

    Only recorded for information: the expectation is np.float32(float(text)) (double then cast,
    CNTK's own order); the two differ only when the double lands exactly halfway between floats.
    """
    from fractions import Fraction
    exact = Fraction(text) if "+" not in text else Fraction(text.replace(" ", "").split("+")[0])
    f = np.float32(float(text.split(" + ")[0]))
    cands = set([f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))])
    best = None
    for cnd in cands:
        if np.isinf(cnd):
            lim = Fraction(2) ** 128 * (1 if cnd > 0 else -1)  # rounding to inf: as if 2^128 were a float
            dist = abs(lim - exact)
        else:
            dist = abs(Fraction(float(cnd)) - exact)
        key = (dist, int(np.array(cnd, dtype=np.float32).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, cnd)
    return float(best[1])


def bits_equal(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return np.zeros(a.shape if a.size >= b.size else b.shape, dtype=bool)
    itype = np.uint32 if a.dtype == np.float32 else np.uint64
    same = a.view(itype) == b.view(itype)
    return same | (np.isnan(a) & np.isnan(b))


def tolist(arr):
    return [[float(x) for x in row] for row in np.asarray(arr).tolist()]


def make_golden(cntk, name):
    ctf = os.path.join(INPUTS, name + ".ctf")
    with open(os.path.join(INPUTS, name + ".json")) as f:
        spec = json.load(f)
    with open(ctf, "rb") as f:
        data = f.read()
    precision = spec.get("precision", "float")
    golden = {
        "case": name,
        "input": name + ".ctf",
        "input_sha256": hashlib.sha256(data).hexdigest(),
        "spec": spec,
        "oracle": "CNTK %s cntk.io MinibatchSource/CTFDeserializer, randomize=False, max_sweeps=1, next_minibatch(1)"
                  % cntk.__version__,
    }
    error = None
    with CaptureStderr() as cap:
        try:
            cntk_seqs = read_with_cntk_retrying(cntk, ctf, spec)
        except Exception as e:  # CNTK throws RuntimeError/ValueError with a C++ message
            error = clean_message(e)
    # CNTK retries a failing load 5 times; keep the first attempt's messages only.
    lines = []
    for ln in cap.lines:
        if ln.startswith("attempt: "):
            continue
        lines.append(ln)
        if ln.startswith("About to throw exception"):
            break
    golden["cntk_stderr"] = lines
    if error is not None:
        golden["error"] = error
        return golden

    ref = reference_parse(data, spec["streams"], bool(spec.get("skip_sequence_ids")))
    problems = []
    if len(ref) != len(cntk_seqs):
        problems.append("sequence count: reference %d, CNTK %d" % (len(ref), len(cntk_seqs)))
    dtype = np.float64 if precision == "double" else np.float32
    expected_seqs, differences = [], []
    for si, (seq, (key, rseq)) in enumerate(zip(cntk_seqs, ref)):
        exp = {}
        for s in spec["streams"]:
            nm = s["name"]
            rvals, texts = reference_values(rseq.get(nm, []), s, dtype)
            cvals = seq[nm]
            if rvals.shape != cvals.shape:
                problems.append("seq %d stream %s: reference shape %s, CNTK %s" % (si, nm, rvals.shape, cvals.shape))
                exp[nm] = tolist(cvals)
                continue
            same = bits_equal(rvals.astype(np.float32), cvals)
            for r, c in zip(*np.nonzero(~same)):
                if texts[r][c] is None:
                    problems.append("seq %d stream %s [%d,%d]: CNTK %r where the reference has no value"
                                    % (si, nm, r, c, float(cvals[r, c])))
                    continue
                differences.append({"sequence": si, "stream": nm, "sample": int(r), "column": int(c),
                                    "text": texts[r][c], "cntk": float(cvals[r, c]),
                                    "expected": float(rvals[r, c])})
                if precision != "double":
                    differences[-1]["direct_float32"] = direct_float32(texts[r][c])
            exp[nm] = tolist(rvals if precision == "double" else cvals)
        expected_seqs.append(exp)
    if problems:
        raise RuntimeError("%s: reference parser and CNTK disagree on structure:\n  %s" % (name, "\n  ".join(problems)))
    golden["sequences"] = expected_seqs
    if precision == "double":
        golden["cntk_float32"] = [dict((k, tolist(v)) for k, v in s.items()) for s in cntk_seqs]
        golden["sequences_source"] = ("correctly rounded float(text) (CNTK's Python API delivers float32 only); "
                                      "float32 casts checked against cntk_float32 except 'differences'")
    else:
        golden["sequences_source"] = "CNTK float32 output; at 'differences' recordkit should give 'expected'"
    golden["differences"] = differences
    golden["spec_keys"] = [str(k) for k, _ in ref]
    return golden


def main(argv):
    os.chdir(REPO)  # CNTK messages then name the input as tests/data/ctf_oracle/inputs/<case>.ctf
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        import cntk
    finally:
        sys.stdout = saved
    names = argv or sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(INPUTS, "*.ctf")))
    if not os.path.isdir(EXPECTED):
        os.makedirs(EXPECTED)
    failed = 0
    for name in names:
        try:
            golden = make_golden(cntk, name)
        except Exception as e:
            failed += 1
            print("FAILED %s: %s" % (name, e))
            continue
        with open(os.path.join(EXPECTED, name + ".json"), "w") as f:
            json.dump(golden, f, indent=1, sort_keys=False)
            f.write("\n")
        if "error" in golden:
            status = "error: %s" % golden["error"].splitlines()[0][:90]
        else:
            status = "%d sequences, %d differences" % (len(golden["sequences"]), len(golden["differences"]))
        print("%-28s %s" % (name, status))
        for d in golden.get("differences", []):
            print("    seq %d %s[%d,%d] %-28s CNTK %r  correctly rounded %r"
                  % (d["sequence"], d["stream"], d["sample"], d["column"], d["text"], d["cntk"], d["expected"]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
