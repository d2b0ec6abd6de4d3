#!/usr/bin/env python3
"""Write the CBF interop cases: CTF sources, recordkit-written CBF files, the case manifest.

    .venv/bin/python tools/oracle/make_cbf_files.py

Runs in recordkit's venv (not under the oracle). It

1. writes the new CTF sources (deterministic, numpy PCG64 with fixed seeds) into
   tests/data/cbf_oracle/inputs/<name>.ctf with a sidecar <name>.json stream spec, in the
   format of tests/data/ctf_oracle/inputs (the float cases of that directory that CNTK reads
   without error are reused in place);
2. converts every source CTF to CBF with recordkit
   (CTFReader(...).iter_chunks(threads=2) -> CBFWriter(..., chunk_size=N).write_chunk) into
   tests/data/cbf_oracle/files/<case>.cbf; some cases use a tiny chunk_size so the file has
   many chunks;
3. copies the small CBF files made by CNTK's own ctf2bin.py from the conformance corpus into
   tests/data/cbf_oracle/cntk_files/ (MNIST_dense.bin, 6 MB, stays in the shared corpus);
4. writes tests/data/cbf_oracle/cases.json, the manifest that tools/oracle/cbf_golden.py (under
   the oracle) and tests/test_cbf_oracle_golden.py read.

It also converts the conformance corpus's CTF sources of the ctf2bin files with recordkit
(same header, precision and one chunk) and prints whether the bytes equal ctf2bin's
(informational: ctf2bin's chunking differs from recordkit's once a file has several chunks).

Paths in the manifest are relative to the repository root; "shared:" paths are relative to
$RECORDKIT_SHARED (default: the `shared` directory next to the repository).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join("tests", "data", "cbf_oracle")
CTF_INPUTS = os.path.join("tests", "data", "ctf_oracle", "inputs")
SHARED = os.environ.get("RECORDKIT_SHARED") or os.path.join(os.path.dirname(REPO), "shared")
CNTK_BIN = "conformance/cntk/Data/CNTKBinaryReader"
CNTK_CTF = "conformance/cntk/Data/CNTKTextFormatReader"

# Reused CTF oracle inputs: float, CNTK reads them without error, and recordkit reads them as CNTK
# does (large_ids and max_errors_recoverable are deliberate recordkit differences, see
# tests/test_ctf_oracle_golden.py, so their CBF cannot equal CNTK's CTF reading).
REUSED_CTF = [
    "aliases", "comments", "crlf_id_mode", "crlf_line_mode", "float32_rounding", "id_mode_multiline",
    "large_exponents", "leading_whitespace_line", "long_mantissa_float", "mixed_dense_sparse",
    "no_final_newline_id", "no_final_newline_line", "number_syntax", "short_dense", "skip_sequence_ids",
    "sparse_unsorted_dup", "tabs_and_delimiters", "unknown_inputs", "utf8_bom_id", "utf8_bom_line",
]

# CBF files written by CNTK's Scripts/ctf2bin.py (conformance corpus, CASES.md): file ->
# (CTF source in the corpus, ctf2bin header lines, precision, copy into the repo).
CNTK_FILES = {
    "10x10_dense": ("10x10_dense.txt", ["features F0 dense 5"], "float", True),
    "10x10_sparse": ("10x10_sparse.txt", ["features F0 sparse 100"], "double", True),
    "50x20_jagged_sequences_dense": ("50x20_jagged_sequences_dense.txt", ["features F0 dense 3"], "double", True),
    "50x20_jagged_sequences_sparse": ("50x20_jagged_sequences_sparse.txt", ["features F0 sparse 100"], "float", True),
    "Simple_dense": ("Simple_dense.txt", ["features F dense 2", "labels L dense 2"], "float", True),
    "Simple_jagged_sequence": (None, None, "float", True),
    "MNIST_dense": ("MNIST_dense.txt", ["features F dense 784", "labels L dense 10"], "double", False),
}

VALUES_SPECIAL = ["-0", "0", "1e-40", "-1.5e-45", "3.4e38", "0.1", "-2.5", "1", "65504", "1e-07"]


def _fmt(x):
    return "%.6g" % x


def _dense_row(rng, dim, special_rate=0.02):
    vals = rng.standard_normal(dim) * np.exp(rng.uniform(-3, 3, dim))
    out = [_fmt(v) for v in vals]
    for j in np.flatnonzero(rng.random(dim) < special_rate):
        out[j] = VALUES_SPECIAL[int(rng.integers(len(VALUES_SPECIAL)))]
    return out


def _sparse_pairs(rng, mean, dim, ones=False):
    k = int(rng.integers(mean // 2, mean + mean // 2 + 1))
    idx = np.unique(rng.integers(0, dim, size=k))
    if ones:
        return ["%d:1" % i for i in idx]
    return ["%d:%s" % (i, _fmt(v)) for i, v in zip(idx, rng.standard_normal(idx.size))]


def gen_bench_dense(rng):
    lines = []
    for _ in range(48):
        lab = ["0"] * 10
        hot = int(rng.integers(10))
        lab[hot] = "1"
        if rng.random() < 0.2:
            lab[(hot + 1 + int(rng.integers(9))) % 10] = "0.5"
        lines.append("|features " + " ".join(_dense_row(rng, 100)) + " |labels " + " ".join(lab))
    return "\n".join(lines) + "\n", [("features", "features", "dense", 100), ("labels", "labels", "dense", 10)]


def gen_bench_sparse(rng):
    lines = ["|x " + " ".join(_sparse_pairs(rng, 40, 100000)) + " |y " + " ".join(_sparse_pairs(rng, 20, 100000))
             for _ in range(32)]
    return "\n".join(lines) + "\n", [("x", "x", "sparse", 100000), ("y", "y", "sparse", 100000)]


def gen_bench_seq(rng):
    lines = []
    for sid in range(40):
        for _ in range(int(rng.integers(1, 31))):
            lines.append("%d |word %d:1 |tag %d:1" % (sid, rng.integers(50000), rng.integers(100)))
    return "\n".join(lines) + "\n", [("word", "word", "sparse", 50000), ("tag", "tag", "sparse", 100)]


def gen_mixed_jagged(rng):
    """Id mode; per sequence the three streams have different sample counts (incl. fewer than others)."""
    lines = []
    for sid in range(30):
        n_a = int(rng.integers(1, 6))          # dense a: 1..5 samples
        n_s = int(rng.integers(1, 8))          # sparse s: 1..7 samples (some empty)
        n_lab = 1 if sid % 3 else 2            # dense lab: 1 or 2 samples
        rows = max(n_a, n_s, n_lab)
        for r in range(rows):
            parts = ["%d" % (sid * 7 + 3)]     # non-consecutive ids
            if r < n_a:
                parts.append("|a " + " ".join(_dense_row(rng, 3, 0.1)))
            if r < n_s:
                pairs = [] if rng.random() < 0.15 else _sparse_pairs(rng, 3, 7)
                parts.append("|s" + (" " + " ".join(pairs) if pairs else ""))
            if r < n_lab:
                parts.append("|lab " + _fmt(rng.integers(0, 5)))
            lines.append(" ".join(parts))
    return "\n".join(lines) + "\n", [("a", "a", "dense", 3), ("s", "s", "sparse", 7), ("lab", "lab", "dense", 1)]


def gen_sparse_only_one_sample(rng):
    """Line mode, single sparse stream, many tiny sequences (one CBF chunk per sequence)."""
    lines = ["|w " + " ".join(_sparse_pairs(rng, 4, 1000)) for _ in range(25)]
    return "\n".join(lines) + "\n", [("w", "w", "sparse", 1000)]


# name -> generator, seed
NEW_INPUTS = {
    "bench_dense": (gen_bench_dense, 11),
    "bench_sparse": (gen_bench_sparse, 12),
    "bench_seq": (gen_bench_seq, 13),
    "mixed_jagged": (gen_mixed_jagged, 14),
    "sparse_tiny_seqs": (gen_sparse_only_one_sample, 15),
}

# case -> (input name, directory, chunk_size, precision, method)
RK_CASES = {
    "bench_dense": ("bench_dense", "new", 32 << 20, "float", "write_chunk"),
    "bench_dense_multichunk": ("bench_dense", "new", 2000, "float", "write_chunk"),
    "bench_sparse_multichunk": ("bench_sparse", "new", 4096, "float", "write_chunk"),
    "bench_seq_multichunk": ("bench_seq", "new", 1024, "float", "write_chunk"),
    "mixed_jagged": ("mixed_jagged", "new", 32 << 20, "float", "write_chunk"),
    "mixed_jagged_chunk1": ("mixed_jagged", "new", 1, "float", "write_chunk"),
    "mixed_jagged_chunk300": ("mixed_jagged", "new", 300, "float", "write_chunk"),
    "mixed_jagged_per_sequence": ("mixed_jagged", "new", 300, "float", "write"),
    "sparse_tiny_seqs_chunk1": ("sparse_tiny_seqs", "new", 1, "float", "write_chunk"),
    "mixed_jagged_double_error": ("mixed_jagged", "new", 32 << 20, "double", "write_chunk"),
}
for _n in REUSED_CTF:
    RK_CASES["ctf_" + _n] = (_n, "ctf_oracle", 32 << 20, "float", "write_chunk")
RK_CASES["ctf_mixed_dense_sparse_chunk1"] = ("mixed_dense_sparse", "ctf_oracle", 1, "float", "write_chunk")
RK_CASES["ctf_id_mode_multiline_chunk1"] = ("id_mode_multiline", "ctf_oracle", 1, "float", "write_chunk")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_cbf(src_ctf, spec, out, chunk_size, precision, method):
    """The conversion every recordkit case uses (tests/test_cbf_oracle_golden.py repeats it)."""
    from recordkit import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    from recordkit.formats.ctf import CTFReader

    specs = [StreamSpec(name=s["name"], format=s["format"], dim=s["dim"], alias=s["alias"]) for s in spec["streams"]]
    reader = CTFReader(src_ctf, specs, precision=precision, skip_sequence_ids=bool(spec.get("skip_sequence_ids")),
                       max_errors=int(spec.get("max_errors", 0)))
    try:
        with CBFWriter(out, specs, precision=precision, chunk_size=chunk_size) as w:
            if method == "write":
                for seq in reader:
                    w.write(dict(seq.data))
            else:
                for chunk in reader.iter_chunks(threads=2):
                    w.write_chunk(chunk)
    finally:
        reader.close()


def main():
    import warnings

    warnings.simplefilter("ignore")
    os.chdir(REPO)
    for sub in ("inputs", "files", "cntk_files", "expected"):
        os.makedirs(os.path.join(DATA, sub), exist_ok=True)
    for name, (gen, seed) in NEW_INPUTS.items():
        text, streams = gen(np.random.default_rng(seed))
        with open(os.path.join(DATA, "inputs", name + ".ctf"), "w", newline="\n") as f:
            f.write(text)
        spec = {"streams": [{"name": n, "alias": a, "format": fm, "dim": d} for n, a, fm, d in streams],
                "precision": "float", "skip_sequence_ids": False, "max_errors": 0}
        with open(os.path.join(DATA, "inputs", name + ".json"), "w") as f:
            json.dump(spec, f, indent=1)
            f.write("\n")

    cases = []
    for case, (inp, where, chunk_size, precision, method) in RK_CASES.items():
        d = os.path.join(DATA, "inputs") if where == "new" else CTF_INPUTS
        src, spec_path = os.path.join(d, inp + ".ctf"), os.path.join(d, inp + ".json")
        with open(spec_path) as f:
            spec = json.load(f)
        out = os.path.join(DATA, "files", case + ".cbf")
        write_cbf(src, spec, out, chunk_size, precision, method)
        cases.append({
            "case": case, "kind": "recordkit", "cbf": out, "cbf_sha256": sha256(out),
            "source": {"ctf": src, "ctf_sha256": sha256(src), "spec": spec_path, "streams": spec["streams"],
                       "precision": precision, "skip_sequence_ids": bool(spec.get("skip_sequence_ids")),
                       "max_errors": int(spec.get("max_errors", 0)), "chunk_size": chunk_size, "method": method},
        })

    ctf2bin_check = []
    for name, (src_txt, header, precision, copy) in CNTK_FILES.items():
        shared_bin = os.path.join(SHARED, CNTK_BIN, name + ".bin")
        if copy:
            dst = os.path.join(DATA, "cntk_files", name + ".bin")
            shutil.copyfile(shared_bin, dst)
            os.chmod(dst, 0o644)
            cbf = dst
        else:
            cbf = "shared:" + CNTK_BIN + "/" + name + ".bin"
        entry = {"case": "cntk_" + name, "kind": "cntk_ctf2bin", "cbf": cbf, "cbf_sha256": sha256(shared_bin),
                 "precision": precision}
        if src_txt:
            streams = []
            for ln in header:
                n, a, fm, d = ln.split()
                streams.append({"name": n, "alias": a, "format": fm, "dim": int(d)})
            src = os.path.join(SHARED, CNTK_CTF, src_txt)
            entry["source"] = {"ctf": "shared:" + CNTK_CTF + "/" + src_txt, "ctf_sha256": sha256(src),
                               "streams": streams, "ctf2bin_header": header, "precision": precision,
                               "skip_sequence_ids": False, "max_errors": 0}
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "x.cbf")
                write_cbf(src, {"streams": streams}, out, 1 << 40, precision, "write_chunk")
                same = sha256(out) == sha256(shared_bin)
            entry["recordkit_one_chunk_byte_identical"] = same
            ctf2bin_check.append((name, same))
        cases.append(entry)

    with open(os.path.join(DATA, "cases.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=1)
        f.write("\n")
    total = 0
    for sub in ("inputs", "files", "cntk_files"):
        for fn in os.listdir(os.path.join(DATA, sub)):
            total += os.path.getsize(os.path.join(DATA, sub, fn))
    print("%d cases; %.2f MiB of inputs and CBF files under %s" % (len(cases), total / 2.0 ** 20, DATA))
    for name, same in ctf2bin_check:
        print("recordkit (one chunk) vs ctf2bin %-32s %s" % (name + ".bin", "byte-identical" if same else "DIFFERENT"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
