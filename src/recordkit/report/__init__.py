"""``recordkit report``: what a corpus holds, as one self-contained HTML page.

``stats.py`` walks the data once with the compiled readers and keeps NumPy summaries (no
per-value Python); ``html.py`` turns those summaries into plots (matplotlib, imported only
there, inline SVG) and the page. The split keeps the statistics usable without matplotlib
(``recordkit inspect --plot`` and the tests read them directly).
"""
from __future__ import annotations

from recordkit.report.stats import collect  # noqa: F401  (the library entry point)


def write_report(inputs, output, **options) -> None:
    """Collect statistics of every input and write the page to ``output`` (atomically)."""
    from recordkit.report.html import render, write_page
    write_page(output, render(inputs, **options))
