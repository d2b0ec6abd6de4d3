"""Samples/s of truncated BPTT next to plain minibatches, recordkit and CNTK 2.7.

    python benchmarks/bptt_throughput.py [--sequences 100000] [--mb 256] [--truncation-length 8]
                                         [--repeat 3] [--skip-oracle] [--skip-reference] [--only demo]

Corpora (in bench-data/bptt/, made once and reused):

* ``demo``: ``recordkit demo``'s corpus (recordkit.cli.demo_corpus.make_sequences) with --sequences
  sequences of 1-12 steps: ``word`` sparse 5000, ``features`` dense 4, ``tag`` sparse 12;
  CTF converted to CBF (what ``recordkit read demo.cbf --mb-size 256 --truncation-length 8`` reads).
* ``demo-small-streams``: the same CBF with only ``features`` and ``tag`` selected, so the
  5000-wide ``word`` stream, which BPTT must deliver dense, is out of the picture.
* ``dense``: benchmarks/gen_ctf_corpora.py's dense corpus (one-sample sequences, dense 100 + 10,
  --dense-mb MiB, default 50), as CBF: BPTT fills each slot with several sequences a step.

Rows, each in a fresh process, best of --repeat, the read loop only (opening excluded, as
``recordkit read`` reports it), one sweep in file order:

* ``plain``: ``next_minibatch(mb)``; sparse streams as CSR;
* ``plain+dense``: the same, then ``asarray()`` of every stream: what a consumer of plain
  minibatches who needs what BPTT delivers (dense arrays) pays;
* ``bptt``: ``truncation_length`` L (mb // L slots of L steps, every stream dense);
* ``bptt (before)``: the per-sequence path this replaced (tests/bptt_reference.py), once;
* CNTK 2.7 plain and BPTT through the oracle (benchmarks/oracle_bptt_read.py); not for
  ``demo-small-streams``: CNTK delivers every stream of a CBF file, declared or not.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ORACLE = os.environ.get("CNTK_ORACLE", "/work/shared/tools/cntk-oracle")

DEMO_STREAMS = [{"name": "word", "alias": "w", "format": "sparse", "dim": 5000},
                {"name": "features", "alias": "f", "format": "dense", "dim": 4},
                {"name": "tag", "alias": "t", "format": "sparse", "dim": 12}]

RK_SNIPPET = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    path, select, mb, trunc, mode, repeat, tests = json.loads(sys.argv[1])
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.cbf import CBFReader
    if mode == "reference":
        sys.path.insert(0, tests)
        import bptt_reference, recordkit.engine.bptt as bptt
        bptt.next_bptt_minibatch = bptt_reference.next_bptt_minibatch
    best = None
    for _ in range(repeat):
        src = MinibatchSource(CBFReader(path, select), randomize=False, max_sweeps=1, truncation_length=trunc)
        samples = minibatches = 0
        t0 = time.perf_counter()
        while True:
            m = src.next_minibatch(mb)
            if m is None:
                break
            if mode == "dense":
                for s in m.streams.values():
                    s.asarray()
            samples += m.num_samples
            minibatches += 1
        dt = time.perf_counter() - t0
        src.close()
        if best is None or dt < best[0]:
            best = (dt, samples, minibatches)
    print(json.dumps({"seconds": best[0], "samples": best[1], "minibatches": best[2]}))
""")


def run_json(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        return {"error": ((p.stderr or p.stdout).strip().splitlines() or ["failed"])[-1]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def make_demo(directory: str, n: int) -> str:
    cbf = os.path.join(directory, f"demo-{n}.cbf")
    if os.path.exists(cbf):
        return cbf
    from recordkit.cli.demo_corpus import DEMO_STREAMS as SPECS, make_sequences
    from recordkit.formats.ctf import write_ctf
    ctf = cbf[:-4] + ".ctf"
    print(f"writing {ctf} ({n} sequences) ...", flush=True)
    write_ctf(ctf, SPECS, make_sequences(n))
    convert(ctf, cbf, DEMO_STREAMS)
    return cbf


def make_dense(directory: str, mb: int) -> str:
    out = os.path.join(directory, f"dense-{mb}")
    cbf = os.path.join(out, "dense.cbf")
    if os.path.exists(cbf):
        return cbf
    subprocess.run([sys.executable, os.path.join(HERE, "gen_ctf_corpora.py"), out, "--mb", str(mb), "--only", "dense"],
                   check=True, capture_output=True)
    streams = json.load(open(os.path.join(out, "streams.json")))["corpora"]["dense"]["streams"]
    convert(os.path.join(out, "dense.ctf"), cbf, streams)
    return cbf


def convert(ctf, cbf, streams):
    args = [f"--stream={s['name']}={s['format']}:{s['dim']}:{s['alias']}" for s in streams]
    subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", ctf, cbf, *args], check=True,
                   capture_output=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data", "bptt"))
    ap.add_argument("--sequences", type=int, default=100000, help="demo corpus size (default 100000)")
    ap.add_argument("--dense-mb", type=int, default=50, help="dense corpus size in MiB of CTF (default 50)")
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--truncation-length", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--only", action="append", default=None, help="demo, demo-small-streams, dense")
    ap.add_argument("--skip-oracle", action="store_true")
    ap.add_argument("--skip-reference", action="store_true", help="skip the slow per-sequence path")
    a = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ROOT, "src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src")] +
                                                      [p for p in [os.environ.get("PYTHONPATH")] if p]))
    os.makedirs(a.data_dir, exist_ok=True)
    corpora = {}
    if not a.only or {"demo", "demo-small-streams"} & set(a.only):
        demo = make_demo(a.data_dir, a.sequences)
        corpora["demo"] = (demo, None, DEMO_STREAMS)
        corpora["demo-small-streams"] = (demo, {"features": "features", "tag": "tag"}, DEMO_STREAMS[1:])
    if not a.only or "dense" in a.only:
        dense = make_dense(a.data_dir, a.dense_mb)
        corpora["dense"] = (dense, None, json.load(open(os.path.join(os.path.dirname(dense), "streams.json")))
                            ["corpora"]["dense"]["streams"])
    oracle = not a.skip_oracle and os.path.exists(ORACLE) and subprocess.run(
        [ORACLE, "python", "-c", "import cntk"], capture_output=True).returncode == 0
    L = a.truncation_length
    print(f"minibatch {a.mb} samples; BPTT: truncation length {L} ({max(1, a.mb // L)} slots); one sweep in file "
          f"order; best of {a.repeat}; samples/s of the read loop")
    print(f"{'corpus':>19} {'reader':>8} {'mode':>14} {'samples':>9} {'minibatches':>11} {'s':>7} {'samples/s':>11} "
          f"{'plain/this':>10}")
    tests = os.path.join(ROOT, "tests")
    results = {}
    for name, (path, select, streams) in corpora.items():
        if a.only and name not in a.only:
            continue
        rows = [("recordkit", "plain", 0, "plain", a.repeat), ("recordkit", "plain+dense", 0, "dense", a.repeat),
                ("recordkit", "bptt", L, "plain", a.repeat)]
        if not a.skip_reference:
            rows.append(("recordkit", "bptt (before)", L, "reference", 1))
        plain = {}
        for reader, mode, trunc, how, repeat in rows:
            r = run_json([sys.executable, "-c", RK_SNIPPET,
                          json.dumps([path, select, a.mb, trunc, how, repeat, tests])], env=env)
            emit(results, name, reader, mode, r, plain)
        if oracle and select is None:  # CNTK delivers every stream of a CBF file, declared or not
            for mode, trunc in (("plain", 0), ("bptt", L)):
                r = run_json([ORACLE, "python", os.path.join(HERE, "oracle_bptt_read.py"), path, json.dumps(streams),
                              "--format", "cbf", "--mb", str(a.mb), "--truncation-length", str(trunc),
                              "--repeat", str(a.repeat)])
                emit(results, name, "CNTK 2.7", mode, r, plain)
        rk, ck = results.get((name, "recordkit", "bptt")), results.get((name, "CNTK 2.7", "bptt"))
        if rk and ck:
            print(f"{'':>19} recordkit BPTT / CNTK BPTT: {rk / ck:.2f}x")
    return 0


def emit(results, corpus, reader, mode, r, plain):
    if "error" in r:
        print(f"{corpus:>19} {reader:>8} {mode:>14}   error: {r['error']}")
        return
    rate = r["samples"] / r["seconds"] if r["seconds"] else float("nan")
    results[(corpus, reader, mode)] = rate
    if mode == "plain":
        plain[reader] = rate
    ratio = plain.get(reader, float("nan")) / rate
    print(f"{corpus:>19} {reader:>8} {mode:>14} {r['samples']:>9} {r['minibatches']:>11} {r['seconds']:>7.3f} "
          f"{rate:>11,.0f} {ratio:>9.2f}x", flush=True)


if __name__ == "__main__":
    sys.exit(main())
