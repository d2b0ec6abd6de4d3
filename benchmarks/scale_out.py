#!/usr/bin/env python3
"""CTF -> CBF and CTF -> Parquet on Ray and on Spark with 1 and 2 workers, beside `recordkit convert`.

    python benchmarks/scale_out.py [--data-dir bench-data] [--corpus dense] [--mb 1000] [--workers 1,2]
                                   [--engines local,ray,spark] [--targets cbf,parquet] [--json OUT.json]

For one corpus (benchmarks/gen_ctf_corpora.py, generated into --data-dir if missing) and each
target, every configuration runs in a fresh driver process (this script with ``--run-one``):

* local:  ``recordkit.cli.main.main(["convert", IN, OUT, "--to", T, ...])``, the single process;
* ray:    ``ray.init(num_cpus=N)`` (a local cluster of N worker slots), then the same ``main()``
          with ``--engine ray --cache-index`` (tasks load the driver's CTF index instead of each
          scanning the whole file): one read task per input chunk, one part per write task;
* spark:  a ``local[N]`` session, ``register(spark)``, ``spark.read.format("recordkit")
          .option("streams", ...).option("cacheIndex", "true").load(IN)`` and
          ``df.write.format("recordkit").mode("overwrite").option("to", T).save(OUT)``.

``seconds`` is the conversion alone (from the call to the published output); starting the Ray
cluster or the Spark session is reported apart (``start s``). Every output is checked with
``recordkit verify`` against the local conversion of the same target (every sequence, every
value), so a fast wrong run is reported as FAILED, not as a speed. While a configuration runs, a
thread of its driver samples its descendant processes every 0.2 s and keeps, per kind (Ray
worker, Spark Python worker, JVM), the largest peak RSS (``VmHWM``) and private RSS
(``RssAnon``, which leaves out the Ray object store's shared pages). ``os.getloadavg()`` is printed
before and after each run: on a shared machine the load is part of the result. See
benchmarks/README.md ("Scale-out") and docs/scale-out.md ("Planning a large conversion").
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

MIB = 1 << 20


# ---- inside one driver process (--run-one) --------------------------------------------------------

def _status(pid: int) -> dict:
    """VmHWM / VmRSS / RssAnon of a process in MiB (empty when it is gone)."""
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key in ("VmHWM", "VmRSS", "RssAnon"):
                    out[key] = int(value.split()[0]) / 1024.0
    except OSError:
        pass
    return out


def _kind(proc) -> str | None:
    try:
        cmd = " ".join(proc.cmdline())
        name = proc.name()
    except Exception:
        return None
    if "default_worker.py" in cmd or name.startswith("ray::"):
        return "ray_worker"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
        return "spark_python"
    if name == "java":
        return "jvm"
    return None


class Sampler(threading.Thread):
    """Peak RSS per kind of descendant process, sampled until ``stop()``."""

    def __init__(self, interval=0.2):
        super().__init__(daemon=True)
        self.interval, self.done = interval, threading.Event()
        self.peak = {}   # kind -> {"hwm": MiB, "anon": MiB, "pids": set}

    def sample(self):
        import psutil
        for proc in psutil.Process().children(recursive=True):
            kind = _kind(proc)
            if kind is None:
                continue
            st = _status(proc.pid)
            if not st:
                continue
            p = self.peak.setdefault(kind, {"hwm": 0.0, "anon": 0.0, "pids": set()})
            p["hwm"] = max(p["hwm"], st.get("VmHWM", 0.0))
            p["anon"] = max(p["anon"], st.get("RssAnon", 0.0))
            p["pids"].add(proc.pid)

    def run(self):
        while not self.done.is_set():
            self.sample()
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.join()
        self.sample()
        return {k: {"peak_rss_mib": round(v["hwm"], 1), "peak_anon_mib": round(v["anon"], 1),
                    "processes": len(v["pids"])} for k, v in self.peak.items()}


def _stream_args(streams):
    return ["%s=%s:%d:%s" % (s["name"], s["format"], s["dim"], s["alias"]) for s in streams]


def _cli(argv):
    from recordkit.cli.main import main
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main(argv)
    if rc:
        raise SystemExit("recordkit %s failed (%s): %s" % (argv[0], rc, err.getvalue().strip()[-2000:]))


def run_one(spec):
    """One configuration in this process; prints one JSON object."""
    import resource
    t_start = time.perf_counter()
    engine, workers, target = spec["engine"], spec["workers"], spec["target"]
    src, out, streams = spec["input"], spec["output"], spec["streams"]
    argv = ["convert", src, out, "--to", target, "--precision", "float", "--chunk-size", spec["chunk_size"]]
    for s in _stream_args(streams):
        argv += ["--stream", s]
    sampler = Sampler()
    result = {}
    if engine == "local":
        start = time.perf_counter() - t_start
        t0 = time.perf_counter()
        _cli(argv)
        seconds = time.perf_counter() - t0
    elif engine == "ray":
        import ray
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        start = time.perf_counter() - t_start
        sampler.start()
        try:
            t0 = time.perf_counter()
            _cli(argv + ["--engine", "ray", "--cache-index"])
            seconds = time.perf_counter() - t0
        finally:
            result["memory"] = sampler.stop()
            ray.shutdown()
    elif engine == "spark":
        os.environ["PYSPARK_PYTHON"] = sys.executable
        from pyspark.sql import SparkSession
        from recordkit.integrations.spark import register
        spark = (SparkSession.builder.master(f"local[{workers}]").appName("recordkit-scale-out")
                 .config("spark.ui.enabled", "false").config("spark.driver.memory", spec["spark_driver_memory"])
                 .config("spark.ui.showConsoleProgress", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        start = time.perf_counter() - t_start
        sampler.start()
        try:
            t0 = time.perf_counter()
            df = (spark.read.format("recordkit").option("streams", ",".join(_stream_args(streams)))
                  .option("precision", "float").option("chunkSize", str(spec["chunk_bytes"]))
                  .option("cacheIndex", "true").load(src))
            df.write.format("recordkit").mode("overwrite").option("to", target).save(out)
            seconds = time.perf_counter() - t0
        finally:
            result["memory"] = sampler.stop()
            spark.stop()
    else:
        raise SystemExit(f"unknown engine {engine}")
    result.update(seconds=seconds, start_seconds=start,
                  driver_peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1))
    print(json.dumps(result))


# ---- the benchmark --------------------------------------------------------------------------------

def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _load():
    return "%.1f %.1f %.1f" % os.getloadavg()


def _size(path):
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path) if os.path.exists(path) else 0


def _files(path):
    return sum(len(fs) for _, _, fs in os.walk(path)) if os.path.isdir(path) else int(os.path.exists(path))


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def configure(spec, timeout):
    """Run one configuration in a fresh driver; the parsed JSON result, or {"error": ...}."""
    _remove(spec["output"])
    # a session of its own, so that a timeout ends the driver's Ray or Spark processes too
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--run-one", json.dumps(spec)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        lines = [ln for ln in (stderr or stdout).strip().splitlines() if ln.strip()]
        return {"error": lines[-1][:400] if lines else f"exit {p.returncode}"}
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    return {"error": "no result"}


def verify(reference, output, timeout):
    """`recordkit verify REF OUT`: None when identical, else the reason."""
    try:
        p = subprocess.run([sys.executable, "-m", "recordkit.cli.main", "verify", reference, output],
                           capture_output=True, text=True, env=_env(), timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"verify timed out after {timeout} s"
    if p.returncode == 0:
        return None
    lines = [ln for ln in (p.stderr + p.stdout).strip().splitlines() if ln.strip()]
    return "verify: " + (lines[-1][:300] if lines else f"exit {p.returncode}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-one", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data"))
    ap.add_argument("--corpus", default="dense", help="dense, sparse or seq (default dense)")
    ap.add_argument("--mb", type=float, default=1000, help="corpus size in MiB when generating (default 1000)")
    ap.add_argument("--workers", default="1,2", help="worker counts for Ray and Spark (default 1,2)")
    ap.add_argument("--engines", default="local,ray,spark", help="subset of local,ray,spark (local always runs)")
    ap.add_argument("--targets", default="cbf,parquet", help="subset of cbf,parquet")
    ap.add_argument("--chunk-size", default="32M", help="input chunk size: Ray tasks and Spark partitions (32M)")
    ap.add_argument("--spark-driver-memory", default="2g", help="spark.driver.memory (default 2g)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per configuration (default 3600)")
    ap.add_argument("--keep", action="store_true", help="keep the outputs (in DATA_DIR/scale-out/)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    if args.run_one:
        run_one(json.loads(args.run_one))
        return 0

    import gen_ctf_corpora as gen
    from recordkit.cli import argtypes
    meta = gen.generate(args.data_dir, args.mb, only=[args.corpus], force=False)[args.corpus]
    src = gen.corpus_path(args.data_dir, args.corpus)
    records = meta["sequences"]
    work = os.path.join(args.data_dir, "scale-out")
    os.makedirs(work, exist_ok=True)
    engines = [e for e in args.engines.split(",") if e != "local"]
    workers = [int(w) for w in args.workers.split(",")]
    targets = args.targets.split(",")
    base = {"input": src, "streams": meta["streams"], "chunk_size": args.chunk_size,
            "chunk_bytes": argtypes.size(args.chunk_size), "spark_driver_memory": args.spark_driver_memory}
    print(f"{src}: {_size(src) / 1e6:.0f} MB, {records} records; {os.cpu_count()} cores; "
          f"chunk size {args.chunk_size}", file=sys.stderr, flush=True)

    rows = []
    for target in targets:
        ext = ".cbf" if target == "cbf" else ".parquet"
        reference = os.path.join(work, "local-1" + ext)
        configs = [("local", 1)] + [(e, n) for e in engines for n in workers]
        for engine, n in configs:
            out = reference if engine == "local" else os.path.join(work, f"{engine}-{n}-{target}")
            load_before = _load()
            print(f"[{engine} x{n} -> {target}] load before {load_before} ...", file=sys.stderr, flush=True)
            r = configure(dict(base, engine=engine, workers=n, target=target, output=out), args.timeout)
            r.update(engine=engine, workers=n, target=target, load_before=load_before, load_after=_load())
            if "error" not in r:
                r.update(output_mb=round(_size(out) / 1e6, 1), output_files=_files(out))
                if engine != "local":
                    problem = verify(reference, out, args.timeout)
                    if problem:
                        r["error"] = problem
                    else:
                        r["verified"] = True
            print(f"[{engine} x{n} -> {target}] load after {r['load_after']}: "
                  + (r["error"] if "error" in r else f"{r['seconds']:.1f} s") + f" {json.dumps(r.get('memory', {}))}",
                  file=sys.stderr, flush=True)
            rows.append(r)
            if engine != "local" and not args.keep:
                _remove(out)
        if not args.keep:
            _remove(reference)

    single = {r["target"]: r["seconds"] for r in rows if r["engine"] == "local" and "error" not in r}
    print()
    print(f"{os.path.basename(src)}: {_size(src) / 1e6:.0f} MB, {records} records; chunk size {args.chunk_size}; "
          f"{os.cpu_count()} cores; seconds = the conversion (cluster/session start apart); "
          "every distributed output verified against the local one")
    hdr = ("engine", "workers", "target", "seconds", "records/s", "rec/s/worker", "vs local", "start s",
           "worker peak RSS MiB", "files", "load before", "load after")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        if "error" in r:
            print(f"| {r['engine']} | {r['workers']} | {r['target']} | FAILED: {r['error']} | | | | | | | "
                  f"{r['load_before']} | {r['load_after']} |")
            continue
        rate = records / r["seconds"]
        mem = r.get("memory") or {}
        peak = ", ".join(f"{k} {v['peak_rss_mib']:.0f} (anon {v['peak_anon_mib']:.0f})" for k, v in sorted(mem.items()))
        if r["engine"] == "local":
            peak = f"driver {r['driver_peak_rss_mib']:.0f}"
        ratio = single[r["target"]] / r["seconds"] if r["target"] in single else float("nan")
        cells = (r["engine"], str(r["workers"]), r["target"], f"{r['seconds']:.1f}", f"{rate:,.0f}",
                 f"{rate / r['workers']:,.0f}", f"{ratio:.2f}x", f"{r['start_seconds']:.1f}", peak,
                 str(r["output_files"]), r["load_before"], r["load_after"])
        print("| " + " | ".join(cells) + " |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"input": src, "bytes": _size(src), "records": records, "chunk_size": args.chunk_size,
                       "cpus": os.cpu_count(), "rows": rows}, f, indent=1)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
