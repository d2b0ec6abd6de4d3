"""Full sweeps of one corpus on an S3 bucket, cold and warm: recordkit vs MosaicML Streaming vs webdataset.

One dense corpus (``--rows`` rows of a float32 vector of ``--dim`` values and an int label; 40000 x
1024 = 164 MB by default, ``--small`` for a tenth) is uploaded to a local S3 server (moto, in a
process of its own, behind ``tests/s3_server.py``'s proxy in another process, which holds every
request for ``--latency``, 20 ms by default) three times, each written by its own tool:

* ``corpus.cbf``: recordkit's ``CBFWriter`` (streams ``x`` dense DIM, ``y`` dense 1);
* ``mds/``: Streaming's own ``MDSWriter`` (``x`` ``ndarray:float32:DIM``, ``y`` ``int``, 16 MB shards),
  run by ``--mds-python`` (a venv with mosaicml-streaming: its numpy pin keeps it out of this one);
* ``wds/``: webdataset's ``ShardWriter`` (``x.npy`` and ``cls`` per sample, 4000 samples a shard).

Each reader sweeps all rows once in file order, in a process of its own (started, and its
libraries imported, outside the time: s3fs for recordkit, boto3 for Streaming), its time from the
open to the last batch, and sums every stream; the sums and row counts
must agree across readers (else the script fails). Cold: an empty cache directory; warm: the same
directory again, filled by the cold sweep, in a new process:

* recordkit: ``MinibatchSource(recordkit.open("s3://.../corpus.cbf", storage_options=...,
  cache_dir=...), randomize=False, max_sweeps=1)``, minibatches of 1024; also over Streaming's MDS
  shards and webdataset's tars (streams inferred): the same objects the peers read;
* Streaming: ``StreamingDataset(remote="s3://.../mds", local=..., shuffle=False, batch_size=1024)``,
  plain iteration, the samples stacked into batches of 1024 (what a DataLoader's collation does);
  its S3 client finds the server through ``S3_ENDPOINT_URL`` and the ``AWS_*`` keys;
* webdataset: ``WebDataset([presigned http URL of each tar], shardshuffle=False,
  cache_dir=...).decode().to_tuple("x.npy", "cls").batched(1024)``: its ``curl`` opener on the same
  bucket through the S3 endpoint (one process per shard; ``pipe:aws s3 cp`` would start a Python
  CLI per shard instead).

Prints the load, each sweep's time, MB/s and requests (counted by the proxy), and each peer's time
over recordkit's.

    .venv/bin/python benchmarks/remote_sweep.py [--small] [--rows N] [--dim D] [--latency 0.02]
        [--repeat 1] [--mds-python /tmp/rk-world-mds-venv/bin/python] [--json OUT]      # ~3 min
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(HERE)]

import numpy as np  # noqa: E402

BATCH = 1024
KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}

# every reader prints one JSON line: seconds from its open to its last batch, rows, and per-stream sums
RECORDKIT = textwrap.dedent("""
    import json, sys, time, numpy as np
    sys.path.insert(0, sys.argv[1])
    import recordkit
    import s3fs  # noqa: F401 - the libraries a process has loaded before it opens data
    from recordkit.engine.source import MinibatchSource
    url, options, cache, label = sys.argv[2], json.loads(sys.argv[3]), sys.argv[4], sys.argv[5]
    start = time.perf_counter()
    src = MinibatchSource(recordkit.open(url, storage_options=options, cache_dir=cache), randomize=False,
                          max_sweeps=1)
    rows, xs, ys = 0, 0.0, 0
    while (mb := src.next_minibatch(%d)) is not None:
        rows += mb.num_sequences
        xs += float(mb.streams["x"].data.sum(dtype=np.float64))
        ys += int(mb.streams[label].data.sum(dtype=np.float64))
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows, "x": xs, "y": ys}))
""" % BATCH)

STREAMING = textwrap.dedent("""
    import json, sys, time, numpy as np
    import boto3  # noqa: F401 - the libraries a process has loaded before it opens data
    from streaming import StreamingDataset
    from streaming.base.util import clean_stale_shared_memory
    remote, local = sys.argv[1], sys.argv[2]
    clean_stale_shared_memory()
    start = time.perf_counter()
    ds = StreamingDataset(remote=remote, local=local, shuffle=False, batch_size=%d)
    rows, xs, ys, xb, yb = 0, 0.0, 0, [], []

    def flush():
        global rows, xs, ys
        rows += len(xb)
        xs += float(np.stack(xb).sum(dtype=np.float64))
        ys += int(np.array(yb).sum())
        xb.clear(); yb.clear()
    for s in ds:
        xb.append(s["x"]); yb.append(s["y"])
        if len(xb) == %d:
            flush()
    if xb:
        flush()
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows, "x": xs, "y": ys}))
""" % (BATCH, BATCH))

WEBDATASET = textwrap.dedent("""
    import json, sys, time, warnings, numpy as np
    import webdataset as wds
    urls, cache = json.loads(sys.argv[1]), sys.argv[2]
    warnings.simplefilter("ignore")
    start = time.perf_counter()
    ds = wds.WebDataset(urls, shardshuffle=False, cache_dir=cache).decode().to_tuple("x.npy", "cls").batched(%d)
    rows, xs, ys = 0, 0.0, 0
    for x, y in ds:
        rows += len(x)
        xs += float(np.asarray(x).sum(dtype=np.float64))
        ys += int(np.asarray(y).sum())
    print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows, "x": xs, "y": ys}))
""" % BATCH)

MDS_WRITE = textwrap.dedent("""
    import sys, numpy as np
    from streaming import MDSWriter
    out, x = sys.argv[1], np.load(sys.argv[2], mmap_mode="r")
    with MDSWriter(out=out, columns={"x": f"ndarray:float32:{x.shape[1]}", "y": "int"}, size_limit=16 << 20) as w:
        for i in range(len(x)):
            w.write({"x": np.asarray(x[i]), "y": i %% 10})
""".replace("%%", "%"))

PROXY = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[1])
    from s3_server import FaultyProxy
    proxy = FaultyProxy(int(sys.argv[2]), latency=float(sys.argv[3]))
    print(proxy.port, flush=True)
    for _ in sys.stdin:  # a line in: the requests passed on so far out
        print(proxy.count(), flush=True)
    time.sleep(10 ** 9)
""")

WDS_SHARD = 4000


def make_corpus(d: Path, rows: int, dim: int, mds_python: str) -> dict:
    """The three copies of the corpus, written locally: {name: local path}."""
    import webdataset as wds
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    x = np.random.default_rng(0).normal(size=(rows, dim)).astype(np.float32)
    y = np.arange(rows) % 10
    with CBFWriter(d / "corpus.cbf", [StreamSpec("x", "dense", dim), StreamSpec("y", "dense", 1)]) as w:
        for i in range(rows):
            w.write({"x": x[i:i + 1], "y": np.array([[y[i]]], dtype=np.float32)})
    np.save(d / "x.npy", x)
    subprocess.run([mds_python, "-c", MDS_WRITE, str(d / "mds"), str(d / "x.npy")], check=True)
    os.remove(d / "x.npy")
    (d / "wds").mkdir()
    with wds.ShardWriter(str(d / "wds" / "shard-%06d.tar"), maxcount=WDS_SHARD, verbose=0) as w:
        for i in range(rows):
            w.write({"__key__": f"{i:08d}", "x.npy": x[i], "cls": int(y[i])})
    return {"cbf": d / "corpus.cbf", "mds": d / "mds", "wds": d / "wds"}


def upload(fs, bucket: str, local: Path, prefix: str) -> int:
    """Put a file or a directory's files under ``prefix``; the bytes uploaded."""
    files = [local] if local.is_file() else sorted(local.iterdir())
    for f in files:
        fs.put_file(str(f), f"{bucket}/{prefix}/{f.name}" if local.is_dir() else f"{bucket}/{prefix}")
    return sum(f.stat().st_size for f in files)


def presigned(endpoint: str, bucket: str, keys: list) -> list:
    """An http URL per object that a plain GET (webdataset's curl) may read: signed for an hour."""
    import boto3
    client = boto3.client("s3", endpoint_url=endpoint, region_name=KEYS["AWS_DEFAULT_REGION"],
                          aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                          aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])
    return [client.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": k}, ExpiresIn=3600)
            for k in keys]


def run(cmd: list, env: dict | None = None) -> dict:
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        sys.exit(f"{cmd[0]} -c ... {' '.join(cmd[3:])} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=None, help="rows of the corpus (default 40000, --small 4000)")
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--small", action="store_true", help="a tenth of the rows: a quick check")
    ap.add_argument("--latency", type=float, default=0.02, help="first-byte latency per request, seconds")
    ap.add_argument("--repeat", type=int, default=1, help="cold+warm sweeps per reader (the best is shown)")
    ap.add_argument("--mds-python", default="/tmp/rk-world-mds-venv/bin/python")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    rows = args.rows or (4000 if args.small else 40000)
    if not os.path.exists(args.mds_python):
        sys.exit(f"--mds-python {args.mds_python}: no such interpreter (a venv with mosaicml-streaming)")
    from remote_open import server_process
    out: dict = {"rows": rows, "dim": args.dim, "latency_s": args.latency, "load_before": os.getloadavg()}
    s3 = server_process()
    proxy = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            t = time.perf_counter()
            local = make_corpus(d, rows, args.dim, args.mds_python)
            fs = s3.fs()
            sizes = {name: upload(fs, s3.bucket, path, {"cbf": "corpus.cbf"}.get(name, name))
                     for name, path in local.items()}
            out["bytes"] = sizes
            out["prepare_s"] = time.perf_counter() - t
            proxy = subprocess.Popen([sys.executable, "-c", PROXY, str(ROOT / "tests"), str(s3.port),
                                      str(args.latency)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            port = int(proxy.stdout.readline())

            def requests() -> int:
                proxy.stdin.write("\n")
                proxy.stdin.flush()
                return int(proxy.stdout.readline())
            endpoint = s3.endpoint(port)
            options = json.dumps(s3.options(port))
            tars = [f"wds/{f.name}" for f in sorted(local["wds"].iterdir())]
            wds_urls = json.dumps(presigned(endpoint, s3.bucket, tars))
            env = dict(os.environ, S3_ENDPOINT_URL=endpoint, **KEYS)
            py, src = sys.executable, str(ROOT / "src")
            readers = {  # name -> (bytes it reads, command taking a cache directory)
                "recordkit CBF": ("cbf", lambda c: [py, "-c", RECORDKIT, src, s3.url("corpus.cbf"), options, c, "y"]),
                "Streaming MDS": ("mds", lambda c: [args.mds_python, "-c", STREAMING, s3.url("mds"), c]),
                "webdataset tar": ("wds", lambda c: [py, "-c", WEBDATASET, wds_urls, c]),
                "recordkit on the MDS": ("mds", lambda c: [py, "-c", RECORDKIT, src, s3.url("mds"), options, c, "y"]),
                "recordkit on the tars": ("wds", lambda c: [py, "-c", RECORDKIT, src, s3.url("wds"), options, c,
                                                            "cls"]),
            }
            results: dict = {name: {} for name in readers}
            for r in range(args.repeat):
                for name, (fmt, command) in readers.items():
                    cache = d / f"cache-{r}-{fmt}-{name.split()[0]}"
                    cache.mkdir()
                    for phase in ("cold", "warm"):
                        before = requests()
                        got = run(command(str(cache)), env)
                        got["requests"] = requests() - before
                        got["MBps"] = sizes[fmt] / got["seconds"] / 1e6
                        best = results[name].get(phase)
                        if best is None or got["seconds"] < best["seconds"]:
                            results[name][phase] = got
                        print(f"  {name:22s} {phase}: {got['seconds']:.2f} s, {got['requests']} requests",
                              file=sys.stderr, flush=True)
            out["results"] = results
    finally:
        if proxy is not None:
            proxy.terminate()
            proxy.wait()
        s3.stop()
    out["load_after"] = os.getloadavg()
    first = next(iter(results.values()))["cold"]
    for name, phases in results.items():
        for phase, got in phases.items():
            if got["rows"] != first["rows"] or got["y"] != first["y"] or \
                    abs(got["x"] - first["x"]) > 1e-9 * max(1.0, abs(first["x"])):
                sys.exit(f"{name} {phase} read other data: {got} (recordkit CBF: {first})")
    print(f"{rows} rows x {args.dim} float32 + an int label; CBF {sizes['cbf'] / 1e6:.0f} MB, MDS "
          f"{sizes['mds'] / 1e6:.0f} MB, tars {sizes['wds'] / 1e6:.0f} MB; latency {args.latency * 1000:.0f} ms "
          f"per request; load {out['load_before'][0]:.2f} before, {out['load_after'][0]:.2f} after")
    print(f"every reader: {first['rows']} rows, sum of x {first['x']:.6g}, sum of labels {first['y']}")
    rk = results["recordkit CBF"]
    for name, phases in results.items():
        line = []
        for phase in ("cold", "warm"):
            got = phases[phase]
            times = got["seconds"] / rk[phase]["seconds"]
            ratio = "" if name == "recordkit CBF" else f", {times:.1f}x recordkit CBF's time"
            line.append(f"{phase} {got['seconds']:.2f} s ({got['MBps']:.0f} MB/s{ratio}; {got['requests']} requests)")
        print(f"{name:22s} " + "; ".join(line))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
