"""``recordkit demo``: the main job on built-in sample data (what ``make demo`` runs)."""
from __future__ import annotations

import tempfile


def register(sub) -> None:
    from recordkit.cli import argtypes
    p = sub.add_parser("demo", help="write a small sample CTF corpus, read it back, print a summary",
                       description="Write a small part-of-speech-tagging-like CTF corpus (sparse words, dense "
                                   "features, sparse tags), read it back and compare, then read it as randomized "
                                   "minibatches; exit 1 if anything read back differs. What `make demo` runs.")
    p.add_argument("--dir", help="where to write the corpus (default: a temporary directory)")
    p.add_argument("--sequences", type=argtypes.positive_int, default=2000, metavar="N",
                   help="number of sequences to write (default 2000)")
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.cli import demo_corpus as demo
    if args.dir:
        result = demo.run(args.dir, args.sequences)
    else:
        with tempfile.TemporaryDirectory(prefix="recordkit-demo-") as d:
            result = demo.run(d, args.sequences)
    return 0 if result["mismatches"] == 0 and result.get("parquet_mismatches", 0) == 0 else 1
