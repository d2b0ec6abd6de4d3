"""The page of ``recordkit report``: plots (matplotlib, inline SVG) and HTML around them.

One self-contained file: no script, no stylesheet or font from the network, every plot an
inline ``<svg>`` (text kept as text, so the page is small and searchable), every image a
``data:`` URI. matplotlib is imported here only, on first use, with the Agg backend (no
display needed); when it is missing, ``MissingExtra`` names the extra that installs it.
"""
from __future__ import annotations

import base64
import html
import io
import re

import numpy as np

from recordkit.errors import RecordkitError
from recordkit.report.stats import CLASS_LIMIT, BytesStats, DenseStats, InputReport, SparseStats, fmt_number, human_size, \
    stream_rows

MAX_POINTS = 400        # a line plot with more points is thinned (rank/frequency, per-dimension mean)
MAX_BARS = 100          # class-balance bars drawn one by one up to this many classes


class MissingExtra(RecordkitError):
    """An optional dependency of the command is not installed."""


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise MissingExtra("drawing the plots needs matplotlib, which is not installed: "
                           "pip install 'recordkit[report]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10,
                         "axes.spines.top": False, "axes.spines.right": False, "figure.dpi": 96,
                         "axes.prop_cycle": plt.cycler(color=["#3b6ea5", "#d1603d", "#6a9a4a", "#8a63a8"])})
    return plt


def _svg(fig) -> str:
    """A figure as inline SVG markup: no XML prolog, DOCTYPE (it names a URL) or metadata."""
    plt = _pyplot()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)


def _figure(name: str, svg: str, caption: str) -> str:
    return (f'<figure class="plot" data-plot="{html.escape(name)}">{svg}'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


# ---------------------------------------------------------------- plots


def _integer_locator():
    from matplotlib.ticker import MaxNLocator
    return MaxNLocator(integer=True, nbins=6)


def lengths_figure(counts: np.ndarray, title: str = "Sequence lengths"):
    """The sequence-length histogram (``counts[k]``: sequences of length k) as a figure."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    used = np.flatnonzero(counts)
    if len(used):
        lo, hi = int(used[0]), int(used[-1])
        if hi - lo <= 60:
            ax.bar(np.arange(lo, hi + 1), counts[lo:hi + 1], width=0.85)
            pad = 0.6 + (2 if hi == lo else 0)  # one length alone: a bar, not the whole width
            ax.set_xlim(max(-0.6, lo - pad), hi + pad)
            ax.xaxis.set_major_locator(_integer_locator())
        else:
            edges = np.unique(np.linspace(lo, hi + 1, 51).astype(np.int64))
            sums = np.add.reduceat(counts[lo:hi + 1], edges[:-1] - lo)
            ax.bar(edges[:-1], sums, width=np.diff(edges) * 0.9, align="edge")
        ax.set_xlabel("samples per sequence")
    ax.set_ylabel("sequences")
    ax.yaxis.set_major_locator(_integer_locator())
    ax.set_title(title)
    return fig


def write_lengths_plot(counts: np.ndarray, path: str, title: str = "Sequence lengths") -> None:
    """``recordkit inspect --plot``: the histogram alone, PNG or SVG by the file name."""
    from recordkit.storage.atomic import AtomicFile
    fmt = "svg" if str(path).lower().endswith(".svg") else "png"
    plt = _pyplot()
    fig = lengths_figure(counts, title)
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt, bbox_inches="tight", dpi=120, metadata={"Date": None} if fmt == "svg" else None)
    plt.close(fig)
    with AtomicFile(path) as f:
        f.write(buf.getvalue())


def _dense_plots(st: DenseStats) -> list[str]:
    if not st.samples or not st.dim:
        return []
    plt = _pyplot()
    out = []
    rows = st.rows()
    dims = st.histogram_dims()
    if len(rows) and dims:
        fig, axes = plt.subplots(1, len(dims), figsize=(1.9 * len(dims) + 0.6, 2.2), squeeze=False)
        for ax, d in zip(axes[0], dims):
            col = rows[:, d]
            col = col[np.isfinite(col)]
            ax.hist(col, bins=40)
            ax.set_title(f"dim {d}")
            ax.tick_params(labelsize=7)
        axes[0][0].set_ylabel("samples")
        fig.suptitle(f"{st.name}: values", fontsize=10)
        fig.tight_layout()
        out.append(_figure(f"{st.name}:values", _svg(fig),
                           f"Value histograms of dimension(s) {', '.join(map(str, dims))} "
                           f"(the most varied) of {st.name}, from {len(rows):,} samples."))
    if st.samples:
        fig, ax = plt.subplots(figsize=(min(6.4, 2.2 + 0.45 * st.dim), 2.4))
        x = np.arange(st.dim)
        step = max(1, st.dim // MAX_POINTS)
        m, s = st.mean[::step], st.std[::step]
        if st.dim <= 40:
            ax.errorbar(x, st.mean, yerr=st.std, fmt="o", markersize=3, capsize=2)
        else:
            ax.plot(x[::step], m, lw=1, label="mean")
            ax.fill_between(x[::step], m - s, m + s, alpha=0.3, label="mean ± std")
            ax.legend(fontsize=7, frameon=False)
        ax.xaxis.set_major_locator(_integer_locator())
        ax.set_xlabel("dimension")
        ax.set_title(f"{st.name}: mean ± std per dimension")
        out.append(_figure(f"{st.name}:mean_std", _svg(fig),
                           f"Per-dimension mean and standard deviation of {st.name} over all {st.samples:,} samples"
                           + (f" (every {step}th dimension drawn)." if step > 1 else ".")))
    return out


def _sparse_plots(st: SparseStats) -> list[str]:
    plt = _pyplot()
    out = []
    if not st.samples:
        return out
    fig, ax = plt.subplots(figsize=(4.6, 2.4))
    per = st.nnz_per_sample
    used = np.flatnonzero(per)
    hi = int(used[-1]) if len(used) else 0
    if hi <= 60:
        ax.bar(np.arange(hi + 1), per[:hi + 1], width=0.85)
    else:
        edges = np.unique(np.linspace(0, hi + 1, 51).astype(np.int64))
        ax.bar(edges[:-1], np.add.reduceat(per[:hi + 1], edges[:-1]), width=np.diff(edges) * 0.9, align="edge")
    ax.set_xlim(-0.6, max(hi, 1) + 0.6)
    ax.xaxis.set_major_locator(_integer_locator())
    ax.set_xlabel("non-zeros per sample")
    ax.set_ylabel("samples")
    ax.yaxis.set_major_locator(_integer_locator())
    ax.set_title(f"{st.name}: non-zeros per sample")
    out.append(_figure(f"{st.name}:nnz", _svg(fig), f"Non-zeros per sample of {st.name} ({st.samples:,} samples)."))

    idx, cnt = st.index_counts()
    if len(cnt):
        freq = np.sort(cnt)[::-1]
        ranks = np.arange(1, len(freq) + 1)
        if len(freq) > MAX_POINTS:
            keep = np.unique(np.geomspace(1, len(freq), MAX_POINTS).astype(np.int64)) - 1
            ranks, freq = ranks[keep], freq[keep]
        fig, ax = plt.subplots(figsize=(4.6, 2.4))
        ax.loglog(ranks, freq, marker=".", lw=1, markersize=3)
        ax.set_xlabel("rank")
        ax.set_ylabel("occurrences")
        share = len(cnt) / st.dim if st.dim else 0.0
        ax.set_title(f"{st.name}: index frequency")
        out.append(_figure(f"{st.name}:rank_frequency", _svg(fig),
                           f"Rank/frequency of the indices of {st.name} (log-log): {len(cnt):,} of {st.dim:,} "
                           f"indices used ({share:.1%} of the dimension)."))
    return out


def _class_plot(st, counts: np.ndarray) -> list[str]:
    plt = _pyplot()
    n = len(counts)
    if n == 0 or n > CLASS_LIMIT:
        return []
    fig, ax = plt.subplots(figsize=(min(9.0, 2.0 + 0.28 * n), 2.6) if n <= MAX_BARS else (9.0, 2.6))
    ax.bar(np.arange(n), counts, width=0.8 if n <= MAX_BARS else 1.0)
    if n <= 40:
        ax.set_xticks(np.arange(n))
    ax.set_xlabel("class")
    ax.set_ylabel("samples")
    ax.yaxis.set_major_locator(_integer_locator())
    ax.set_title(f"{st.name}: class balance")
    total = counts.sum()
    top = int(np.argmax(counts))
    return [_figure(f"{st.name}:classes", _svg(fig),
                    f"Class balance of {st.name}: {np.count_nonzero(counts)} of {n} classes occur; the most frequent, "
                    f"class {top}, holds {counts[top] / max(total, 1):.1%} of {int(total):,} samples.")]


def stream_plots(st) -> list[str]:
    if isinstance(st, BytesStats):
        return []
    if st.is_label:
        plots = _class_plot(st, st.class_counts)
        if plots:
            return plots
    return _dense_plots(st) if isinstance(st, DenseStats) else _sparse_plots(st)


# ---------------------------------------------------------------- page

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#1d2430;background:#f5f6f8}
main{max-width:1100px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px;padding-top:16px;border-top:2px solid #d5d9e0;word-break:break-all}
h3{font-size:16px;margin:24px 0 8px}.sub{color:#5a6473;margin:0 0 16px}
table{border-collapse:collapse;background:#fff;margin:4px 0 12px;font-size:13px}
td,th{border:1px solid #dde1e7;padding:4px 10px;text-align:left}th{background:#eef1f5}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.cards{display:flex;flex-wrap:wrap;gap:10px;margin:8px 0 12px}
.card{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:8px 14px;min-width:96px}
.card b{display:block;font-size:19px}.card span{color:#5a6473;font-size:12px}
.ok{color:#2e7d32}.bad{color:#b3261e}
.plots{display:flex;flex-wrap:wrap;gap:12px}
figure.plot{background:#fff;border:1px solid #dde1e7;border-radius:6px;margin:0;padding:8px;max-width:100%;width:max-content}
figure.plot svg{display:block;max-width:100%;height:auto}
figure.plot figcaption{font-size:12px;color:#5a6473;contain:inline-size;margin-top:4px}
ul.problems{background:#fff;border:1px solid #dde1e7;padding:8px 8px 8px 28px;font:12px ui-monospace,monospace}
ul.problems li{margin:2px 0;word-break:break-all}li.fatal,li.error{color:#b3261e}li.warning{color:#8a5a00}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:6px 10px;font-size:13px;margin:8px 0}
.images{display:grid;grid-template-columns:repeat(auto-fill,minmax(96px,1fr));gap:8px;max-width:900px}
.images figure{margin:0;background:#fff;border:1px solid #dde1e7;padding:4px;text-align:center;font-size:12px}
.images img{display:block;width:100%;image-rendering:pixelated}.images figcaption{color:#5a6473;margin-top:2px}
"""


def render(reports: list[InputReport], *, title: str = "recordkit report", command: str | None = None) -> str:
    """The page for the reports of one or more inputs."""
    from recordkit import __version__
    e = html.escape
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{e(title)}</title>"
             f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{STYLE}</style>"
             f"</head><body><main><h1>{e(title)}</h1>"
             f"<p class=\"sub\">recordkit {e(__version__)}"
             + (f" &middot; <code>{e(command)}</code>" if command else "") + "</p>"]
    if len(reports) > 1:
        parts.append("<ul>" + "".join(f"<li><a href=\"#in{i}\">{e(r.path)}</a> ({e(r.format)})</li>"
                                      for i, r in enumerate(reports)) + "</ul>")
    for i, r in enumerate(reports):
        parts.append(_section(r, i))
    parts.append("</main></body></html>")
    return "".join(parts)


def _section(r: InputReport, i: int) -> str:
    e = html.escape
    out = [f"<section id=\"in{i}\"><h2>{e(r.path)}</h2>", "<h3>Overview</h3>"]
    size = human_size(r.bytes)
    cards = [("format", r.format.upper()), ("size", size.split(" (")[0]),
             (r.unit, f"{r.sequences:,}"),
             ("samples", f"{r.samples:,}"), (r.chunk_label, f"{r.chunks:,}"),
             ("errors", f"{r.errors:,}")]
    out.append("<div class=\"cards\">" + "".join(
        f"<div class=\"card\" data-key=\"{e(k)}\"><b{' class=bad' if k == 'errors' and r.errors else ''}>{e(v)}</b>"
        f"<span>{e(k)}{' (' + e(size.split(' (')[1]) if k == 'size' and ' (' in size else ''}</span></div>"
        for k, v in cards) + "</div>")
    if r.details:
        out.append("<table>" + "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>"
                                       for k, v in r.details.items()) + "</table>")
    if not r.complete:
        out.append("<p class=\"note bad\">The pass stopped at a fatal error (below): the statistics cover what was "
                   "read before it.</p>")
    for note in r.notes + [f"{s.name}: {s.note}" for s in r.streams if s.note]:
        out.append(f"<p class=\"note\">{e(note)}</p>")

    out.append("<h3>Streams</h3>")
    rows = stream_rows(r)
    if rows:
        per_record = r.per_record
        out.append("<table class=\"streams\"><tr><th>" + ("feature" if per_record else "stream")
                   + "</th><th>kind</th><th>dim</th><th>" + ("records" if per_record else "samples") + "</th><th>"
                   + ("values" if per_record else "non-zeros") + "</th><th>sum</th><th>min</th><th>max</th></tr>")
        for s in rows:
            out.append(f"<tr><td>{e(s['name'])}</td><td>{e(s['kind'])}</td><td class=n>{'-' if s['dim'] is None else s['dim']}"
                       f"</td><td class=n>{s['samples']}</td><td class=n>{s['nnz']}</td>"
                       f"<td class=n>{fmt_number(s['sum'])}</td><td class=n>{fmt_number(s['min'])}</td>"
                       f"<td class=n>{fmt_number(s['max'])}</td></tr>")
        out.append("</table>")
    else:
        out.append("<p>No stream could be read.</p>")

    out.append("<h3>Problems</h3>")
    if not r.problems:
        out.append("<p class=\"ok\">No errors or warnings found.</p>")
    else:
        hidden = r.errors + r.warnings - len(r.problems)
        out.append(f"<p>{r.errors:,} error(s), {r.warnings:,} warning(s)"
                   + (f"; the first {len(r.problems)} are listed" if hidden > 0 else "") + ":</p>")
        out.append("<ul class=\"problems\">" + "".join(f"<li class=\"{p.severity}\">{e(p.severity)}: {e(p.text)}</li>"
                                                       for p in r.problems) + "</ul>")

    d = r.length_summary()
    if d["count"] and r.unit == "sequences":
        out.append("<h3>Sequence lengths</h3>")
        out.append(f"<p class=\"lengths\">min {d['min']}, median {d['median']}, mean {d['mean']:.2f}, "
                   f"p90 {d['p90']}, p99 {d['p99']}, max {d['max']} samples per sequence</p>")
        out.append("<div class=\"plots\">" + _figure("lengths", _svg(lengths_figure(r.lengths)),
                                                    f"Sequence lengths of all {d['count']:,} sequences.") + "</div>")
    for st in r.streams:
        plots = stream_plots(st)
        if plots:
            out.append(f"<h3>Stream {e(st.name)} <small>({e(_kind(st))})</small></h3>")
            out.append("<div class=\"plots\">" + "".join(plots) + "</div>")
    if r.images:
        out.append("<h3>Images</h3><div class=\"images\">")
        for im in r.images:
            data = base64.b64encode(im["data"] if "data" in im else _png(im["pixels"])).decode("ascii")
            label = "" if im.get("label") is None else f"label {im['label']}"
            out.append(f"<figure><img alt=\"{e(im.get('alt', 'image'))}\" src=\"data:{im['mime']};base64,{data}\">"
                       f"<figcaption>{e(label)}</figcaption></figure>")
        out.append("</div>")
        out.append(f"<p class=\"sub\">The first {len(r.images)} image records, with their labels.</p>")
    out.append("</section>")
    return "".join(out)


def _png(pixels) -> bytes:
    """Raw pixels (H, W) gray or (H, W, 3) as PNG bytes, scaled to 0..255 when they are not bytes."""
    _pyplot()
    from matplotlib.image import imsave
    a = np.asarray(pixels)
    if a.dtype != np.uint8:
        lo, hi = float(np.nanmin(a)), float(np.nanmax(a))
        a = ((a - lo) / (hi - lo if hi > lo else 1.0) * 255).astype(np.uint8)
    buf = io.BytesIO()
    imsave(buf, a, format="png", cmap="gray" if a.ndim == 2 else None, vmin=0, vmax=255)
    return buf.getvalue()


def _kind(st) -> str:
    if isinstance(st, BytesStats):
        return "bytes"
    text = f"{getattr(st, 'feature_kind', st.kind)}, dim {st.dim}"
    if st.is_label:
        text += _label_kind(st)
    return text


def write_page(path: str, page: str) -> None:
    from recordkit.storage.atomic import AtomicFile
    with AtomicFile(path) as f:
        f.write(page.encode("utf-8"))


def _label_kind(st) -> str:
    """One-hot streams with a class-balance chart are labels; a wider one-hot stream (words
    over a vocabulary) is just one-hot."""
    if not st.one_hot:
        return ", integer labels"
    return ", one-hot labels" if st.dim <= CLASS_LIMIT else ", one-hot"
