"""``recordkit``: entry point, sub-command registry and error reporting.

Sub-commands are registered lazily: ``COMMANDS`` names each command's module and its one-line
summary, and only the module of the command being run is imported (``recordkit --help`` and
``--version`` import none), so a command pays start-up time only for what it uses.
``tests/test_cli_startup.py`` keeps the summaries equal to the modules' own help texts.
"""
from __future__ import annotations

import argparse
import sys
import warnings

from recordkit import __version__
from recordkit.cli.argtypes import ArgumentParser
from recordkit.errors import RecordkitError, UsageError

# command -> (module that registers it, summary shown by `recordkit --help`), in listing order.
COMMANDS = {
    "cat": ("recordkit.cli.cat", "print every sequence as a JSON line"),
    "stats": ("recordkit.cli.stats", "per-stream sequence/sample/non-zero counts and sum/min/max"),
    "convert": ("recordkit.cli.convert", "convert between formats (CTF, CBF, OFRecord, SINGA stores, CSV, Parquet, Hugging Face, ...)"),
    "inspect": ("recordkit.cli.inspect_cmd", "show a file's structure: streams, chunks, sequence lengths"),
    "read": ("recordkit.cli.read", "read minibatches like a training loop and print samples/s"),
    "validate": ("recordkit.cli.validate_cmd", "check every record of a data set (any format) and report every problem"),
    "verify": ("recordkit.cli.verify_cmd", "prove a conversion lossless: compare every sequence of SRC and DST"),
    "plan": ("recordkit.cli.plan", "show what a read would hold in memory and deliver, from the index alone"),
    "reshard": ("recordkit.cli.reshard", "re-split an OFRecord data set into another number of parts"),
    "prepare": ("recordkit.cli.prepare", "write SINGA's CIFAR-10 / MNIST stores from the original binary files"),
    "checksum": ("recordkit.cli.checksum_cmd", "write or verify NAME.rkcrc checksum sidecars"),
    "report": ("recordkit.cli.report", "write an HTML page with a data set's overview, plots and problems"),
    "demo": ("recordkit.cli.demo", "write a small sample CTF corpus, read it back, print a summary"),
}


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """Warnings as ``recordkit: warning: ...`` (information, trace level 2: ``recordkit: info: ...``),
    one line each: never Python's file, line and source line. One write per line: readers warn
    from several threads, and print's separate newline would let their lines run together."""
    from recordkit.errors import RecordkitInfo
    kind = "info" if issubclass(category, RecordkitInfo) else "warning"
    sys.stderr.write(f"recordkit: {kind}: {message}\n")


def _report_unshown(unshown) -> None:
    """The end of a command (before its error line, if any): how many warnings of each kind each
    file had beyond those listed (``errors.WarningLimit``), which were announced as "counted but
    not shown"."""
    for (source, kind), n in list(unshown.items()):
        sys.stderr.write(f"recordkit: warning: {source}: {n} more warning(s) of this kind ({kind}) were counted "
                         f"but not shown\n")


def _os_failure(e: OSError) -> str:
    """One line for an OSError that ended a command, naming the outputs that were discarded
    (their previous content is intact, their temporaries removed)."""
    from recordkit.storage.atomic import discarded_targets
    what = e.strerror or str(e)
    targets = discarded_targets()
    if targets:
        names = ", ".join(targets[:3]) + (f" and {len(targets) - 3} more" if len(targets) > 3 else "")
        return (f"{names}: {what}; nothing was written under that name (any previous content is intact, "
                f"the temporary file was removed)")
    return f"{e.filename}: {what}" if e.filename else what


def _missing(e: OSError) -> str:
    """``NAME: no such file`` (the form recordkit's own errors have) for an OSError raised by
    ``open()`` itself, which would print as ``[Errno 2] No such file or directory: 'NAME'``."""
    if e.filename is None:
        return str(e)
    what = {FileNotFoundError: "no such file", IsADirectoryError: "is a directory",
            PermissionError: "permission denied"}.get(type(e), e.strerror)
    return f"{e.filename}: {what}"


def _command_in(argv) -> str | None:
    """The sub-command named in ``argv`` (the first argument that is not an option), if any."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in COMMANDS else None
    return None


def build_parser(argv=None, *, all_commands: bool = False) -> argparse.ArgumentParser:
    """The parser for ``argv``: the named command fully registered, the others as summaries only
    (``all_commands=True`` registers every command, for tests and documentation)."""
    import importlib
    parser = ArgumentParser(prog="recordkit", description=(
        "Read, write, convert and inspect deep-learning record formats (CNTK CTF and CBF, OneFlow OFRecord, SINGA stores)."))
    parser.add_argument("--version", action="version", version=f"recordkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = _command_in(sys.argv[1:] if argv is None else argv)
    wanted = set(m for m, _ in COMMANDS.values()) if all_commands else {COMMANDS[chosen][0]} if chosen else set()
    registered = set()
    for name, (module, summary) in COMMANDS.items():
        if module in wanted:
            if module not in registered:
                importlib.import_module(module).register(sub)
                registered.add(module)
        else:
            sub.add_parser(name, help=summary)
    return parser


def command_parser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The sub-parser of command ``name`` (for its cross-argument checks and tests)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _one_blas_thread() -> None:
    """Keep NumPy's OpenBLAS to one thread unless the user chose otherwise. Its worker threads
    start with NumPy and spin for ~0.1 s of CPU before they sleep; no command does the large
    matrix products they are for, and on a 2-core machine the spin took the core a command's
    chunk loads run on (``recordkit read`` of the 50 MB dense CBF: median of 10 processes 0.375 s
    -> 0.321 s). Only the CLI does this: a program importing recordkit keeps its own settings."""
    import os
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def main(argv=None) -> int:
    _one_blas_thread()  # before any command module imports NumPy
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if getattr(args, "check", None) is not None:  # cross-argument checks: parser.error, exit 2, one line
        args.check(command_parser(parser, args.command), args)
    warnings.showwarning = _show_warning
    warnings.simplefilter("always")
    from recordkit.errors import set_trace_level, unshown_warnings
    previous_trace_level = set_trace_level(getattr(args, "trace_level", 1))  # for readers made without one
    try:
        if hasattr(args, "cache_dir"):
            from recordkit.cli.sources import settle_cache
            settle_cache(args)
        with unshown_warnings() as unshown:
            try:
                return int(args.run(args) or 0)
            finally:
                _report_unshown(unshown)
    except UsageError as e:
        print(f"recordkit: error: {e}", file=sys.stderr)
        return 2
    except RecordkitError as e:
        print(f"recordkit: error: {e}", file=sys.stderr)
        return 1
    except (FileNotFoundError, IsADirectoryError, PermissionError) as e:
        print(f"recordkit: error: {_missing(e)}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        sys.stderr.close()  # `recordkit cat ... | head`: not an error
        return 0
    except OSError as e:  # disk full, quota, read-only file system, I/O error...
        print(f"recordkit: error: {_os_failure(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        set_trace_level(previous_trace_level)


if __name__ == "__main__":
    sys.exit(main())
