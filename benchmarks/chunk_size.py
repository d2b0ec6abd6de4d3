"""A sweep of one dense CBF file at several chunk sizes, against its default chunking.

The same CTF corpus (``gen_ctf_corpora.py --only dense``) converted with ``--output-chunk-size``
16K and 256K and with the default; each file swept once by ``MinibatchSource(CBFReader(path),
randomize=..., max_sweeps=1)`` in minibatches of ``--mb`` samples, in file order and randomized.
Per-chunk work (look-up, preparation, eviction, loads) is what small chunks add: the goal is
16 KB chunks within 1.3x of the default, 256 KB within 1.1x. All in one process, the files
interleaved round by round; best of ``--rounds`` wall and CPU times (the CPU time, all threads,
moves less than the wall time on a busy machine). The load average is printed before and after.

    python benchmarks/chunk_size.py [--mb-corpus 25] [--mb 1024] [--rounds 7] [--sizes 16K,256K]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STREAMS = ["--stream", "features=dense:100", "--stream", "labels=dense:10"]


def load() -> str:
    return "load average %.2f %.2f %.2f" % os.getloadavg()


def prepare(data: str, corpus_mb: int, sizes: list) -> dict:
    """CBF files of the dense corpus: {label: path}, the default chunking first."""
    ctf = os.path.join(data, "dense.ctf")
    if not os.path.exists(ctf):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_ctf_corpora.py"), data, "--mb", str(corpus_mb),
                        "--only", "dense"], check=True)
    out = {}
    for size in ["default", *sizes]:
        path = os.path.join(data, f"dense-{size}.cbf")
        if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(ctf):
            extra = [] if size == "default" else ["--output-chunk-size", size]
            subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", ctf, path, *STREAMS, *extra],
                           check=True, capture_output=True)
        out[size] = path
    return out


def sweep(path: str, randomize: bool, mb: int) -> tuple[float, float, int, int]:
    """(wall s, CPU s, chunks, samples) of one sweep, opening included."""
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.cbf import CBFReader
    t0, c0 = time.perf_counter(), time.process_time()
    src = MinibatchSource(CBFReader(path), randomize=randomize, max_sweeps=1)
    samples = 0
    while (m := src.next_minibatch(mb)) is not None:
        samples += m.num_samples
    chunks = len(src.chunks)
    src.close()
    return time.perf_counter() - t0, time.process_time() - c0, chunks, samples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--mb-corpus", type=int, default=25, help="MB of CTF text to generate when missing")
    ap.add_argument("--mb", type=int, default=1024, help="minibatch size in samples")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--sizes", default="16K,256K")
    args = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "src"))
    warnings.simplefilter("ignore")
    files = prepare(args.data, args.mb_corpus, [s for s in args.sizes.split(",") if s])
    print(load())
    rows = []
    for randomize in (False, True):
        best: dict = {}
        for _ in range(args.rounds):
            for label, path in files.items():
                wall, cpu, chunks, samples = sweep(path, randomize, args.mb)
                b = best.get(label)
                best[label] = (min(wall, b[0]) if b else wall, min(cpu, b[1]) if b else cpu, chunks, samples)
        base = best["default"]
        for label, (wall, cpu, chunks, samples) in best.items():
            if samples != base[3]:
                raise SystemExit(f"{label}: {samples} samples, the default chunking gives {base[3]}")
            rows.append((("randomized" if randomize else "file order"), label, chunks, wall, wall / base[0], cpu,
                         cpu / base[1]))
    print(load())
    print("| order | chunk size | chunks | wall ms | wall / default | CPU ms | CPU / default |")
    print("|---|---|---|---|---|---|---|")
    for order, label, chunks, wall, wr, cpu, cr in rows:
        print(f"| {order} | {label} | {chunks} | {wall * 1e3:.1f} | {wr:.2f}x | {cpu * 1e3:.1f} | {cr:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
