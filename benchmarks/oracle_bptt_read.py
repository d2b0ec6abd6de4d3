"""Time CNTK 2.7's MinibatchSource with and without truncated BPTT (oracle, Python 3.6).

    cntk-oracle python benchmarks/oracle_bptt_read.py FILE STREAMS_JSON --format ctf|cbf --mb N
        [--truncation-length L] [--repeat 3]

Builds MinibatchSource(CTFDeserializer or CBFDeserializer(FILE, StreamDefs(...)),
randomize=False, max_sweeps=1, truncation_length=L) (L = 0: plain minibatches) and calls
next_minibatch(N) until {}; the time is that loop only (opening excluded, as ``recordkit read``
reports it). CNTK delivers every stream dense under BPTT (its StreamInformation says so), as
recordkit does. Prints JSON {"seconds", "samples", "minibatches"} (best of --repeat).
Every reference into a minibatch is dropped before the next call (CNTK's prefetch thread
otherwise intermittently fails resizing a matrix that is still viewed).
"""
import argparse
import gc
import json
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("streams")
    ap.add_argument("--format", choices=["ctf", "cbf"], required=True)
    ap.add_argument("--mb", type=int, required=True)
    ap.add_argument("--truncation-length", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    streams = json.loads(a.streams)
    saved, sys.stdout = sys.stdout, sys.stderr
    try:
        from cntk import io as cio
    finally:
        sys.stdout = saved
    best = None
    for _ in range(max(1, a.repeat)):
        defs = {}
        for s in streams:
            field = (s.get("alias") or s["name"]) if a.format == "ctf" else s["name"]
            defs[s["name"]] = cio.StreamDef(field=field, shape=int(s["dim"]), is_sparse=(s["format"] == "sparse"))
        make = cio.CTFDeserializer if a.format == "ctf" else cio.CBFDeserializer
        src = cio.MinibatchSource(make(a.path, cio.StreamDefs(**defs)), randomize=False, max_sweeps=1,
                                  truncation_length=a.truncation_length)
        first = streams[0]["name"]
        info = src.streams[first]
        samples = minibatches = 0
        t0 = time.perf_counter()
        while True:
            mb = src.next_minibatch(a.mb)
            if not mb:
                break
            samples += mb[info].num_samples
            minibatches += 1
            mb = None
        dt = time.perf_counter() - t0
        del src
        gc.collect()
        if best is None or dt < best[0]:
            best = (dt, samples, minibatches)
    sys.stdout.write(json.dumps({"seconds": best[0], "samples": best[1], "minibatches": best[2]}) + "\n")


if __name__ == "__main__":
    main()
