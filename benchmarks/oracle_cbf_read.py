"""Time CNTK 2.7's C++ binary (CBF) reader on one file (run under the oracle's Python 3.6).

    cntk-oracle python benchmarks/oracle_cbf_read.py FILE.cbf STREAMS_JSON [--mb-sizes 512,1024,4096,16384] [--repeat 2]

STREAMS_JSON is a JSON list (or a path to a JSON file holding a list) of
{"name", "format": "dense"|"sparse", "dim"}: the streams of the file (CBF names; the
deserializer ignores dim and format, but the Python wrapper wants a shape). The file must be
float precision (CNTK's Python API delivers float32 only).

One timed read = construct MinibatchSource(CBFDeserializer(...), randomize=False, max_sweeps=1)
(this reads the header and chunk table) and call next_minibatch(N) until it returns
an empty dict. The data stays in CNTK Values (no .asarray()); CNTK still copies every
value and packs it into its minibatch matrices. Each minibatch size in --mb-sizes is timed
--repeat times; the fastest read is reported, so CNTK gets its best configuration.

Prints one JSON object on stdout: {"seconds", "samples", "sequences", "bytes", "mb_size",
"per_size": {N: best seconds}, "peak_rss_mb", "baseline_rss_mb"}. peak_rss_mb is the process's
ru_maxrss (all reads; they are sequential and free their source); baseline_rss_mb is ru_maxrss
after `import cntk`, before any reading.

Keep this file Python 3.6 compatible (the oracle's interpreter).
"""
import argparse
import gc
import json
import os
import resource
import sys
import time
import warnings

warnings.filterwarnings("ignore")


def _rss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _import_cntk():
    # cntk prints deprecation noise on import; keep stdout clean for the JSON.
    saved = sys.stdout
    sys.stdout = sys.stderr
    try:
        import cntk  # noqa: F401
        from cntk import io as cio
    finally:
        sys.stdout = saved
    return cio


def read_once(cio, path, streams, mb_size):
    t0 = time.perf_counter()
    defs = {}
    for s in streams:
        defs[s["name"]] = cio.StreamDef(field=s["name"], shape=int(s["dim"]),
                                        is_sparse=(s["format"] == "sparse"))
    src = cio.MinibatchSource(cio.CBFDeserializer(path, cio.StreamDefs(**defs)),
                              randomize=False, max_sweeps=1)
    samples = sequences = 0
    while True:
        mb = src.next_minibatch(mb_size)
        if not mb:
            break
        vals = list(mb.values())
        samples += max(v.num_samples for v in vals)
        sequences += max(v.num_sequences for v in vals)
    dt = time.perf_counter() - t0
    del src, mb
    gc.collect()
    return dt, samples, sequences


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("corpus")
    ap.add_argument("streams", help="JSON list of stream specs, or a path to a JSON file")
    ap.add_argument("--mb-sizes", default="512,1024,4096,16384")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    spec = args.streams
    if os.path.exists(spec):
        with open(spec) as f:
            spec = f.read()
    streams = json.loads(spec)
    if isinstance(streams, dict):
        streams = streams["streams"]
    cio = _import_cntk()
    baseline = _rss_mb()
    sizes = [int(x) for x in args.mb_sizes.split(",") if x]
    best = None
    per_size = {}
    for n in sizes:
        for _ in range(max(1, args.repeat)):
            dt, samples, sequences = read_once(cio, args.corpus, streams, n)
            per_size[str(n)] = min(dt, per_size.get(str(n), dt))
            if best is None or dt < best[0]:
                best = (dt, samples, sequences, n)
    out = {
        "reader": "cntk-2.7-cbf",
        "seconds": best[0],
        "samples": best[1],
        "sequences": best[2],
        "mb_size": best[3],
        "per_size": per_size,
        "bytes": os.path.getsize(args.corpus),
        "peak_rss_mb": _rss_mb(),
        "baseline_rss_mb": baseline,
    }
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
