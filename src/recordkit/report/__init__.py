"""``recordkit report``: what a corpus holds, as one self-contained HTML page.

``stats.py`` walks the data once with the compiled readers and keeps NumPy summaries (no
per-value Python); ``html.py`` turns those summaries into plots (matplotlib, imported only
there, inline SVG) and the page. The split keeps the statistics usable without matplotlib
(``recordkit inspect --plot`` and the tests read them directly).
"""
from __future__ import annotations

from recordkit.report.stats import collect  # noqa: F401  (the library entry point)


def write_report(paths, output, *, title: str = "recordkit report", **options) -> list:
    """Collect the statistics of every path (``options`` as for ``collect``) and write the page
    to ``output`` (atomically); returns the ``InputReport``s."""
    from recordkit.report.html import render, write_page
    reports = [collect(p, **options) for p in paths]
    write_page(output, render(reports, title=title))
    return reports
