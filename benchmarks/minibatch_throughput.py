"""Samples/s reading minibatches like a training loop: recordkit's MinibatchSource vs CNTK 2.7's.

For each benchmark corpus (CTF, and the CBF converted from it), randomized and not, both
sources read one sweep with the same minibatch size and, when randomizing, the same
window (CNTK's default, 128 chunks; seed 0; so both deliver the same order). Each side
runs in a fresh process, best of --repeat, timing includes opening (indexing) the data.

    python benchmarks/minibatch_throughput.py [--mb 256] [--only dense] [--skip-oracle]
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

RK_SNIPPET = textwrap.dedent("""
    import json, sys, time, warnings
    warnings.simplefilter("ignore")
    path, fmt, streams, mb, randomize, window, repeat = json.loads(sys.argv[1])
    from recordkit import StreamSpec
    from recordkit.engine.source import MinibatchSource
    best = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        if fmt == "ctf":
            from recordkit.formats.ctf import CTFReader
            d = CTFReader(path, [StreamSpec(s["name"], s["format"], s["dim"], s.get("alias")) for s in streams])
        else:
            from recordkit.formats.cbf import CBFReader
            d = CBFReader(path)
        src = MinibatchSource(d, randomize=randomize, window=window, max_sweeps=1)
        samples = sequences = 0
        while True:
            m = src.next_minibatch(mb)
            if m is None:
                break
            samples += m.num_samples
            sequences += m.num_sequences
        dt = time.perf_counter() - t0
        src.close()
        if best is None or dt < best[0]:
            best = (dt, samples, sequences)
    print(json.dumps({"seconds": best[0], "samples": best[1], "sequences": best[2]}))
""")


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1:] or ["failed"]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", default=os.path.join(ROOT, "bench-data"))
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--window", type=int, default=128, help="randomization window in chunks (CNTK's default)")
    ap.add_argument("--only", action="append", default=None)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--skip-oracle", action="store_true")
    a = ap.parse_args(argv)
    meta_path = os.path.join(a.data_dir, "streams.json")
    if not os.path.exists(meta_path):
        subprocess.run([sys.executable, os.path.join(HERE, "gen_ctf_corpora.py"), a.data_dir], check=True)
    corpora = json.load(open(meta_path))["corpora"]
    oracle = not a.skip_oracle and os.path.exists(ORACLE) and subprocess.run(
        [ORACLE, "python", "-c", "import cntk"], capture_output=True).returncode == 0
    print(f"minibatch size {a.mb} samples; randomized rows use a {a.window}-chunk window, seed 0; one sweep")
    print(f"{'corpus':>8} {'format':>6} {'random':>7} {'samples':>9} {'CNTK s':>8} {'CNTK samples/s':>15} "
          f"{'rk s':>7} {'rk samples/s':>13} {'rk/CNTK':>8}")
    for name, c in corpora.items():
        if a.only and name not in a.only:
            continue
        ctf = os.path.join(a.data_dir, c["file"])
        cbf = ctf[:-4] + ".cbf"
        streams = c["streams"]
        if not os.path.exists(cbf):
            args = [f"--stream={s['name']}={s['format']}:{s['dim']}:{s['alias']}" for s in streams]
            subprocess.run([sys.executable, "-m", "recordkit.cli.main", "convert", ctf, cbf, *args],
                           check=True, capture_output=True)
        for fmt, path in (("ctf", ctf), ("cbf", cbf)):
            for randomize in (False, True):
                rk = run_json([sys.executable, "-c", RK_SNIPPET, json.dumps(
                    [path, fmt, streams, a.mb, randomize, a.window, a.repeat])])
                ck = {}
                if oracle:
                    cmd = [ORACLE, "python", os.path.join(HERE, "oracle_minibatch_read.py"), path, json.dumps(streams),
                           "--format", fmt, "--mb", str(a.mb), "--window-chunks", str(a.window),
                           "--repeat", str(a.repeat)] + (["--randomize"] if randomize else [])
                    ck = run_json(cmd)
                rks = rk.get("samples", 0) / rk["seconds"] if "seconds" in rk else float("nan")
                cks = ck.get("samples", 0) / ck["seconds"] if "seconds" in ck else float("nan")
                ratio = rks / cks if cks == cks and cks else float("nan")
                print(f"{name:>8} {fmt:>6} {str(randomize):>7} {rk.get('samples', 0):>9} "
                      f"{ck.get('seconds', float('nan')):>8.2f} {cks:>15,.0f} {rk.get('seconds', float('nan')):>7.2f} "
                      f"{rks:>13,.0f} {ratio:>7.2f}x")
                if "error" in rk or "error" in ck:
                    print("   error:", rk.get("error") or ck.get("error"))
                if ck and rk.get("samples") != ck.get("samples"):
                    print(f"   note: sample counts differ (recordkit {rk.get('samples')}, CNTK {ck.get('samples')})")


if __name__ == "__main__":
    main()
