"""Time CNTK 2.7's MinibatchSource over one corpus, like a training loop (oracle, Python 3.6).

    cntk-oracle python benchmarks/oracle_minibatch_read.py FILE STREAMS_JSON --format ctf|cbf
        --mb N [--randomize] [--window-chunks 128] [--repeat 2]

One timed read: build MinibatchSource (CTFDeserializer or CBFDeserializer; randomize with the
given window in chunks, seed 0; max_sweeps=1) and call next_minibatch(N) until {}.
Prints JSON {"seconds", "samples", "sequences"} (best of --repeat). Python 3.6 compatible.
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
    ap.add_argument("--randomize", action="store_true")
    ap.add_argument("--window-chunks", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    streams = json.loads(a.streams)
    saved, sys.stdout = sys.stdout, sys.stderr
    try:
        from cntk import io as cio
    finally:
        sys.stdout = saved
    best = None
    for _ in range(max(1, a.repeat)):
        t0 = time.perf_counter()
        defs = {}
        for s in streams:
            field = s.get("alias") or s["name"] if a.format == "ctf" else s["name"]
            defs[s["name"]] = cio.StreamDef(field=field, shape=int(s["dim"]), is_sparse=(s["format"] == "sparse"))
        if a.format == "ctf":
            d = cio.CTFDeserializer(a.path, cio.StreamDefs(**defs))
        else:
            d = cio.CBFDeserializer(a.path, cio.StreamDefs(**defs))
        src = cio.MinibatchSource(d, randomize=a.randomize, randomization_window_in_chunks=a.window_chunks,
                                  max_sweeps=1)
        samples = sequences = 0
        while True:
            mb = src.next_minibatch(a.mb)
            if not mb:
                break
            vals = list(mb.values())
            samples += max(v.num_samples for v in vals)
            sequences += max(v.num_sequences for v in vals)
        dt = time.perf_counter() - t0
        del src, mb
        gc.collect()
        if best is None or dt < best[0]:
            best = (dt, samples, sequences)
    sys.stdout.write(json.dumps({"seconds": best[0], "samples": best[1], "sequences": best[2]}) + "\n")


if __name__ == "__main__":
    main()
