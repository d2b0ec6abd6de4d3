"""Many readers on one data set: aggregate samples/s of N processes reading disjoint partitions.

    python benchmarks/many_readers.py [--max-procs N | --procs 1,2,3,4] [--size-mb 150] [--json out.json]

What runs. A dense CTF corpus (``gen_ctf_corpora.py``'s ``dense``, 100 + 10 values per
line, ``--size-mb`` MiB, generated once into ``bench-data/many_readers/``) and its CBF
conversion (``recordkit convert``, default 32 MiB chunks). For each format, in file order
and randomized (block randomization, ``--window`` chunks as in
``minibatch_throughput.py``, seed 0), for P = 1, 2, ... processes: P spawned processes
each open the same file and read partition i of P for one sweep with
``MinibatchSource.next_minibatch(--mb, num_data_partitions=P, partition_index=i)``.

What is timed. Every process imports everything first, then waits on a common
barrier; the time is from the barrier to the end of the last process's last minibatch
(so opening/indexing the file is included, interpreter start-up is not: a training job
pays that once). Aggregate samples/s = the sweep's samples / that wall time; speedup =
the 1-process time / the P-process time; per-core efficiency = speedup / P (1.0 = each
added process adds a whole reader's worth). Best of ``--repeat`` rounds, fresh processes
every round. The files are in the page cache (just written or read by the previous
round), so this measures CPU, not disk.

Why threads=1. ``MinibatchSource(threads=1)``: one background prefetch thread per
process, and a chunk the caller waits for is parsed by one thread. With the default
(threads=2) a single process already uses both cores of a 2-core machine (CTF chunks
are parsed in parallel pieces with the GIL released), so adding processes would only
show oversubscription; with threads=1 the processes, not threads, are what scales. The
1-process default-threads figure is printed for reference: it is what one process
gets without partitions. Even with threads=1 a process runs two threads at times (the
prefetch thread parses the next chunk while the caller packs minibatches), so one
process can keep more than one core busy: the ``cores`` column (CPU seconds of all the
processes / wall seconds) shows how much; ``--prefetch 0`` makes each process strictly
single-threaded.

The machine may be shared: the load average before the run is printed, and every
round's time is in the JSON (``all_seconds``), so noisy points can be recognised.

Chunks loaded. Each process counts the chunks it loads (``chunks/proc``, mean over the
processes, against the file's chunk count). A partition is a contiguous run of the
sweep's order: in file order that is ~1/P of the chunks (+1 where a cut falls inside a
chunk), but a randomized sweep draws every position from a window of chunks, so with a
window as large as the file (CNTK's default 128 chunks of 32 MiB is larger than most
files) every process parses every chunk and only the packing is divided. ``--window``
and ``--chunk-size`` show how that changes.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import resource
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import gen_ctf_corpora  # noqa: E402  (benchmarks/ is not a package)


def _open(fmt: str, path: str, streams: list, chunk_size: int | None):
    from recordkit import StreamSpec
    if fmt == "ctf":
        from recordkit.formats.ctf import CTFReader
        kw = {} if chunk_size is None else {"chunk_size": chunk_size}
        return CTFReader(path, [StreamSpec(s["name"], s["format"], s["dim"], s.get("alias")) for s in streams], **kw)
    from recordkit.formats.cbf import CBFReader
    return CBFReader(path)


def _reader_process(barrier, queue, job: dict) -> None:
    """One reader: import, wait for the others, then open the file and read one partition."""
    try:
        import warnings
        warnings.simplefilter("ignore")
        from recordkit.engine.source import MinibatchSource
        import recordkit.formats.cbf  # noqa: F401  (imports outside the timed part)
        import recordkit.formats.ctf  # noqa: F401
        barrier.wait(timeout=120)
        c0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.monotonic()  # CLOCK_MONOTONIC: one clock for every process of the machine
        d = _open(job["fmt"], job["path"], job["streams"], job["chunk_size"])
        loads = []
        load = d.load_chunk

        from recordkit.engine.deserializer import accepts_keyword
        takes_threads = accepts_keyword(load, "threads")

        def counted(cid, threads=1):  # the reader's own signature, as far as MinibatchSource can tell
            out = load(cid, threads=threads) if takes_threads else load(cid)
            loads.append(cid)
            return out

        d.load_chunk = counted
        n, i = job["procs"], job["index"]
        chunks_total = len(d.chunks)
        if job.get("partition_by") == "chunks":  # whole chunks per process (engine.ChunkPartition)
            from recordkit.engine import ChunkPartition
            source_of = ChunkPartition(d, n, i)
            n, i = 1, 0
        else:
            source_of = d
        src = MinibatchSource(source_of, randomize=job["randomize"], window=job["window"], seed=0, max_sweeps=1,
                              threads=job["threads"], prefetch_chunks=job["prefetch"])
        samples = sequences = 0
        while (mb := src.next_minibatch(job["mb"], num_data_partitions=n, partition_index=i)) is not None:
            samples += mb.num_samples
            sequences += mb.num_sequences
        src.close()
        t1 = time.monotonic()
        c1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
        queue.put({"index": job["index"], "start": t0, "end": t1, "cpu": cpu, "samples": samples, "sequences": sequences,
                   "chunk_loads": len(loads), "distinct_chunks": len(set(loads)), "chunks": chunks_total})
    except BaseException as e:  # report rather than leave the parent waiting
        queue.put({"index": job.get("index"), "error": repr(e)})


def run_round(job: dict, procs: int) -> dict:
    """P fresh processes reading partitions 0..P-1 of one sweep; wall time barrier -> last end."""
    load_before = os.getloadavg()[0]
    ctx = mp.get_context("spawn")
    barrier, queue = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_reader_process, args=(barrier, queue, dict(job, procs=procs, index=i)))
          for i in range(procs)]
    for p in ps:
        p.start()
    try:
        res = [queue.get(timeout=600) for _ in ps]
    finally:
        for p in ps:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    errors = [r["error"] for r in res if "error" in r]
    if errors:
        raise RuntimeError(f"a reader failed: {errors[0]}")
    res.sort(key=lambda r: r["index"])
    wall = max(r["end"] for r in res) - min(r["start"] for r in res)
    samples = [r["samples"] for r in res]
    return {"procs": procs, "seconds": wall, "cpu_seconds": sum(r["cpu"] for r in res),
            "loadavg_before": load_before, "samples": sum(samples), "per_process_samples": samples,
            "per_process_seconds": [r["end"] - r["start"] for r in res],
            "chunks": res[0]["chunks"], "chunks_per_proc": sum(r["distinct_chunks"] for r in res) / procs,
            "chunk_loads": sum(r["chunk_loads"] for r in res)}


def best_of(job: dict, procs: int, repeat: int) -> dict:
    rounds = [run_round(job, procs) for _ in range(repeat)]
    best = min(rounds, key=lambda r: r["seconds"])
    best["all_seconds"] = [r["seconds"] for r in rounds]
    return best


def ensure_corpus(data_dir: str, size_mb: float, chunk_size: int | None) -> tuple[str, str, list]:
    """The dense CTF corpus (generated once) and its CBF conversion (converted once per chunk size)."""
    meta = gen_ctf_corpora.generate(data_dir, size_mb, only=["dense"], force=False, quiet=False)["dense"]
    ctf = os.path.join(data_dir, meta["file"])
    cbf = os.path.join(data_dir, "dense.cbf" if chunk_size is None else f"dense-{chunk_size}.cbf")
    if not os.path.exists(cbf) or os.path.getmtime(cbf) < os.path.getmtime(ctf):
        args = [f"--stream={s['name']}={s['format']}:{s['dim']}:{s['alias']}" for s in meta["streams"]]
        if chunk_size is not None:
            args.append(f"--output-chunk-size={chunk_size}")
        subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", ctf, cbf, "--precision", "float",
                        *args], check=True, capture_output=True)
    return ctf, cbf, meta["streams"]


def machine() -> dict:
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None, "cpu_model": model, "python": platform.python_version(), "platform": platform.platform()}


def _size(text: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower().rstrip("b")
    return int(float(t[:-1]) * units[t[-1]]) if t and t[-1] in units else int(t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data", "many_readers"))
    ap.add_argument("--size-mb", type=float, default=150, help="size of the dense CTF corpus in MiB (default 150)")
    ap.add_argument("--max-procs", type=int, default=os.cpu_count(), help="1..N processes (default: cpu count)")
    ap.add_argument("--procs", default=None, help="explicit list, e.g. 1,2,3,4 (overrides --max-procs)")
    ap.add_argument("--mb", type=int, default=2048, help="minibatch size in samples (default 2048)")
    ap.add_argument("--window", type=int, default=128, help="randomization window in chunks (default 128, CNTK's)")
    ap.add_argument("--chunk-size", default=None,
                    help="CTF reader chunk size and CBF output chunk size, e.g. 4M (default: 32 MiB, the library's)")
    ap.add_argument("--threads", type=int, default=1, help="MinibatchSource threads per process (default 1)")
    ap.add_argument("--prefetch", type=int, default=2,
                    help="MinibatchSource prefetch_chunks (default 2, the library's; 0: no background thread)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds per point, best is kept (default 3)")
    ap.add_argument("--only", choices=["ctf", "cbf"], action="append", default=None)
    ap.add_argument("--randomize", choices=["no", "yes", "both"], default="both")
    ap.add_argument("--partition-by", choices=["samples", "chunks"], default="samples",
                    help="samples: MinibatchSource partitions (default); chunks: engine.ChunkPartition")
    ap.add_argument("--json", default=None, help="write every measurement here")
    a = ap.parse_args(argv)
    procs = [int(p) for p in a.procs.split(",")] if a.procs else list(range(1, max(1, a.max_procs) + 1))
    if 1 not in procs:
        procs = [1] + procs
    chunk_size = None if a.chunk_size is None else _size(a.chunk_size)
    ctf, cbf, streams = ensure_corpus(a.data_dir, a.size_mb, chunk_size)
    m = machine()
    print(f"machine: {m['cpus']} CPUs ({m['cpu_model'] or 'unknown model'}), Python {m['python']}")
    print(f"corpus: {ctf} ({os.path.getsize(ctf) / 2**20:.1f} MiB), {cbf} ({os.path.getsize(cbf) / 2**20:.1f} MiB)")
    print(f"load average before: {os.getloadavg()[0]:.2f} (other work on the machine skews the figures)")
    print(f"one sweep, minibatches of {a.mb} samples, threads={a.threads} prefetch_chunks={a.prefetch} per process, "
          f"best of {a.repeat}; "
          f"randomized: {a.window}-chunk window, seed 0; partitions by {a.partition_by}")
    header = (f"{'format':>6} {'random':>6} {'procs':>5} {'s':>7} {'samples/s':>12} {'speedup':>8} "
              f"{'eff/core':>8} {'cpu s':>6} {'cores':>5} {'chunks/proc':>12}")
    rows = []
    for fmt, path in (("ctf", ctf), ("cbf", cbf)):
        if a.only and fmt not in a.only:
            continue
        for randomize in {"no": [False], "yes": [True], "both": [False, True]}[a.randomize]:
            job = {"fmt": fmt, "path": path, "streams": streams, "chunk_size": chunk_size, "randomize": randomize,
                   "window": a.window, "mb": a.mb, "threads": a.threads, "prefetch": a.prefetch,
                   "partition_by": a.partition_by}
            print()
            print(header)
            ref = best_of(dict(job, threads=2, prefetch=2), 1, a.repeat)  # the library default, for reference
            print(f"{fmt:>6} {str(randomize):>6} {'1*':>5} {ref['seconds']:>7.3f} "
                  f"{ref['samples'] / ref['seconds']:>12,.0f} {'':>8} {'':>8} {ref['cpu_seconds']:>6.2f} "
                  f"{ref['cpu_seconds'] / ref['seconds']:>5.2f} "
                  f"{ref['chunks_per_proc']:>6.1f} of {ref['chunks']:<3}")
            rows.append(dict(ref, format=fmt, randomize=randomize, threads=2, reference=True))
            base = None
            for p in procs:
                r = best_of(job, p, a.repeat)
                if p == 1:
                    base = r["seconds"]
                speedup = base / r["seconds"]
                print(f"{fmt:>6} {str(randomize):>6} {p:>5} {r['seconds']:>7.3f} {r['samples'] / r['seconds']:>12,.0f} "
                      f"{speedup:>7.2f}x {speedup / p:>8.2f} {r['cpu_seconds']:>6.2f} {r['cpu_seconds'] / r['seconds']:>5.2f} "
                      f"{r['chunks_per_proc']:>6.1f} of {r['chunks']:<3}")
                rows.append(dict(r, format=fmt, randomize=randomize, threads=a.threads, reference=False,
                                 samples_per_s=r["samples"] / r["seconds"], speedup=speedup,
                                 efficiency=speedup / p))
    print("\n1*: one process with the default threads=2 (reference; not part of the speedup column)")
    print("cpu s: CPU seconds of all the processes (user + system) from the barrier on; cores: cpu s / wall s")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": m, "args": vars(a), "ctf": ctf, "cbf": cbf,
                       "ctf_bytes": os.path.getsize(ctf), "cbf_bytes": os.path.getsize(cbf), "rows": rows}, f, indent=1)
        print(f"wrote {a.json}")


if __name__ == "__main__":
    main()
