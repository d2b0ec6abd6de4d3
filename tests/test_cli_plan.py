"""``recordkit plan``: from the index alone, the counts a ``read`` with the same
arguments delivers, and a peak memory estimate within 25% of a real read's (measured in a child
process with VmHWM); ``read --max-memory M`` stays within the file-order peak + M."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import PEAK_RSS_CODE, write
from recordkit.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def seq_corpus(tmp_path, sequences=700, seed=8):
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(sequences):
        for t in range(int(rng.integers(1, 9))):
            vals = " ".join(f"{v:.3f}" for v in rng.normal(size=5))
            lines.append(f"{s} |x {vals} |y {int(rng.integers(0, 50))}:1")
    return write(tmp_path, "\n".join(lines) + "\n", "seq.ctf")


STREAMS = ["--stream", "x=dense:5", "--stream", "y=sparse:50"]


def run_json(capsys, args):
    assert main(args + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("extra", [
    [],
    ["--randomize", "--seed", "3"],
    ["--randomize", "--window", "2", "--sweeps", "3"],
    ["--randomize", "--window-samples", "900", "--max-samples", "5000"],
    ["--randomize", "--partitions", "3", "--partition-index", "2", "--sweeps", "2"],
    ["--randomize", "--partitions", "3", "--partition-index", "1", "--partition-by", "chunks"],
    ["--randomize", "--epoch-size", "700", "--sweeps", "2"],
    ["--randomize", "--max-memory", "30KB", "--sweeps", "2"],
])
def test_plan_counts_are_what_read_delivers(tmp_path, capsys, extra):
    path = str(seq_corpus(tmp_path))
    args = [path, *STREAMS, "--mb-size", "40", "--chunk-size", "2000", *extra]
    plan = run_json(capsys, ["plan", *args])
    got = run_json(capsys, ["read", *args])
    t = plan["timeline"]
    assert (t["samples_read"], t["sequences_read"], t["minibatches"]) == \
        (got["samples"], got["sequences"], got["minibatches"])
    assert plan["memory"]["window"] == got["memory"]["window"]
    assert plan["memory"]["prefetch"] == got["memory"]["prefetch"]


def test_plan_epochs_add_up_and_end_where_the_epoch_size_says(tmp_path, capsys):
    path = str(seq_corpus(tmp_path))
    plan = run_json(capsys, ["plan", path, *STREAMS, "--mb-size", "32", "--randomize", "--epoch-size", "1000",
                             "--sweeps", "2", "--chunk-size", "2000"])
    t = plan["timeline"]
    epochs = t["epochs"]
    assert t["epochs_total"] == -(-t["total_samples"] // 1000) == len(epochs)
    assert sum(e["samples"] for e in epochs) == t["samples_read"]
    assert sum(e["minibatches"] for e in epochs) == t["minibatches"]
    # the last epoch ends with the data
    assert [e["ends_at_sample"] for e in epochs] == [1000 * (k + 1) for k in range(len(epochs) - 1)] + \
        [t["total_samples"]]


def test_plan_partitions_cover_the_sweep_once(tmp_path, capsys):
    path = str(seq_corpus(tmp_path))
    plan = run_json(capsys, ["plan", path, *STREAMS, "--mb-size", "32", "--randomize", "--partitions", "4",
                             "--chunk-size", "2000"])
    parts = plan["partitions"]
    assert len(parts) == 4
    assert sum(p["sequences"] for p in parts) == plan["chunks"]["sequences"]
    assert sum(p["samples"] for p in parts) == plan["chunks"]["samples"]
    assert max(p["samples"] for p in parts) - min(p["samples"] for p in parts) <= 16


def test_plan_text_names_the_window_memory_and_timeline(tmp_path, capsys):
    path = str(seq_corpus(tmp_path))
    assert main(["plan", path, *STREAMS, "--mb-size", "32", "--randomize", "--max-memory", "30KB",
                 "--chunk-size", "2000", "--epoch-size", "500"]) == 0
    out = capsys.readouterr()
    assert "reduced from the whole data set to fit the memory bound" in out.out
    assert "estimated peak" in out.out and "epoch 0: ends at sample 500 in sweep 0" in out.out
    assert "window reduced" not in out.err  # said once, in the plan, not again as a warning


def test_read_reports_a_reduced_window_as_a_warning(tmp_path, capsys):
    path = str(seq_corpus(tmp_path))
    assert main(["read", path, *STREAMS, "--mb-size", "32", "--randomize", "--max-memory", "30KB",
                 "--chunk-size", "2000"]) == 0
    out = capsys.readouterr()
    assert "recordkit: warning: randomization window" in out.err and "to fit" in out.err
    assert "memory bound 29.3 KiB" in out.out


def test_a_bad_memory_size_is_a_usage_error(tmp_path, capsys):
    path = str(seq_corpus(tmp_path))
    assert main(["read", path, *STREAMS, "--mb-size", "32", "--max-memory", "lots"]) == 2
    assert "--max-memory" in capsys.readouterr().err


# -- peak memory, measured ---------------------------------------------------------------------
CHILD = PEAK_RSS_CODE + (
    "import sys, json\n"
    "from recordkit.cli.main import main\n"
    "main(sys.argv[1:])\n"
    "print(json.dumps({'peak': peak_rss_kb() * 1024}), file=sys.stderr)\n")


def child(args):
    """Run ``recordkit ARGS --json`` in a fresh interpreter: (its JSON output, its own peak RSS)."""
    env_path = str(ROOT / "src")
    p = subprocess.run([sys.executable, "-c", CHILD, *args, "--json"], capture_output=True, text=True,
                       timeout=600, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), json.loads(p.stderr.strip().splitlines()[-1])["peak"]


@pytest.fixture(scope="module")
def dense_corpus(tmp_path_factory):
    """A 60 MiB dense CTF corpus (benchmarks/gen_ctf_corpora.py): decoded chunks weigh as much as the
    interpreter, so an estimate that got the chunks wrong could not land within 25%."""
    out = tmp_path_factory.mktemp("corpus")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gen_ctf_corpora.py"), str(out), "--mb", "60",
                    "--only", "dense"], check=True, capture_output=True, timeout=600)
    return str(out / "dense.ctf")


DENSE = ["--stream", "features=dense:100", "--stream", "labels=dense:10", "--mb-size", "1024"]


@pytest.mark.parametrize("extra", [
    ["--randomize"],                                                   # every chunk at once, 32 MiB chunks
    ["--chunk-size", "2000000", "--randomize"],                        # many small chunks, whole window
    ["--chunk-size", "2000000", "--randomize", "--window", "5", "--sweeps", "2"],
    ["--chunk-size", "2000000", "--randomize", "--max-memory", "20MB"],
    ["--chunk-size", "4000000"],                                       # file order
])
def test_plan_estimates_the_peak_memory_of_a_real_read_within_25_percent(dense_corpus, extra):
    args = [dense_corpus, *DENSE, *extra]
    plan, _ = child(["plan", *args])
    got, peak = child(["read", *args])
    est = plan["memory"]["estimated_peak_bytes"]
    print("RATIO", extra, round(est / peak, 3), est >> 20, peak >> 20)
    assert 0.75 * peak <= est <= 1.25 * peak, (est / 2 ** 20, peak / 2 ** 20)
    assert plan["timeline"]["samples_read"] == got["samples"]


def test_a_bounded_randomized_sweep_stays_within_the_file_order_peak_plus_the_bound(dense_corpus):
    common = [dense_corpus, *DENSE, "--chunk-size", "2000000"]
    _, file_order = child(["read", *common])
    _, unbounded = child(["read", *common, "--randomize", "--max-memory", "none"])
    bound = 12 * 10 ** 6
    got, bounded = child(["read", *common, "--randomize", "--max-memory", str(bound)])
    assert got["memory"]["capped"] and got["memory"]["fits"]
    assert bounded <= file_order + bound
    assert bounded < unbounded  # the bound did something


@pytest.mark.parametrize("partitions,index", [(1, 0), (3, 1)])
def test_plan_epochs_are_the_sources_epochs(tmp_path, partitions, index):
    from collections import Counter
    from recordkit.compose.plan import PlanInput, make_plan
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.ctf import CTFReader
    from helpers import dense, sparse
    path = seq_corpus(tmp_path)
    streams = [dense("x", 5), sparse("y", 50)]
    plan = make_plan(CTFReader(path, streams, chunk_size=2000),
                     PlanInput(randomize=True, seed=4, window=3, minibatch_size=40, max_sweeps=2, epoch_size=900,
                               partitions=partitions, partition_index=index))
    source = MinibatchSource(CTFReader(path, streams, chunk_size=2000), randomize=True, seed=4, window=3,
                             max_sweeps=2, epoch_size=900, num_data_partitions=partitions, partition_index=index)
    mbs, samples = Counter(), Counter()
    for mb in source.minibatches(40):
        mbs[mb.epoch] += 1
        samples[mb.epoch] += mb.num_samples
    planned = {e["epoch"]: (e["minibatches"], e["samples"]) for e in plan["timeline"]["epochs"] if e["minibatches"]}
    assert planned == {e: (mbs[e], samples[e]) for e in mbs}


def test_plan_of_a_composite_source_counts_what_the_source_delivers(tmp_path):
    from recordkit.engine.composite import CompositeDeserializer
    from recordkit.compose.plan import PlanInput, make_plan
    from recordkit.engine.source import MinibatchSource
    from recordkit.formats.ctf import CTFReader
    from helpers import dense, sparse
    rng = np.random.default_rng(2)
    a, b = [], []
    for s in range(300):
        n = int(rng.integers(1, 5))
        a += [f"{s} |x " + " ".join(f"{v:.2f}" for v in rng.normal(size=5)) for _ in range(n)]
        b += [f"{s} |y {int(rng.integers(0, 50))}:1" for _ in range(n)]
    pa, pb = write(tmp_path, "\n".join(a) + "\n", "a.ctf"), write(tmp_path, "\n".join(b) + "\n", "b.ctf")

    def composite():
        return CompositeDeserializer([CTFReader(pa, [dense("x", 5)], chunk_size=1500),
                                      CTFReader(pb, [sparse("y", 50)], chunk_size=1500)])
    plan = make_plan(composite(), PlanInput(randomize=True, window=3, minibatch_size=24, max_sweeps=2))
    source = MinibatchSource(composite(), randomize=True, window=3, max_sweeps=2)
    mbs = list(source.minibatches(24))
    t = plan["timeline"]
    assert (t["samples_read"], t["sequences_read"], t["minibatches"]) == \
        (sum(m.num_samples for m in mbs), sum(m.num_sequences for m in mbs), len(mbs))
    only_a = make_plan(CTFReader(pa, [dense("x", 5)], chunk_size=1500), PlanInput())
    assert plan["chunks"]["decoded_bytes"] > only_a["chunks"]["decoded_bytes"]  # b's stream is counted too


def test_the_plans_minibatch_ends_are_cut_by_the_rule_the_source_picks_with():
    """``plan.minibatch_ends`` and the source's ``pick_run`` share one rule: the first sequence
    always, then one only while it fits, and a minibatch ends once it is full (a zero-length
    sequence after a full minibatch starts the next one)."""
    import numpy as np
    from recordkit.engine import _gather
    from recordkit.compose.plan import minibatch_ends

    def by_picks(lengths, size):
        lengths = np.asarray(lengths, dtype=np.int64)
        pos_j = np.zeros(len(lengths), dtype=np.int64)
        ends, p = [], 0
        while p < len(lengths):
            p = _gather.pick_run(pos_j, lengths, p, len(lengths), 0, size, False, -1)[0]
            ends.append(p)
        return ends

    assert minibatch_ends(np.array([2, 0, 1]), 2).tolist() == by_picks([2, 0, 1], 2) == [1, 3]
    rng = np.random.default_rng(4)
    for _ in range(200):
        lengths = rng.integers(0, 6, size=int(rng.integers(1, 40)))
        size = int(rng.integers(1, 12))
        assert minibatch_ends(lengths, size).tolist() == by_picks(lengths, size)
