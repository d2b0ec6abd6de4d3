"""``recordkit reshard``: an OFRecord data set's records copied, not re-encoded, into another number of
part files (contiguous runs by default, record order kept; a local OUT is replaced as a whole)."""
from __future__ import annotations

import sys

from recordkit.cli import sources


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
    sources.add_part_arguments(p)
    sources.add_storage_arguments(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from recordkit.formats.ofrecord.dataset import read_streams
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    paths = sources.ofrecord_parts(args)
    opts = getattr(args, "storage_options", None)
    # counted from the parts' indexes (sidecars, or a scan of the length prefixes): the records are
    # read once, below
    from recordkit.formats.ofrecord.dataset import load_index, read_part
    total = sum(len(load_index(p, storage_options=opts)) for p in paths)
    # the records are copied as they are: the stream declarations the data set records still hold
    streams = read_streams(args.path, storage_options=opts)
    with OFRecordWriter(args.output, args.parts, sharding="contiguous" if not args.round_robin else "round_robin",
                        total=total if not args.round_robin else None, streams=streams,
                        part_name_suffix_length=args.part_name_suffix_length_out, storage_options=opts) as w:
        for path in paths:
            index, data = read_part(path, opts)
            err = index.error()
            if err is not None:
                raise err
            for off, n in zip(index.offsets.tolist(), index.lengths.tolist()):
                w.write(data[off:off + n])  # frames are copied as they are: no re-encoding
    print(f"recordkit: {total} records from {len(paths)} part(s) -> {len(w.paths)} part(s) in {args.output}",
          file=sys.stderr)
    return 0
