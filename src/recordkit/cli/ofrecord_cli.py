"""``recordkit reshard`` (OFRecord data sets; ``validate`` is ``cli/validate_cmd.py`` for every format), and the
part-selection options that ``cat``, ``stats`` and ``inspect`` share with them."""
from __future__ import annotations


def add_part_arguments(p) -> None:
    """OneFlow's ``OFRecordDataset`` part naming: which files of a directory are the data set."""
    from recordkit.cli import argtypes
    p.add_argument("--data-part-num", type=argtypes.positive_int, default=None, metavar="N",
                   help="OFRecord directory: read exactly parts 0..N-1 (default: every PREFIX<digits> file of "
                        "the directory)")
    p.add_argument("--part-name-prefix", default="part-", metavar="PREFIX",
                   help="OFRecord directory: the part files' name before the number (default 'part-')")
    p.add_argument("--part-name-suffix-length", type=argtypes.suffix_length, default=-1, metavar="K",
                   help="OFRecord directory: digits of the part number, zero padded (-1: no padding, the "
                        "default), as OneFlow")


def _dataset_args(p) -> None:
    add_part_arguments(p)
    from recordkit.cli.sources import add_storage_arguments
    add_storage_arguments(p)


def register(sub) -> None:
    from recordkit.cli import argtypes
    p = sub.add_parser("reshard", help="re-split an OFRecord data set into another number of parts",
                       description="Copy the records of the OFRecord data set DIR into N part files in OUT "
                                   "(records are copied as they are, not re-encoded), e.g. for another number "
                                   "of GPUs. By default each part is a contiguous run and the record order is "
                                   "kept; a local OUT is replaced as a whole.")
    p.add_argument("path", metavar="DIR", help="the OFRecord data set to read (a directory of part files, or one file)")
    p.add_argument("output", metavar="OUT", help="the directory to write the new part files into")
    p.add_argument("--parts", type=argtypes.positive_int, required=True, metavar="N",
                   help="number of part files to write")
    p.add_argument("--round-robin", action="store_true",
                   help="record i to part i mod N (default: contiguous balanced runs, order kept)")
    p.add_argument("--suffix-length-out", dest="part_name_suffix_length_out", type=argtypes.suffix_length, default=5,
                   metavar="K", help="zero padding of the output part names (default 5: part-00000)")
    _dataset_args(p)
    p.set_defaults(run=lambda a: _call("reshard", a))


def _call(name, args) -> int:
    from recordkit.cli import ofrecord_commands
    return getattr(ofrecord_commands, name)(args)
