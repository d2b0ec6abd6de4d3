#!/usr/bin/env python3
"""OFRecord numeric reading: recordkit vs OneFlow 0.9.0 and vs a plain pread of the same bytes.

    PYTHONPATH=src .venv/bin/python benchmarks/ofrecord_read_ratios.py [--data-dir bench-data/ofrecord_mnist]
        [--rounds 5] [--batch-size 256] [--skip-oracle] [--in-process] [--json OUT.json]

Data: ``ofrecord_throughput.py``'s MNIST-like set (60,000 records of 784 float32 ``images`` + an int64
``labels``, 4 parts, ~190 MB), generated into --data-dir when missing. Each measurement is one
epoch in batches of --batch-size, timed from constructing the reader/modules to the last batch:

* ``pread``: the part files read front to back with ``os.preadv`` into one reused 8 MiB buffer (the
  floor: the bytes/s of the page cache to user memory);
* ``batches``: ``OFRecordReader(dir, batch_size, epochs=1).batches({"images": ((784,), float32),
  "labels": ((1,), int64)})``;
* ``minibatch``: ``MinibatchSource(OFRecordDeserializer(dir, [images dense 784, labels dense 1]),
  randomize=False, max_sweeps=1)``, ``next_minibatch(batch_size)`` until the sweep ends;
* ``compat``: ``import recordkit.compat.oneflow as flow``: ``flow.nn.OFRecordReader`` + two
  ``flow.nn.OFRecordRawDecoder``s, ceil(N / B) batches, ``.numpy()`` of both per batch;
* ``oneflow``: the same script with ``import oneflow as flow`` (OneFlow 0.9.0's C++ reader and raw
  decoders, under /work/shared/tools/oneflow-oracle; left out with --skip-oracle or without it).

Every measurement runs in a fresh process: one untimed epoch first (OneFlow's first read in a
process includes its thread start-up and is several times slower; recordkit's first open of a part
without a sidecar indexes it while reading), then the timed epoch. Rounds alternate the
contenders (round 1: all of them, round 2: all of them, ...), so that a change of the machine's
load hits every contender alike. Printed: per contender the best and the median of --rounds, the
load average (``os.getloadavg()``) before each round, and the ratios

    batches vs OneFlow   = oneflow / batches          (goal >= 1.5)
    minibatch vs batches = minibatch / batches        (goal <= 1.2)
    compat vs OneFlow    = oneflow / compat           (goal >= 2)

each from the best times and from the medians, and from the CPU time of the timed epoch
(``time.process_time()``, every thread of the process: the work done, which a loaded machine
disturbs less than the elapsed time; the goals are on elapsed time). ``--in-process`` instead times the recordkit
contenders in one process, interleaved round by round (no process start-up, to judge a change on
a loaded machine; the OneFlow column is then left out).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ORACLE = os.environ.get("ONEFLOW_ORACLE", "/work/shared/tools/oneflow-oracle")
DIM = 784
CONTENDERS = ("pread", "batches", "minibatch", "compat", "oneflow")


# -- one timed epoch of each contender (run in the measuring process) ------------------------------
def parts_of(d: str) -> list[str]:
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith("part-") and f[5:].isdigit())


def epoch_pread(d, bs, n):
    total = 0
    block = memoryview(bytearray(8 << 20))
    for p in parts_of(d):
        fd = os.open(p, os.O_RDONLY)
        try:
            pos = 0
            while True:
                got = os.preadv(fd, [block], pos)
                if not got:
                    break
                pos += got
        finally:
            os.close(fd)
        total += pos
    return {"records": n, "bytes": total}


def epoch_batches(d, bs, n):
    import numpy as np
    from recordkit.formats.ofrecord.reader import OFRecordReader
    got = 0
    for b in OFRecordReader(d, batch_size=bs, epochs=1, rank=0, world_size=1).batches(
            {"images": ((DIM,), np.float32), "labels": ((1,), np.int64)}):
        got += len(b["labels"])
    return {"records": got}


def epoch_minibatch(d, bs, n):
    from recordkit.engine.source import MinibatchSource
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.ofrecord.deserializer import OFRecordDeserializer
    des = OFRecordDeserializer(d, [StreamSpec("images", "dense", DIM), StreamSpec("labels", "dense", 1)])
    src = MinibatchSource(des, randomize=False, max_sweeps=1)
    got = 0
    while True:
        mb = src.next_minibatch(bs)
        if mb is None:
            break
        got += mb.num_sequences
    src.close()
    return {"records": got}


def epoch_flow(flow, d, bs, n):
    nb = math.ceil(n / bs)
    reader = flow.nn.OFRecordReader(d, batch_size=bs, data_part_num=len(parts_of(d)), part_name_suffix_length=5)
    img = flow.nn.OFRecordRawDecoder("images", (DIM,), flow.float32)
    lab = flow.nn.OFRecordRawDecoder("labels", (1,), flow.int64)
    for _ in range(nb):
        rec = reader()
        img(rec).numpy()
        lab(rec).numpy()
    return {"records": nb * bs}


def epoch_compat(d, bs, n):
    import recordkit.compat.oneflow as flow
    return epoch_flow(flow, d, bs, n)


def epoch_oneflow(d, bs, n):
    saved, sys.stdout = sys.stdout, sys.stderr  # OneFlow prints on import
    import oneflow as flow
    sys.stdout = saved
    return epoch_flow(flow, d, bs, n)


EPOCHS = {"pread": epoch_pread, "batches": epoch_batches, "minibatch": epoch_minibatch, "compat": epoch_compat,
          "oneflow": epoch_oneflow}


def timed(kind, d, bs, n) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    out = EPOCHS[kind](d, bs, n)
    return dict(out, seconds=time.perf_counter() - t0, cpu=time.process_time() - c0)


def worker(argv) -> int:
    """``--worker KIND DIR BS N``: one untimed epoch, then one timed epoch, as one JSON line."""
    kind, d, bs, n = argv[0], argv[1], int(argv[2]), int(argv[3])
    EPOCHS[kind](d, bs, n)
    print(json.dumps(timed(kind, d, bs, n)))
    return 0


# -- the driver ------------------------------------------------------------------------------------
def ensure_data(d: str, n: int) -> None:
    if os.path.isdir(d) and parts_of(d):
        return
    sys.path.insert(0, HERE)
    from ofrecord_throughput import GEN_SNIPPET  # the data set of the other OFRecord benchmarks
    os.makedirs(os.path.dirname(os.path.abspath(d)), exist_ok=True)
    subprocess.run([sys.executable, "-c", GEN_SNIPPET, json.dumps([d, n, 60000])], check=True, cwd=REPO)


def count_records(d: str) -> int:
    from recordkit.formats.ofrecord.dataset import OFRecordDataset
    return len(OFRecordDataset(d, index_sidecar=False))


def fresh(kind, d, bs, n) -> dict:
    me = os.path.abspath(__file__)
    if kind == "oneflow":
        cmd = [ORACLE, "python", me, "--worker", kind, d, str(bs), str(n)]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    else:
        cmd = [sys.executable, me, "--worker", kind, d, str(bs), str(n)]
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"))
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def ratio(a, b):
    return round(a / b, 2) if a and b else None


def main(argv) -> int:
    if argv[:1] == ["--worker"]:
        return worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=os.path.join(REPO, "bench-data", "ofrecord_mnist"))
    ap.add_argument("--records", type=int, default=60000, help="records to generate when the data set is missing")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--skip-oracle", action="store_true")
    ap.add_argument("--in-process", action="store_true", help="recordkit contenders in this process, interleaved")
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    d = os.path.abspath(a.data_dir)
    ensure_data(d, a.records)
    n = count_records(d)
    size = sum(os.path.getsize(p) for p in parts_of(d))
    kinds = [k for k in CONTENDERS if not (k == "oneflow" and (a.skip_oracle or a.in_process
                                                               or not os.path.exists(ORACLE)))]
    print(f"{d}: {n} records, {len(parts_of(d))} parts, {size / 1e6:.1f} MB; batches of {a.batch_size}; "
          f"{'in-process' if a.in_process else 'fresh processes'}, {a.rounds} rounds")
    if a.in_process:
        sys.path.insert(0, os.path.join(REPO, "src"))
        for k in kinds:
            EPOCHS[k](d, a.batch_size, n)  # warm: imports, indexes, page cache
    times = {k: [] for k in kinds}
    cpus = {k: [] for k in kinds}
    loads = []
    for r in range(a.rounds):
        loads.append(os.getloadavg())
        for k in kinds:
            res = timed(k, d, a.batch_size, n) if a.in_process else fresh(k, d, a.batch_size, n)
            times[k].append(res["seconds"])
            cpus[k].append(res["cpu"])
        print(f"round {r + 1}: load {loads[-1][0]:.2f} " + " ".join(f"{k} {times[k][-1]:.3f}s" for k in kinds),
              flush=True)
    best = {k: min(v) for k, v in times.items()}
    med = {k: statistics.median(v) for k, v in times.items()}
    cpu = {k: min(v) for k, v in cpus.items()}
    print(f"\n{'':12}{'best s':>9}{'median s':>10}{'records/s (best)':>18}{'MB/s (best)':>13}{'CPU s (best)':>14}")
    for k in kinds:
        print(f"{k:12}{best[k]:9.3f}{med[k]:10.3f}{n / best[k]:18,.0f}{size / 1e6 / best[k]:13,.0f}{cpu[k]:14.3f}")
    goals = [("batches vs OneFlow", "oneflow", "batches", ">= 1.5"),
             ("minibatch vs batches", "minibatch", "batches", "<= 1.2"),
             ("compat vs OneFlow", "oneflow", "compat", ">= 2"),
             ("pread vs batches", "batches", "pread", "(the floor)")]
    ratios = {}
    print()
    for name, num, den, goal in goals:
        if num in best and den in best:
            ratios[name] = {"best": ratio(best[num], best[den]), "median": ratio(med[num], med[den])}
            ratios[name]["cpu"] = ratio(cpu[num], cpu[den])
            print(f"{name:22} {ratios[name]['best']:5.2f}x best, {ratios[name]['median']:5.2f}x median, "
                  f"{ratios[name]['cpu']:5.2f}x CPU time   goal {goal}")
    print(f"load average before each round: {', '.join(f'{x[0]:.2f}' for x in loads)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"records": n, "bytes": size, "times": times, "cpu": cpus, "best": best, "median": med,
                       "ratios": ratios,
                       "loads": loads, "in_process": a.in_process}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
