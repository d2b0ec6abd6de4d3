"""The code blocks of the documentation, as the docs test runs them.

A page's blocks tagged ``sh`` or ``python`` are examples: they run in order, in one fresh
directory holding the demo data (``recordkit demo --dir .``), ``python`` blocks in one namespace
per page. A block right after a ``<!-- not run: REASON -->`` comment is shown, not run, and the
reason must be given. Blocks of any other tag (``text``, ``console``, none) are output or
illustration and never run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUNNABLE = ("sh", "python")
_SKIP = re.compile(r"<!--\s*not run:(.*?)-->", re.S)


@dataclass
class Block:
    page: Path
    line: int          # 1-based line of the opening fence
    lang: str
    code: str
    not_run: str | None  # the reason, when marked

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page`` with its language and its not-run mark."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        mark = _SKIP.search(lines[before]) if before >= 0 else None
        out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1:j]) + "\n",
                         mark.group(1).strip() if mark else None))
        i = j + 1
    return out


def runnable(page: Path) -> list[Block]:
    return [b for b in blocks(page) if b.lang in RUNNABLE and b.not_run is None]
