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
                                   "stands for its OFRecord part files.")
    from recordkit.cli import argtypes
    p.add_argument("action", choices=["create", "verify"],
                   help="create: write PATH.rkcrc; verify: check PATH against its PATH.rkcrc")
    p.add_argument("paths", nargs="+", metavar="PATH", help="files, or OFRecord directories (their part files)")
    p.add_argument("--block-size", type=argtypes.size, default=None, metavar="BYTES",
                   help="create: bytes per checksummed block, e.g. 65536 or 1M (default 1M)")
    sources.add_storage_arguments(p)
    p.set_defaults(run=run)


def files_of(path: str, storage_options) -> list[str]:
    from recordkit.storage import location
    if location.isdir(path, storage_options):
        from recordkit.formats.ofrecord.dataset import part_paths
        return part_paths(path, storage_options=storage_options)
    return [path]


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
