#!/usr/bin/env python3
"""Write the inputs of the cntk.io StreamInformation goldens.

    .venv/bin/python tools/oracle/make_stream_infos_inputs.py

Runs in recordkit's venv. Writes tests/data/cntk_stream_infos/inputs/tags.ctf (6 id-mode
sequences: ``w`` sparse 50, ``f`` dense 4, ``t`` sparse 12, every stream on every line, so
BPTT accepts it) and tags.cbf (the same through recordkit's converter, streams named
``word``, ``features``, ``tag`` in that file order). tools/oracle/stream_infos_golden.py then
records what CNTK 2.7 says about their streams.
"""
from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(REPO, "tests", "data", "cntk_stream_infos", "inputs")


def main() -> int:
    sys.path.insert(0, os.path.join(REPO, "src"))
    from recordkit.engine.streams import StreamSpec
    from recordkit.formats.cbf import CBFWriter
    from recordkit.formats.ctf import CTFReader
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(12)
    lines = []
    for key in range(6):
        for _ in range(int(rng.integers(1, 5))):
            f = " ".join(f"{v:.3g}" for v in rng.normal(size=4))
            lines.append(f"{key} |w {int(rng.integers(0, 50))}:1 |f {f} |t {int(rng.integers(0, 12))}:1")
    ctf = os.path.join(OUT, "tags.ctf")
    with open(ctf, "w") as fh:
        fh.write("\n".join(lines) + "\n")
    streams = [StreamSpec("word", "sparse", 50, "w"), StreamSpec("features", "dense", 4, "f"),
               StreamSpec("tag", "sparse", 12, "t")]
    reader = CTFReader(ctf, streams)
    with CBFWriter(os.path.join(OUT, "tags.cbf"), streams) as w:
        for cid in range(len(reader.chunks)):
            w.write_chunk(reader.load_chunk(cid))
    print(f"wrote {ctf} and tags.cbf")
    return 0


if __name__ == "__main__":
    sys.exit(main())
