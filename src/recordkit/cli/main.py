"""``recordkit``: entry point, sub-command registry and error reporting."""
from __future__ import annotations

import argparse
import sys
import warnings

from recordkit import __version__
from recordkit.errors import RecordkitError, UsageError


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"recordkit: warning: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    from recordkit.cli import cat, checksum_cmd, convert, demo, inspect_cmd, ofrecord_cli, prepare, read, stats
    parser = argparse.ArgumentParser(prog="recordkit", description=(
        "Read, write, convert and inspect deep-learning record formats (CNTK CTF and CBF, OneFlow OFRecord, SINGA stores)."))
    parser.add_argument("--version", action="version", version=f"recordkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (cat, stats, convert, inspect_cmd, read, ofrecord_cli, prepare, checksum_cmd, demo):
        module.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    warnings.showwarning = _show_warning
    warnings.simplefilter("always")
    try:
        return int(args.run(args) or 0)
    except UsageError as e:
        print(f"recordkit: error: {e}", file=sys.stderr)
        return 2
    except RecordkitError as e:
        print(f"recordkit: error: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"recordkit: error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()  # `recordkit cat ... | head`: not an error
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
