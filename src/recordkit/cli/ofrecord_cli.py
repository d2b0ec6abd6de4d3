"""``recordkit reshard`` (OFRecord data sets; ``validate`` is ``cli/validate_cmd.py`` for every format)."""
from __future__ import annotations


def _dataset_args(p) -> None:
    p.add_argument("--data-part-num", type=int, default=None, metavar="N",
                   help="read exactly parts 0..N-1 (default: every PREFIX<digits> file of the directory)")
    p.add_argument("--part-name-prefix", default="part-", metavar="PREFIX")
    p.add_argument("--part-name-suffix-length", type=int, default=-1, metavar="K",
                   help="digits of the part number, zero padded (-1: no padding), as OneFlow")
    from recordkit.cli.sources import add_storage_arguments
    add_storage_arguments(p)


def register(sub) -> None:
    p = sub.add_parser("reshard", help="re-split an OFRecord data set into another number of parts")
    p.add_argument("path", metavar="DIR")
    p.add_argument("output", metavar="OUT")
    p.add_argument("--parts", type=int, required=True, metavar="N")
    p.add_argument("--round-robin", action="store_true",
                   help="record i to part i mod N (default: contiguous balanced runs, order kept)")
    p.add_argument("--suffix-length-out", dest="part_name_suffix_length_out", type=int, default=5, metavar="K",
                   help="zero padding of the output part names (default 5: part-00000)")
    _dataset_args(p)
    p.set_defaults(run=lambda a: _call("reshard", a))


def _call(name, args) -> int:
    from recordkit.cli import ofrecord_commands
    return getattr(ofrecord_commands, name)(args)
