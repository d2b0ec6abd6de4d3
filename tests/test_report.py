"""`recordkit report` (one HTML page per data set) and `recordkit inspect --plot`, read as a
person would: the page's headings, its numbers against `recordkit stats`, every plot embedded,
nothing fetched from the network, problems located on the page, each format."""
import json
import re
import subprocess
import sys
from html import unescape

import numpy as np
import pytest

from helpers import write
from recordkit.cli.main import main

pytest.importorskip("matplotlib")

DEMO_STREAMS = ["--stream", "word=sparse:5000:w", "--stream", "features=dense:4:f", "--stream", "tag=sparse:12:t"]


@pytest.fixture(scope="module")
def demo_ctf(tmp_path_factory):
    from recordkit.cli import demo_corpus as demo
    d = tmp_path_factory.mktemp("demo")
    return demo.run(str(d), 600, echo=lambda *a: None)["path"]


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def page_text(path) -> str:
    return path.read_text(encoding="utf-8")


def headings(page: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", unescape(h)).strip() for h in re.findall(r"<h[123][^>]*>(.*?)</h[123]>", page)]


def plots(page: str) -> dict:
    """data-plot name -> the figure's markup."""
    return dict(re.findall(r'<figure class="plot" data-plot="([^"]+)">(.*?)</figure>', page, flags=re.S))


def assert_self_contained(page: str) -> None:
    assert "<script" not in page and "<link" not in page and "@import" not in page
    for attr in re.findall(r'\b(?:src|href)\s*=\s*"([^"]*)"', page):
        assert attr.startswith(("data:", "#")), attr
    assert not re.search(r"url\(\s*['\"]?(?!data:|#)", page)
    assert "<!DOCTYPE svg" not in page


def stats_json(capsys, path, *args) -> dict:
    code, out, _ = run(capsys, "stats", path, *args, "--json")
    assert code == 0
    return json.loads(out)


def table_rows(page: str, cls: str) -> list[list[str]]:
    table = re.search(rf'<table class="{cls}">(.*?)</table>', page, flags=re.S).group(1)
    return [[unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S) if "<td" in row]


def card(page: str, key: str) -> str:
    return unescape(re.search(rf'data-key="{key}"><b[^>]*>(.*?)</b>', page).group(1))


def test_ctf_report_has_the_overview_every_plot_and_the_numbers_of_stats(demo_ctf, tmp_path, capsys):
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", demo_ctf, *DEMO_STREAMS, "-o", out)
    assert code == 0, err
    page = page_text(out)
    hs = headings(page)
    for h in ["Overview", "Streams", "Problems", "Sequence lengths", "Stream word (sparse, dim 5000, one-hot)",
              "Stream features (dense, dim 4)", "Stream tag (sparse, dim 12, one-hot labels)"]:
        assert h in hs
    stats = stats_json(capsys, demo_ctf, *DEMO_STREAMS)
    assert card(page, "format") == "CTF"
    assert card(page, "sequences") == f"{stats['sequences']:,}"
    assert card(page, "errors") == "0"
    rows = {r[0]: r for r in table_rows(page, "streams")}
    for name, t in stats["streams"].items():
        _, _, _, samples, nnz, total, lo, hi = rows[name]
        assert (int(samples), int(nnz)) == (t["samples"], t["nnz"])
        assert (total, lo, hi) == tuple(f"{t[k]:.6g}" for k in ("sum", "min", "max"))
    assert card(page, "samples") == f"{stats['streams']['tag']['samples']:,}"  # one tag per word
    figs = plots(page)
    assert set(figs) == {"lengths", "word:nnz", "word:rank_frequency", "features:values", "features:mean_std",
                         "tag:classes"}
    for name, markup in figs.items():
        assert markup.lstrip().startswith("<svg") and "</svg>" in markup, name
    assert "No errors or warnings found." in page
    assert_self_contained(page)


def test_numbers_on_the_page_follow_the_data(tmp_path, capsys):
    """A small hand-written file: lengths, class balance and the share of the dimension used
    are what the data says, not layout."""
    p = write(tmp_path, "1 |x 1 2 |y 0:1\n1 |x 3 4 |y 2:1\n2 |x 5 6 |y 2:1\n3 |x 0 0 |y 2:1\n3 |x 1 1\n3 |x 1 1\n")
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", p, "--stream", "X=dense:2:x", "--stream", "Y=sparse:4:y", "-o", out)
    page = page_text(out)
    assert "min 1, median 2, mean 2.00, p90 3, p99 3, max 3 samples per sequence" in page
    assert "Class balance of Y: 2 of 4 classes occur; the most frequent, class 2, holds 75.0% of 4 samples." in page
    assert card(page, "samples") == "6" and card(page, "sequences") == "3"
    from recordkit.report.stats import collect
    from recordkit.engine.streams import StreamSpec
    rep = collect(str(p), streams=[StreamSpec("X", "dense", 2, "x"), StreamSpec("Y", "sparse", 4, "y")])
    x = rep.stream("X")
    data = np.array([[1, 2], [3, 4], [5, 6], [0, 0], [1, 1], [1, 1]], dtype=np.float64)
    np.testing.assert_allclose(x.mean, data.mean(0))
    np.testing.assert_allclose(x.std, data.std(0))
    assert list(rep.lengths) == [0, 1, 1, 1]
    assert list(rep.stream("Y").class_counts) == [1, 0, 3, 0]


def test_sparse_index_share_of_the_dimension_is_on_the_page(tmp_path, capsys):
    p = write(tmp_path, "".join(f"{i} |w {i % 7}:1 {(i * 3) % 50}:2\n" for i in range(100)))
    out = tmp_path / "r.html"
    assert run(capsys, "report", p, "--stream", "W=sparse:1000:w", "-o", out)[0] == 0
    page = page_text(out)
    used = len({i % 7 for i in range(100)} | {(i * 3) % 50 for i in range(100)})
    assert f"{used:,} of 1,000 indices used ({used / 1000:.1%} of the dimension)" in page
    assert {"W:nnz", "W:rank_frequency"} <= set(plots(page))


def test_bad_ctf_input_is_located_on_the_page_and_the_exit_status_says_so(tmp_path, capsys):
    p = write(tmp_path, "1 |a 1 2\n2 |a 1 zz\n3 |a 3 4\n4 |a 5\n")
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", p, "--stream", "A=dense:2:a", "-o", out)
    assert code == 1
    page = page_text(out)
    assert card(page, "errors") != "0"
    problems = re.search(r'<ul class="problems">(.*?)</ul>', page, flags=re.S).group(1)
    assert f"{p}:2:" in unescape(problems)  # the line of the bad value
    assert "Stream A" in " ".join(headings(page))  # the good sequences are still shown


def test_errors_beyond_max_errors_stop_the_pass_and_the_page_says_where(tmp_path, capsys):
    p = write(tmp_path, "".join(f"{i} |a 1 x\n" for i in range(10)))
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", p, "--stream", "A=dense:2:a", "--max-errors", "3", "-o", out)
    page = unescape(page_text(out))
    assert code == 1
    assert "The pass stopped at a fatal error" in page
    assert "raise --max-errors" in page and f"{p}:4:" in page


def test_errors_listed_up_to_the_limit_and_all_counted(tmp_path, capsys):
    p = write(tmp_path, "".join(f"{i} |a 1 x\n" for i in range(30)) + "99 |a 1 2\n")
    out = tmp_path / "r.html"
    run(capsys, "report", p, "--stream", "A=dense:2:a", "--show-errors", "5", "-o", out)
    page = page_text(out)
    assert card(page, "errors") == "30"
    assert page.count('<li class="error">') == 5
    assert "the first 5 are listed" in page


def test_cbf_report_matches_stats_and_shows_the_version(demo_ctf, tmp_path, capsys):
    cbf = tmp_path / "d.cbf"
    assert run(capsys, "convert", demo_ctf, cbf, *DEMO_STREAMS)[0] == 0
    out = tmp_path / "r.html"
    assert run(capsys, "report", cbf, "-o", out)[0] == 0
    page = page_text(out)
    stats = stats_json(capsys, cbf)
    assert card(page, "format") == "CBF" and card(page, "sequences") == f"{stats['sequences']:,}"
    rows = {r[0]: r for r in table_rows(page, "streams")}
    for name, t in stats["streams"].items():
        assert rows[name][3:] == [str(t["samples"]), str(t["nnz"])] + [f"{t[k]:.6g}" for k in ("sum", "min", "max")]
    assert "<th>version</th>" in page
    assert {"lengths", "tag:classes", "features:values"} <= set(plots(page))
    assert_self_contained(page)


def test_corrupt_cbf_chunk_is_located_and_the_other_chunks_still_count(demo_ctf, tmp_path, capsys):
    from recordkit.formats.cbf import CBFReader
    cbf = tmp_path / "d.cbf"
    run(capsys, "convert", demo_ctf, cbf, *DEMO_STREAMS, "--chunk-size", "8192")
    with CBFReader(cbf) as r:
        chunks = r.chunks
    assert len(chunks) > 2
    raw = bytearray(cbf.read_bytes())
    bad = chunks[1]
    raw[bad.offset:bad.offset + 16] = b"\xff" * 16
    cbf.write_bytes(bytes(raw))
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", cbf, "-o", out)
    page = unescape(page_text(out))
    assert code == 1
    assert re.search(r"offset \d+", page) and card(page, "errors") == "1"
    assert int(card(page, "sequences").replace(",", "")) == sum(c.num_sequences for c in chunks) - bad.num_sequences


def test_several_inputs_on_one_page(demo_ctf, tmp_path, capsys):
    cbf = tmp_path / "d.cbf"
    run(capsys, "convert", demo_ctf, cbf, *DEMO_STREAMS)
    out = tmp_path / "r.html"
    assert run(capsys, "report", demo_ctf, cbf, *DEMO_STREAMS, "-o", out)[0] == 0
    page = page_text(out)
    assert page.count("<section") == 2 and 'href="#in1"' in page


def test_missing_matplotlib_names_the_extra(demo_ctf, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from recordkit.cli.main import main\n"
            f"sys.exit(main(['report', {demo_ctf!r}, *{DEMO_STREAMS!r}, '-o', {str(tmp_path / 'r.html')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1
    assert "pip install 'recordkit[report]'" in out.stderr and "matplotlib" in out.stderr
    assert not (tmp_path / "r.html").exists()


def test_ctf_without_streams_is_a_usage_error(demo_ctf, tmp_path, capsys):
    assert main(["report", demo_ctf, "-o", str(tmp_path / "r.html")]) == 2
    assert "--stream" in capsys.readouterr().err


@pytest.mark.parametrize("suffix, magic", [(".png", b"\x89PNG"), (".svg", b"<?xml")])
def test_inspect_plot_writes_the_length_histogram(demo_ctf, tmp_path, capsys, suffix, magic):
    out = tmp_path / f"lengths{suffix}"
    code, text, _ = run(capsys, "inspect", demo_ctf, "--plot", out)
    assert code == 0 and "sequence lengths" in text
    data = out.read_bytes()
    assert data.startswith(magic)
    if suffix == ".svg":
        assert "samples per sequence" in data.decode()


def make_ofrecord(d, n=40, seed=0):
    """n records: an encoded image (JPEG and PNG alternating), an int64 label, a fixed-length
    float feature and a ragged one; written in 2 parts (records 0..n/2-1 in the first)."""
    import io
    from PIL import Image
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    rng = np.random.default_rng(seed)
    with OFRecordWriter(d, 2, sharding="contiguous", total=n) as w:
        for k in range(n):
            img = (rng.random((12, 12, 3)) * 255).astype(np.uint8)
            b = io.BytesIO()
            Image.fromarray(img).save(b, format="PNG" if k % 2 else "JPEG")
            w.write({"image": [b.getvalue()], "label": np.array([k % 5], np.int64),
                     "x": rng.normal(size=6).astype(np.float32), "ragged": np.arange(k % 3 + 1, dtype=np.float32)})
    return d


def test_ofrecord_report_numbers_images_and_labels(tmp_path, capsys):
    d = make_ofrecord(tmp_path / "ofr")
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", d, "-o", out)
    assert code == 0, err
    page = page_text(out)
    stats = stats_json(capsys, d)
    assert card(page, "format") == "OFRECORD" and card(page, "records") == "40" and card(page, "parts") == "2"
    rows = {r[0]: r for r in table_rows(page, "streams")}
    assert set(rows) == set(stats["features"])
    for name, t in stats["features"].items():
        assert rows[name][1].split(",")[0] == t["kind"]
        assert rows[name][3:] == [str(t["records"]), str(t["values"])] + [f"{t[k]:.6g}" if t[k] is not None else "-"
                                                                          for k in ("sum", "min", "max")]
    assert "JPEG" in rows["image"][1] and rows["ragged"][2] == "-" and rows["x"][2] == "6"
    assert {"label:classes", "x:values", "x:mean_std"} == set(plots(page))
    imgs = re.findall(r'<img alt="[^"]*" src="data:(image/(?:jpeg|png));base64,([^"]+)"><figcaption>label (\d)<',
                      page)
    assert len(imgs) == 16
    assert [m for m, _, _ in imgs[:2]] == ["image/jpeg", "image/png"]
    assert [int(lab) for _, _, lab in imgs] == [k % 5 for k in range(16)]  # part 0 holds records 0..19 in order
    assert "Sampled: the image grid shows the first 16 records" in page
    assert "lengths vary between records" in page
    assert_self_contained(page)


def test_ofrecord_bad_record_is_located_and_the_rest_still_counts(tmp_path, capsys):
    from recordkit.formats.ofrecord.writer import OFRecordWriter
    d = tmp_path / "ofr"
    with OFRecordWriter(d, 1) as w:
        for k in range(5):
            w.write({"x": np.full(3, k, np.float32)})
    part = next(p for p in d.iterdir() if p.name.startswith("part-"))
    raw = bytearray(part.read_bytes())
    frame = 8 + (len(raw) // 5 - 8)  # payloads are equal: record 1's payload starts here
    raw[frame + 8:frame + 12] = b"\xff\xff\xff\xff"
    part.write_bytes(bytes(raw))
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", d, "-o", out)
    page = unescape(page_text(out))
    assert code == 1
    assert card(page, "errors") == "1" and card(page, "records") == "4"
    assert f"{part}: record does not parse as an OFRecord" in page and f"(byte offset {frame}, record 1)" in page
    rows = {r[0]: r for r in table_rows(page, "streams")}
    assert rows["x"][3] == "4"


def test_singa_store_report_shows_labels_and_images(tmp_path, capsys):
    from test_singa_prepare import make_cifar
    from recordkit.formats.singa import records
    from recordkit.formats.singa.store import open as open_store
    src, _ = make_cifar(tmp_path, per_batch=4, test=1, seed=2)
    run(capsys, "prepare", "cifar10", src, tmp_path / "out")
    store = tmp_path / "out" / "train_data.bin"
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", store, "-o", out)
    assert code == 0, err
    page = page_text(out)
    with open_store(str(store), "read") as s:
        labels = [records.decode_record(v)["label"] for _, v in s]
    assert card(page, "format") == "SINGA" and card(page, "records") == f"{len(labels)}"
    assert {"features:values", "features:mean_std", "label:classes"} == set(plots(page))
    counts = np.bincount(labels, minlength=10)
    top = int(np.argmax(counts))
    assert f"class {top}, holds {counts[top] / len(labels):.1%} of {len(labels)} samples" in page
    imgs = re.findall(r'src="data:image/png;base64,([^"]+)"><figcaption>label (\d+)<', page)
    assert [int(lab) for _, lab in imgs] == labels[:16]
    import base64
    import io
    from PIL import Image
    first = Image.open(io.BytesIO(base64.b64decode(imgs[0][0])))
    assert first.size == (32, 32)
    assert_self_contained(page)


def test_report_of_a_truncated_singa_store_says_where(tmp_path, capsys):
    from test_singa_prepare import make_cifar
    src, _ = make_cifar(tmp_path, per_batch=2, test=1, seed=2)
    run(capsys, "prepare", "cifar10", src, tmp_path / "out")
    store = tmp_path / "out" / "train_data.bin"
    store.write_bytes(store.read_bytes()[:-100])
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", store, "-o", out)
    page = unescape(page_text(out))
    assert code == 1 and card(page, "errors") != "0"
    assert str(store) in re.search(r'<ul class="problems">(.*?)</ul>', page, flags=re.S).group(1)


def test_singa_binfile_of_image_records_shows_jpeg_images_and_labels(tmp_path, capsys):
    import io
    from PIL import Image
    from recordkit.formats.singa import records
    from recordkit.formats.singa.store import open as open_store
    p = tmp_path / "img.bin"
    rng = np.random.default_rng(4)
    jpegs = []
    with open_store(str(p), "create", "binfile") as s:
        for i in range(20):
            b = io.BytesIO()
            Image.fromarray((rng.random((8, 8, 3)) * 255).astype(np.uint8)).save(b, format="JPEG")
            jpegs.append(b.getvalue())
            s.write(f"{i:05d}".encode(), records.encode_image_record_v1([8, 8, 3], i % 3, b.getvalue()))
    out = tmp_path / "r.html"
    code, _, err = run(capsys, "report", p, "-o", out)
    assert code == 0, err
    page = page_text(out)
    assert card(page, "records") == "20" and "SINGA 1.x ImageRecord, shape [8, 8, 3]" in page
    imgs = re.findall(r'src="data:image/jpeg;base64,([^"]+)"><figcaption>label (\d+)<', page)
    import base64
    assert [base64.b64decode(d) for d, _ in imgs] == jpegs[:16]
    assert [int(lab) for _, lab in imgs] == [i % 3 for i in range(16)]
    assert set(plots(page)) == {"label:classes"}
    assert "3 of 3 classes occur; the most frequent, class 0, holds 35.0% of 20 samples" in page


def test_singa_store_of_other_values_is_shown_as_bytes_not_as_errors(tmp_path, capsys):
    from recordkit.formats.singa.store import open as open_store
    p = tmp_path / "kv.bin"
    with open_store(str(p), "create", "kvfile") as s:
        for i in range(5):
            s.write(f"k{i}".encode(), b"hello world %d" % i)
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", p, "-o", out)
    page = unescape(page_text(out))
    assert code == 0 and card(page, "errors") == "0" and card(page, "records") == "5"
    assert "the values are not SINGA records" in page and "13 .. 13 (mean 13.0)" in page


def test_sparse_stream_wider_than_a_bincount_counts_indices_exactly(tmp_path, monkeypatch):
    from recordkit.engine.streams import StreamSpec
    from recordkit.report import stats as report_stats
    monkeypatch.setattr(report_stats, "BINCOUNT_DIM", 100)  # the merge path, on a small file
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 1 << 30, size=(300, 3))
    p = write(tmp_path, "".join(f"{i} |w {a}:1 {b}:2 {c}:1\n" for i, (a, b, c) in enumerate(idx)))
    rep = report_stats.collect(str(p), streams=[StreamSpec("W", "sparse", 1 << 30, "w")], chunk_size=2048)
    assert rep.chunks > 1
    got_idx, got_cnt = rep.stream("W").index_counts()
    want_idx, want_cnt = np.unique(idx, return_counts=True)
    np.testing.assert_array_equal(got_idx, want_idx)
    np.testing.assert_array_equal(got_cnt, want_cnt)
    assert not rep.stream("W").is_label and list(rep.stream("W").nnz_per_sample) == [0, 0, 0, 300]


def test_dense_one_hot_labels_get_a_class_balance_chart(tmp_path, capsys):
    lines = "".join(f"{i} |l {' '.join('1' if j == i % 3 else '0' for j in range(3))} |x {i}\n" for i in range(10))
    p = write(tmp_path, lines)
    out = tmp_path / "r.html"
    assert run(capsys, "report", p, "--stream", "L=dense:3:l", "--stream", "X=dense:1:x", "-o", out)[0] == 0
    page = page_text(out)
    assert "Stream L (dense, dim 3, one-hot labels)" in headings(page)
    assert "3 of 3 classes occur; the most frequent, class 0, holds 40.0% of 10 samples" in page
    # X holds 0..9: integer values in range, so it counts as integer labels too
    assert "Stream X (dense, dim 1, integer labels)" in headings(page)


def test_ctf_and_ofrecord_inputs_on_one_page(demo_ctf, tmp_path, capsys):
    d = make_ofrecord(tmp_path / "ofr", n=10)
    out = tmp_path / "r.html"
    assert run(capsys, "report", demo_ctf, d, *DEMO_STREAMS, "-o", out)[0] == 0
    page = page_text(out)
    assert page.count("<section") == 2
    assert {"lengths", "tag:classes", "label:classes", "x:values"} <= set(plots(page))
    assert_self_contained(page)


def test_inspect_plot_is_refused_for_data_without_sequences(tmp_path, capsys):
    d = make_ofrecord(tmp_path / "ofr", n=4)
    code, _, err = run(capsys, "inspect", d, "--plot", tmp_path / "l.png")
    assert code == 2 and "--plot" in err and not (tmp_path / "l.png").exists()


def test_screenshot_tool_renders_the_page(demo_ctf, tmp_path, capsys):
    import shutil
    if not any(shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")):
        pytest.skip("no chromium (apt-get install -y chromium)")
    out = tmp_path / "r.html"
    run(capsys, "report", demo_ctf, *DEMO_STREAMS, "-o", out)
    from pathlib import Path
    tool = Path(__file__).resolve().parent.parent / "tools" / "report" / "screenshot.py"
    png = tmp_path / "r.png"
    res = subprocess.run([sys.executable, str(tool), str(out), str(png), "--width", "900", "--height", "700"],
                         capture_output=True, text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    from PIL import Image
    img = np.asarray(Image.open(png).convert("L"))
    assert img.shape == (700, 900)
    assert (img < 128).mean() > 0.01  # text and plots were drawn, not a blank page


def test_inspect_plot_without_matplotlib_names_the_extra(demo_ctf, tmp_path):
    code = ("import sys; sys.modules['matplotlib'] = None\n"
            "from recordkit.cli.main import main\n"
            f"sys.exit(main(['inspect', {demo_ctf!r}, '--plot', {str(tmp_path / 'l.png')!r}]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and "pip install 'recordkit[report]'" in out.stderr
    assert out.stdout == "" and not (tmp_path / "l.png").exists()


def test_library_entry_point_writes_the_same_page(tmp_path):
    from recordkit.report import write_report
    d = make_ofrecord(tmp_path / "ofr", n=6)
    reps = write_report([str(d)], str(tmp_path / "r.html"), title="mine")
    page = page_text(tmp_path / "r.html")
    assert reps[0].sequences == 6 and "<title>mine</title>" in page and "x:mean_std" in plots(page)


def test_a_declared_stream_never_present_is_an_error_and_the_rest_is_still_counted(tmp_path, capsys):
    p = write(tmp_path, "1 |a 1 2 |L 1\n2 |a 3 4 |L 0\n")
    out = tmp_path / "r.html"
    code, _, _ = run(capsys, "report", p, "--stream", "A=dense:2:a", "--stream", "lab=dense:1:l", "-o", out)
    page = unescape(page_text(out))
    assert code == 1 and card(page, "errors") == "1" and card(page, "sequences") == "2"
    assert "stream 'lab' has no sample in the whole input" in page and f"{p}:1:" in page
    rows = {r[0]: r for r in table_rows(page, "streams")}
    assert rows["A"][3] == "2" and rows["lab"][3] == "0"


def test_ofrecord_part_options_select_the_parts(tmp_path, capsys):
    d = make_ofrecord(tmp_path / "ofr", n=10)
    out = tmp_path / "r.html"
    assert run(capsys, "report", d, "--data-part-num", "1", "--part-name-suffix-length", "5", "-o", out)[0] == 0
    page = page_text(out)
    assert card(page, "parts") == "1" and card(page, "records") == "5"
