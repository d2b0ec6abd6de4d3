"""Regenerate the CBF golden files from CNTK 2.7 (the oracle).

    /work/shared/tools/cntk-oracle python tools/oracle/cbf_golden.py [CASE ...]

Runs under the oracle's Python 3.6 (keep it 3.6-compatible). Reads the manifest
tests/data/cbf_oracle/cases.json (written by tools/oracle/make_cbf_files.py) and, per case:

* parses the CBF file's layout with the small independent parser below (spec section 3.1) and
  records the header streams and the chunk table;
* reads the CBF file with CNTK's C++ binary reader:
  MinibatchSource(CBFDeserializer(path, StreamDefs(<name>=StreamDef(field=<name>, shape=dim,
  is_sparse=...))), randomize=False, max_sweeps=1), next_minibatch(1), so each minibatch is one
  sequence; as_sequences() per dense stream; sparse streams copied exactly (see sparse_to_csr);
* reads the CTF source (if the case has one) with CNTK's CTFDeserializer the same way, and
  records whether CNTK saw exactly the same thing (bitwise float32, densified) from both;
* writes tests/data/cbf_oracle/expected/<case>.json.

Every reference into a minibatch is dropped before the next next_minibatch (CNTK's prefetch
thread otherwise intermittently fails with "Resize: Cannot resize the matrix because it is a view").

CNTK's Python API only delivers float32 and its binary reader requires the file's element type to
match the configured precision, so double CBF files give {"error": ...}; for those the golden
also holds what CNTK read from the CTF source (float32), so a test can hold recordkit's float64
values, cast to float32, to it.
"""
import hashlib
import json
import os
import struct
import sys
import tempfile
import warnings

import numpy as np

warnings.filterwarnings("ignore")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join("tests", "data", "cbf_oracle")
SHARED = os.environ.get("RECORDKIT_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
# Goldens hold the values in readable JSON when the case is at most this many stored values;
# larger cases hold per-stream sha256 digests of the canonical bytes plus a readable preview.
MAX_INLINE_VALUES = 20000
PREVIEW_SEQUENCES = 3

MAGIC = 0x636e746b5f62696e


def resolve(path):
    return os.path.join(SHARED, path[len("shared:"):]) if path.startswith("shared:") else path


# ----------------------------------------------------------------------------------------------
# Independent CBF layout parser (spec 3.1), used for the header/chunk table and sanity checks.

def parse_cbf_layout(path):
    with open(path, "rb") as f:
        b = f.read()
    magic, version = struct.unpack_from("<QI", b, 0)
    if magic != MAGIC:
        raise ValueError("bad magic at 0")
    (hoff,) = struct.unpack_from("<q", b, len(b) - 8)
    magic2, nchunks, nstreams = struct.unpack_from("<QII", b, hoff)
    if magic2 != MAGIC:
        raise ValueError("bad magic at header")
    p = hoff + 16
    streams = []
    for _ in range(nstreams):
        enc, nlen = struct.unpack_from("<BI", b, p)
        p += 5
        name = b[p:p + nlen].decode("utf-8")
        p += nlen
        et, dim = struct.unpack_from("<BI", b, p)
        p += 5
        streams.append({"name": name, "format": ["dense", "sparse"][enc], "dim": dim,
                        "element_type": ["float32", "float64"][et]})
    table = []
    for _ in range(nchunks):
        off, nseq, nsamp = struct.unpack_from("<qII", b, p)
        p += 16
        table.append([off, nseq, nsamp])
    if p + 8 != len(b):
        raise ValueError("chunk table ends at %d, file size %d" % (p + 8, len(b)))
    # walk every chunk: prefix counts, then the streams; check the bytes add up
    seq_counts = []
    for k, (off, nseq, nsamp) in enumerate(table):
        end = table[k + 1][0] if k + 1 < nchunks else hoff
        counts = struct.unpack_from("<%dI" % nseq, b, off)
        if sum(counts) != nsamp:
            raise ValueError("chunk %d: prefix sums to %d, table says %d" % (k, sum(counts), nsamp))
        seq_counts.extend(counts)
        q = off + 4 * nseq
        esize = {"float32": 4, "float64": 8}
        for s in streams:
            for _ in range(nseq):
                (n,) = struct.unpack_from("<I", b, q)
                q += 4
                if s["format"] == "dense":
                    q += n * s["dim"] * esize[s["element_type"]]
                else:
                    (nnz,) = struct.unpack_from("<I", b, q)
                    q += 4 + nnz * (esize[s["element_type"]] + 4) + 4 * n
        if q != end:
            raise ValueError("chunk %d: data ends at %d, next part starts at %d" % (k, q, end))
    return {"version": version, "header_offset": hoff, "streams": streams, "chunks": table,
            "sequence_sample_counts": list(seq_counts)}


# ----------------------------------------------------------------------------------------------
# CNTK side

class CaptureStderr(object):
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


def sparse_to_csr(cntk, v, dim):
    """A sparse MinibatchData holding one sequence -> scipy CSR (n, dim) float32, exactly.

    Not as_sequences(): for sparse data it multiplies by np.eye(dim) (74 GiB for dim 100000, and
    arithmetic: -0 + 0 = +0, inf * 0 = nan). Instead the sparse NDArrayView is copied into a dense
    NDArrayView (NDArrayView::CopyFrom: a plain format conversion, no arithmetic). Entries are
    the cells whose float32 bit pattern is not +0.0 (so -0.0 and NaN are kept, explicit +0.0
    entries are not distinguishable from absent ones after CNTK's conversion).
    """
    import scipy.sparse
    nd = v.data.data
    dense = cntk.NDArrayView.from_dense(np.zeros(nd.shape, dtype=np.float32))
    dense.copy_from(nd)
    arr = np.array(dense.asarray(), dtype=np.float32, copy=True).reshape(-1, dim)
    del dense, nd
    if arr.shape[0] != v.num_samples:
        raise RuntimeError("sparse value has %d columns, %d samples" % (arr.shape[0], v.num_samples))
    return bits_csr(arr)


def bits_csr(arr):
    """CSR of the cells of a dense float32 array whose bit pattern is not +0.0."""
    import scipy.sparse
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    rows, cols = np.nonzero(arr.view(np.uint32) != 0)
    m = scipy.sparse.csr_matrix((arr[rows, cols], (rows, cols)), shape=arr.shape, dtype=np.float32)
    m.has_canonical_format = True
    return m


def read_with_cntk(cntk, deserializer, streams, max_errors=0):
    """[{name: ndarray (n, dim) float32 | scipy csr (n, dim)}] , one dict per sequence."""
    from cntk.io import MinibatchSource
    src = MinibatchSource(deserializer, randomize=False, max_sweeps=1, max_errors=max_errors)
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
                seq[s["name"]] = sparse_to_csr(cntk, v, s["dim"])
            else:
                (arr,) = v.as_sequences()
                seq[s["name"]] = np.array(arr, dtype=np.float32, copy=True).reshape(-1, s["dim"])
            del v
        seqs.append(seq)
        del mb  # see the module docstring
    del src
    return seqs


def retrying(fn, attempts=3):
    for k in range(attempts):
        try:
            return fn()
        except Exception as e:
            if "because it is a view" not in str(e) or k == attempts - 1:
                raise


def read_cbf(cntk, path, streams):
    from cntk.io import CBFDeserializer, StreamDef, StreamDefs
    defs = dict((s["name"], StreamDef(field=s["name"], shape=s["dim"], is_sparse=s["format"] == "sparse"))
                for s in streams)
    return retrying(lambda: read_with_cntk(cntk, CBFDeserializer(path, StreamDefs(**defs)), streams))


def read_ctf(cntk, path, source):
    from cntk.io import CTFDeserializer, StreamDef, StreamDefs
    streams = source["streams"]

    def once():
        defs = dict((s["name"], StreamDef(field=s["alias"], shape=s["dim"], is_sparse=s["format"] == "sparse"))
                    for s in streams)
        d = CTFDeserializer(path, StreamDefs(**defs))
        d["maxErrors"] = int(source.get("max_errors", 0))
        if source.get("skip_sequence_ids"):
            d["skipSequenceIds"] = True
        return read_with_cntk(cntk, d, streams, int(source.get("max_errors", 0)))
    return retrying(once)


# ----------------------------------------------------------------------------------------------
# Canonical form, JSON form, comparison (mirrored in tests/test_cbf_oracle_golden.py)

def canonical_csr(m):
    """CNTK's sparse readings are already canonical (bits_csr: sorted, unique, no +0.0 entries)."""
    return m


def canonical_bytes(value, fmt):
    """Bytes hashed per sequence: int64 n, then dense float32 (n, dim) C order, or sparse int64
    indptr, int32 indices, float32 values of the canonical CSR."""
    if fmt == "sparse":
        m = canonical_csr(value)
        return (struct.pack("<q", m.shape[0]) + np.asarray(m.indptr, dtype="<i8").tobytes()
                + np.asarray(m.indices, dtype="<i4").tobytes() + np.asarray(m.data, dtype="<f4").tobytes())
    a = np.ascontiguousarray(value, dtype="<f4")
    return struct.pack("<q", a.shape[0]) + a.tobytes()


def stream_digest(seqs, s):
    h = hashlib.sha256()
    for seq in seqs:
        h.update(canonical_bytes(seq[s["name"]], s["format"]))
    return h.hexdigest()


def to_json_value(value, fmt):
    if fmt == "sparse":
        m = canonical_csr(value)
        return {"samples": int(m.shape[0]), "indptr": [int(x) for x in m.indptr],
                "indices": [int(x) for x in m.indices], "values": [float(x) for x in m.data]}
    return [[float(x) for x in row] for row in np.asarray(value).tolist()]


def densify(value):
    import scipy.sparse
    if scipy.sparse.issparse(value):
        out = np.zeros(value.shape, dtype=np.float32)
        for r in range(value.shape[0]):
            a, b = value.indptr[r], value.indptr[r + 1]
            out[r, value.indices[a:b]] = value.data[a:b]  # canonical: unique indices, no arithmetic
        return out
    return np.asarray(value, dtype=np.float32)


def compare(seqs_a, seqs_b, streams, limit=20):
    """Differences (bitwise float32, densified; NaN == NaN) between two readings."""
    diffs = []
    if len(seqs_a) != len(seqs_b):
        diffs.append({"what": "sequence count", "cbf": len(seqs_a), "ctf": len(seqs_b)})
    for i, (a, b) in enumerate(zip(seqs_a, seqs_b)):
        for s in streams:
            x, y = densify(a[s["name"]]), densify(b[s["name"]])
            if x.shape != y.shape:
                diffs.append({"sequence": i, "stream": s["name"], "what": "shape",
                              "cbf": list(x.shape), "ctf": list(y.shape)})
                continue
            same = (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))
            for r, c in zip(*np.nonzero(~same)):
                diffs.append({"sequence": i, "stream": s["name"], "sample": int(r), "column": int(c),
                              "cbf": float(x[r, c]), "ctf": float(y[r, c])})
        if len(diffs) > limit:
            break
    return diffs


def stored_values(seqs, streams):
    return sum(int(np.prod(densify(q[s["name"]]).shape)) if s["format"] == "dense"
               else int(q[s["name"]].nnz) * 2 for q in seqs for s in streams)


def describe(seqs, streams, golden, key):
    """Store a reading: full values when small, else digests + preview."""
    golden[key + "_num_sequences"] = len(seqs)
    golden[key + "_sample_counts"] = dict((s["name"], [int(q[s["name"]].shape[0]) for q in seqs]) for s in streams)
    golden[key + "_sha256"] = dict((s["name"], stream_digest(seqs, s)) for s in streams)
    if stored_values(seqs, streams) <= MAX_INLINE_VALUES:
        golden[key] = [dict((s["name"], to_json_value(q[s["name"]], s["format"])) for s in streams) for q in seqs]
    else:
        golden[key + "_preview"] = [dict((s["name"], to_json_value(q[s["name"]], s["format"])) for s in streams)
                                    for q in seqs[:PREVIEW_SEQUENCES]]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_golden(cntk, case):
    path = resolve(case["cbf"])
    digest = sha256(path)
    if digest != case["cbf_sha256"]:
        raise RuntimeError("%s changed since make_cbf_files.py recorded it" % case["cbf"])
    layout = parse_cbf_layout(path)
    streams = [dict(name=s["name"], format=s["format"], dim=s["dim"]) for s in layout["streams"]]
    golden = {
        "case": case["case"], "kind": case["kind"], "cbf": case["cbf"], "cbf_sha256": digest,
        "source": case.get("source"),
        "oracle": "CNTK %s cntk.io MinibatchSource(CBFDeserializer), randomize=False, max_sweeps=1, next_minibatch(1)"
                  % cntk.__version__,
        "layout": {"version": layout["version"], "streams": layout["streams"], "num_chunks": len(layout["chunks"]),
                   "chunks": layout["chunks"], "sequence_sample_counts": layout["sequence_sample_counts"]},
    }
    error = None
    with CaptureStderr() as cap:
        try:
            cbf_seqs = read_cbf(cntk, path, streams)
        except Exception as e:
            error = clean_message(e)
    golden["cntk_stderr"] = [ln for ln in cap.lines if not ln.startswith("attempt: ")][:20]
    if error is None:
        describe(cbf_seqs, streams, golden, "sequences")
        if len(cbf_seqs) != len(layout["sequence_sample_counts"]):
            raise RuntimeError("CNTK read %d sequences, the chunk table has %d"
                               % (len(cbf_seqs), len(layout["sequence_sample_counts"])))
    else:
        golden["error"] = error
    src = case.get("source")
    if src:
        ctf_path = resolve(src["ctf"])
        if sha256(ctf_path) != src["ctf_sha256"]:
            raise RuntimeError("%s changed since make_cbf_files.py recorded it" % src["ctf"])
        with CaptureStderr():
            ctf_seqs = read_ctf(cntk, ctf_path, src)
        if error is None:
            diffs = compare(cbf_seqs, ctf_seqs, streams)
            golden["equals_cntk_ctf_reading"] = not diffs
            golden["cbf_vs_ctf_differences"] = diffs
        else:
            # the CBF is unreadable for CNTK's Python API (double); keep what CNTK read from the CTF
            describe(ctf_seqs, src["streams"], golden, "ctf_sequences")
    return golden


def dump_golden(golden):
    """JSON with one top-level key per line and one sequence per line (compact but diffable)."""
    parts = []
    for k, v in golden.items():
        if isinstance(v, list) and k in ("sequences", "sequences_preview", "ctf_sequences", "ctf_sequences_preview",
                                         "cbf_vs_ctf_differences"):
            body = "[]" if not v else "[\n  " + ",\n  ".join(json.dumps(x, sort_keys=False) for x in v) + "\n ]"
        else:
            body = json.dumps(v)
        parts.append(" %s: %s" % (json.dumps(k), body))
    return "{\n" + ",\n".join(parts) + "\n}\n"


def main(argv):
    os.chdir(REPO)
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        import cntk
    finally:
        sys.stdout = saved
    with open(os.path.join(DATA, "cases.json")) as f:
        cases = json.load(f)["cases"]
    if argv:
        cases = [c for c in cases if c["case"] in argv]
    out_dir = os.path.join(DATA, "expected")
    if not os.path.isdir(out_dir):
        os.makedirs(out_dir)
    failed = 0
    for case in cases:
        try:
            golden = make_golden(cntk, case)
        except Exception as e:
            failed += 1
            print("FAILED %s: %s" % (case["case"], clean_message(e)))
            continue
        with open(os.path.join(out_dir, case["case"] + ".json"), "w") as f:
            f.write(dump_golden(golden))
        if "error" in golden:
            status = "error: %s" % golden["error"].splitlines()[0][:100]
        else:
            status = "%d sequences in %d chunks" % (golden["sequences_num_sequences"], golden["layout"]["num_chunks"])
            if "equals_cntk_ctf_reading" in golden:
                status += ", CBF == CTF reading" if golden["equals_cntk_ctf_reading"] else ", CBF != CTF READING"
        print("%-36s %s" % (case["case"], status))
        for d in golden.get("cbf_vs_ctf_differences", []):
            print("    " + json.dumps(d))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
