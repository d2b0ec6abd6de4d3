#!/usr/bin/env python3
"""`recordkit stats DIR` on an OFRecord set vs decoding the same set in-process.

    .venv/bin/python benchmarks/ofrecord_stats.py [--data-dir bench-data/ofrecord_mnist] [--repeat 5]

The data set is benchmarks/ofrecord_throughput.py's (60,000 MNIST-like records of 784 float32 +
an int64 label, 4 parts, ~190 MB; generated there when missing). Side by side in one run, best
of --repeat each:

* ``stats (whole process)``: ``recordkit stats DIR --json`` as a user runs it (a subprocess);
* ``start-up``: ``recordkit --version`` (a subprocess);
* ``stats in-process``: the library function the command calls (``FeatureStats`` on the wire);
* ``per-record path``: what ``stats`` did before (every record decoded into ``Feature`` objects);
* ``OFRecordReader.batches()``: the reader decoding every record into batches (the
  reference, ~0.12 s for this set).

The goal: the whole-process command within the in-process decode time + start-up.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "ofrecord_mnist"))
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    if not os.path.isdir(a.data_dir):
        subprocess.run([sys.executable, os.path.join(HERE, "ofrecord_throughput.py"), "--data-dir", a.data_dir,
                        "--skip-oracle", "--repeat", "1", "--write-records", "10", "--profile-batches", "1"],
                       check=True, stdout=subprocess.DEVNULL)
    import numpy as np
    from recordkit.cli import sources
    from recordkit.formats.ofrecord import summary
    from recordkit.formats.ofrecord.reader import OFRecordReader
    ns = argparse.Namespace(path=a.data_dir, storage_options=None)
    exe = [sys.executable, "-m", "recordkit.cli.main"]

    def per_record():
        totals = {}
        for path in sources.ofrecord_parts(ns):
            for _, _, rec in summary.records(path):
                for name, f in rec.items():
                    t = totals.setdefault(name, [0, 0.0])
                    t[0] += len(f)
                    if f.kind != "bytes_list" and len(f):
                        t[1] += float(f.value.sum(dtype=np.float64))
                        float(f.value.min()), float(f.value.max())
        return totals

    def batches():
        spec = {"images": ((784,), np.float32), "labels": ((), np.int64)}
        for batch in OFRecordReader(a.data_dir, batch_size=256, epochs=1).batches(spec):
            pass

    rows = [
        ("stats (whole process)", best(lambda: subprocess.run(exe + ["stats", a.data_dir, "--json"], check=True,
                                                              stdout=subprocess.DEVNULL), a.repeat)),
        ("start-up (recordkit --version)", best(lambda: subprocess.run(exe + ["--version"], check=True,
                                                                       stdout=subprocess.DEVNULL), a.repeat)),
        ("stats in-process (FeatureStats)", best(lambda: summary.feature_totals(sources.ofrecord_parts(ns)), a.repeat)),
        ("per-record path (before)", best(per_record, max(1, a.repeat // 2))),
        ("OFRecordReader.batches()", best(batches, a.repeat)),
    ]
    size = sum(os.path.getsize(os.path.join(a.data_dir, f)) for f in os.listdir(a.data_dir) if f.startswith("part-"))
    print(f"{a.data_dir}: {size / 1e6:.1f} MB, best of {a.repeat}")
    for name, t in rows:
        print(f"  {name:34s} {t:7.3f} s")
    d = dict(rows)
    print(f"whole process / (batches() + start-up) = "
          f"{d['stats (whole process)'] / (d['OFRecordReader.batches()'] + d['start-up (recordkit --version)']):.2f}"
          f"; per-record path / in-process = {d['per-record path (before)'] / d['stats in-process (FeatureStats)']:.1f}x")


if __name__ == "__main__":
    main()
