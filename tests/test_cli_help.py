"""Help and documentation: every command has a description, every option and positional its help
text, the top-level summaries say what each command handles, and every `recordkit ...` command line
of README.md and the docs parses (the ones not run as examples included)."""
import argparse
import re
import shlex
from pathlib import Path

import pytest

from recordkit.cli.main import COMMANDS, build_parser

PARSER = build_parser([], all_commands=True)


def command_parser(parser, name):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_description(command):
    assert command_parser(PARSER, command).description


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_option_and_positional_has_help_text(command):
    p = command_parser(PARSER, command)
    missing = [a.option_strings[0] if a.option_strings else a.dest for a in p._actions
               if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def test_the_convert_summary_names_every_format_it_reads():
    summary = COMMANDS["convert"][1]
    for name in ("CTF", "CBF", "OFRecord", "SINGA", "CSV"):
        assert name in summary
    assert "SINGA" in PARSER.format_help() and "CSV" in PARSER.format_help()


def readme_command_lines() -> list[str]:
    """`recordkit ...` lines of the code blocks of README.md and docs/, comments, pipes and `...` cut off; a line
    with optional parts (`[--option VALUE]`) twice: without them, and with them, a placeholder
    VALUE as 1 and `a|b` alternatives as the first."""
    lines, inside = [], False
    text = "\n".join(page.read_text() for page in PAGES).replace("\\\n", " ")  # continuation lines joined
    for raw in text.splitlines():
        if raw.startswith("```"):
            inside = not inside
            continue
        line = raw.strip()
        if not inside or not line.startswith("recordkit ") or "$" in line:  # shell variables: run as examples
            continue
        line = re.split(r"\s#\s", line)[0].split(" | ")[0].split(" || ")[0].split(" && ")[0].replace("...", " ")
        lines.append(" ".join(re.sub(r"\[[^\]]*\]", " ", line).split()))
        if "[" in line:
            words = re.sub(r"[\[\]]", " ", line).split()
            lines.append(" ".join("1" if re.fullmatch(r"[A-Z_]+", w) else w.split("|")[0] if "|" in w and
                                  not w.startswith("'") else w for w in words))
    return lines


def test_the_readme_has_command_lines_to_check():
    assert len(readme_command_lines()) >= 60


@pytest.mark.parametrize("line", readme_command_lines())
def test_every_readme_command_line_parses(line):
    argv = shlex.split(line)[1:]
    parser = build_parser(argv, all_commands=True)
    try:
        args = parser.parse_args(argv)  # exits (2) on an option the command does not take
    except SystemExit as e:  # --version, --help
        assert e.code == 0
        return
    if getattr(args, "check", None) is not None:
        args.check(command_parser(parser, args.command), args)


@pytest.mark.parametrize("command", ["cat", "stats", "inspect", "validate", "reshard"])
def test_ofrecord_part_selection_is_taken_where_the_readme_says(command):
    p = command_parser(PARSER, command)
    options = {o for a in p._actions for o in a.option_strings}
    assert {"--data-part-num", "--part-name-prefix", "--part-name-suffix-length"} <= options
