"""Opening remote data: round trips at open, and requests of a warm sweep.

Runs a local S3 server (moto, in a process of its own: in this process it would compete for the
GIL with the requests it serves) behind ``tests/s3_server.py``'s proxy, which holds every request
for a first-byte latency (``--latency``, default 20 ms) and counts them, then measures:

* the open of a 25-chunk CBF file (``CBFReader`` + ``MinibatchSource``, which needs every chunk's
  length table), median of ``--repeat`` opens: its requests, round trips (``FaultyProxy.rounds``)
  and most requests in flight, with nearby tables sharing a request (what readers do) and with
  every table its own request (``source.MERGE_GAP`` 0: what a file of large chunks costs), and
  without latency;
* the requests of an MDS data set of 7 shards read with a ``cache_dir``: a cold sweep, then a
  warm open and two sweeps of one reader;
* ``recordkit.open`` (format detection included) + ``MinibatchSource`` of the CBF file and of the
  MDS directory by URL, with a ``cache_dir``: cold (an empty one each time) and warm (one filled by
  a sweep): requests, round trips, median seconds.

    .venv/bin/python benchmarks/remote_open.py [--latency 0.02] [--repeat 5] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import numpy as np  # noqa: E402

import recordkit  # noqa: E402
from recordkit.engine.source import MinibatchSource  # noqa: E402
from recordkit.engine.streams import StreamSpec  # noqa: E402
from recordkit.formats.cbf import CBFReader, CBFWriter  # noqa: E402
from recordkit.formats.mds import MDSReader  # noqa: E402
from recordkit.storage import source as storage_source  # noqa: E402


def server_process():
    """``tests/s3_server.S3``'s interface over ``python -m moto.server`` in a child process."""
    import socket
    import subprocess
    from s3_server import S3, free_port

    class ProcessS3(S3):
        def __init__(self, bucket: str = "data"):
            self.port, self.bucket = free_port(), bucket
            self.child = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(200):
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)
            import boto3
            boto3.client("s3", endpoint_url=self.endpoint(), region_name="us-east-1", aws_access_key_id="testing",
                         aws_secret_access_key="testing").create_bucket(Bucket=bucket)

        def stop(self) -> None:
            self.child.terminate()
            self.child.wait()
    return ProcessS3()


def make_data(d: Path) -> None:
    rng = np.random.default_rng(0)
    streams = [StreamSpec("x", "dense", 64)]
    with CBFWriter(d / "c25.cbf", streams, chunk_size=32 << 10) as w:
        for _ in range(25 * 62):
            w.write({"x": rng.normal(size=(int(rng.integers(1, 4)), 64)).astype(np.float32)})
    recordkit.convert(d / "c25.cbf", d / "mds", to="mds", parts=7)


def open_seconds(url: str, options: dict) -> float:
    start = time.perf_counter()
    reader = CBFReader(url, storage_options=options)
    MinibatchSource(reader, randomize=True, window=4, max_memory=None)
    took = time.perf_counter() - start
    reader.close()
    return took


def recordkit_open_seconds(url: str, options: dict, cache) -> float:
    start = time.perf_counter()
    reader = recordkit.open(url, storage_options=options, cache_dir=cache)
    MinibatchSource(reader, randomize=True, window=4, max_memory=None)
    took = time.perf_counter() - start
    reader.close()
    return took


def sweep(reader) -> int:
    src = MinibatchSource(reader, randomize=True, window=4, max_sweeps=1, max_memory=None)
    n = 0
    while (mb := src.next_minibatch(256)) is not None:
        n += mb.num_sequences
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--latency", type=float, default=0.02, help="first-byte latency per request, seconds")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    from s3_server import FaultyProxy
    s3 = server_process()
    out: dict = {"latency_s": args.latency, "load": os.getloadavg()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            make_data(d)
            fs = s3.fs()
            fs.put_file(str(d / "c25.cbf"), f"{s3.bucket}/c25.cbf")
            for name in os.listdir(d / "mds"):
                fs.put_file(str(d / "mds" / name), f"{s3.bucket}/mds/{name}")
            chunks = len(CBFReader(d / "c25.cbf").chunks)
            proxy = FaultyProxy(s3.port, latency=args.latency)
            opts = s3.options(proxy.port)
            url = s3.url("c25.cbf")
            open_seconds(url, opts)  # connections and imports warm

            def measured() -> dict:
                before, proxy.most_at_once = proxy.count(), 0
                open_seconds(url, opts)
                got = {"requests": proxy.count() - before, "rounds": proxy.rounds(before),
                       "most_at_once": proxy.most_at_once}
                return dict(got, seconds=statistics.median(open_seconds(url, opts) for _ in range(args.repeat)))
            out["cbf_open"] = {"chunks": chunks, "merged": measured()}
            gap = getattr(storage_source, "MERGE_GAP", None)  # None: a version that asked every table alone
            if gap is not None:
                storage_source.MERGE_GAP = 0
                try:
                    out["cbf_open"]["each_alone"] = measured()
                finally:
                    storage_source.MERGE_GAP = gap
            out["cbf_open"]["no_latency_s"] = statistics.median(open_seconds(url, s3.options())
                                                                for _ in range(args.repeat))
            cache = d / "cache"
            base = proxy.count()
            sweep(MDSReader(s3.url("mds"), storage_options=opts, cache_dir=cache))
            cold = proxy.count() - base
            base = proxy.count()
            reader = MDSReader(s3.url("mds"), storage_options=opts, cache_dir=cache)
            opened = proxy.count() - base
            sweep(reader)
            first = proxy.count() - base - opened
            sweep(reader)
            second = proxy.count() - base - opened - first
            out["mds_requests"] = {"shards": len(reader.chunks), "cold_open_and_sweep": cold, "warm_open": opened,
                                   "warm_sweep": first, "second_sweep": second}
            out["recordkit_open"] = {}
            for name in ("c25.cbf", "mds"):
                warm = d / f"warm-{name}"
                sweep(recordkit.open(s3.url(name), storage_options=opts, cache_dir=warm))
                for state in ("cold", "warm"):
                    caches = iter(d / f"cold-{name}-{k}" for k in range(args.repeat + 1))

                    def cache():
                        return warm if state == "warm" else next(caches)
                    before = proxy.count()
                    recordkit_open_seconds(s3.url(name), opts, cache())
                    got = {"requests": proxy.count() - before, "rounds": proxy.rounds(before)}
                    got["seconds"] = statistics.median(recordkit_open_seconds(s3.url(name), opts, cache())
                                                       for _ in range(args.repeat))
                    out["recordkit_open"][f"{name} {state}"] = got
            proxy.close()
    finally:
        s3.stop()
    c, m = out["cbf_open"], out["mds_requests"]
    print(f"latency {args.latency * 1000:.0f} ms per request; load {out['load'][0]:.2f}")
    for key, what in (("merged", "nearby length tables in one request"), ("each_alone", "every table its own request")):
        if key in c:
            o = c[key]
            print(f"CBF open ({c['chunks']} chunks), {what}: {o['seconds']:.3f} s; {o['requests']} requests in "
                  f"{o['rounds']} round trips, up to {o['most_at_once']} at once")
    print(f"CBF open without latency: {c['no_latency_s']:.3f} s")
    print(f"MDS ({m['shards']} shards) requests: cold open+sweep {m['cold_open_and_sweep']}, warm open "
          f"{m['warm_open']}, warm sweep {m['warm_sweep']}, second sweep {m['second_sweep']}")
    for key, o in out["recordkit_open"].items():
        print(f"recordkit.open + MinibatchSource, {key}: {o['seconds']:.3f} s; {o['requests']} requests in "
              f"{o['rounds']} round trips")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
