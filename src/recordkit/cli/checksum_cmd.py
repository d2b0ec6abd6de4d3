"""``recordkit checksum create|verify PATH...``: the optional checksummed index (``.rkcrc`` sidecars)."""
from __future__ import annotations

import sys

from recordkit.cli import sources
from recordkit.errors import RecordkitError


def register(sub) -> None:
    p = sub.add_parser("checksum", help="write or verify NAME.rkcrc checksum sidecars",
                       description="CTF, CBF, OFRecord parts and SINGA stores carry no checksums. `create` "
                                   "writes a NAME.rkcrc sidecar (a CRC-32 per block) beside each file; every "
                                   "recordkit reader then verifies the bytes it reads against it. `verify` checks "
                                   "whole files now (exit 1 on any mismatch or missing sidecar). A directory "
                                   "stands for the files of the data set it holds (OFRecord: its part files).")
    from recordkit.cli import argtypes
    p.add_argument("action", choices=["create", "verify"],
                   help="create: write PATH.rkcrc; verify: check PATH against its PATH.rkcrc")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, or data set directories (their files)")
    p.add_argument("--block-size", type=argtypes.size, default=None, metavar="BYTES",
                   help="create: bytes per checksummed block, e.g. 65536 or 1M (default 1M)")
    sources.add_storage_arguments(p)
    p.set_defaults(run=run)


def files_of(path: str, storage_options) -> list[str]:
    """The files of the data set at ``path``, as its format names them (``Format.files``)."""
    from recordkit.formats import registry
    from recordkit.formats.detect import sniff_format
    return registry.get(sniff_format(path, storage_options)).files(path, storage_options)


def run(args) -> int:
    from recordkit.storage import sidecars
    opts = args.storage_options
    failed = 0
    for path in args.paths:
        for name in files_of(path, opts):
            try:
                if args.action == "create":
                    kw = {"block_size": args.block_size} if args.block_size else {}
                    side = sidecars.create(name, storage_options=opts, **kw)
                    print(f"{name}: wrote {side}")
                else:
                    table = sidecars.verify(name, storage_options=opts)
                    print(f"{name}: ok ({len(table.crcs)} blocks of {table.block_size} bytes, "
                          f"{table.file_size} bytes)")
            except (RecordkitError, FileNotFoundError) as e:
                failed += 1
                print(f"recordkit: error: {e}", file=sys.stderr)
    return 1 if failed else 0
