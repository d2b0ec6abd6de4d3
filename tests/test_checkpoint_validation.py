"""Checkpoints are untrusted input: every field typed and range-checked before a restore, a bad
one a ValueError naming the field, and the source left as it was."""
import copy
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from helpers import write_valued_cbf
from recordkit.engine.source import MinibatchSource
from recordkit.errors import UsageError
from recordkit.formats.cbf import CBFReader


@pytest.fixture(scope="module")
def cbf(tmp_path_factory):
    return write_valued_cbf(tmp_path_factory.mktemp("ckpt") / "d.cbf", 60, longest=4)


def source(path, **kw):
    kw.setdefault("randomize", True)
    kw.setdefault("seed", 3)
    kw.setdefault("max_sweeps", 3)
    return MinibatchSource(CBFReader(path), **kw)


@pytest.fixture(scope="module")
def state(cbf):
    s = source(cbf)
    s.next_minibatch(16)
    s.next_minibatch(16)
    return s.get_checkpoint_state()


def test_a_valid_checkpoint_still_resumes_exactly(cbf, state):
    a = source(cbf)
    a.next_minibatch(16)
    a.next_minibatch(16)
    b = source(cbf)
    b.restore_from_checkpoint(copy.deepcopy(state))
    for _ in range(6):
        x, y = a.next_minibatch(16), b.next_minibatch(16)
        assert (x is None) == (y is None)
        if x is None:
            break
        np.testing.assert_array_equal(x.keys, y.keys)
        np.testing.assert_array_equal(x["x"].data, y["x"].data)


TAMPERED = [
    ("position", -1), ("position", -1000), ("position", 10**15), ("position", 1.5), ("position", "7"),
    ("position", None), ("position", True),
    ("sweep", -1), ("sweep", 10**18), ("sweep", "abc"), ("sweep", 4),
    ("exhausted", "no"), ("exhausted", 0),
    ("partition", [0, 0]), ("partition", [-1, 2]), ("partition", [2, 2]), ("partition", [1]),
    ("partition", "1,0"), ("partition", [1.0, 0]),
    ("epoch", -3), ("samples_delivered", -1), ("minibatches_delivered", "x"),
    ("bptt", {"slots": "x"}), ("bptt", {"slots": []}), ("bptt", {"slots": [[[0, -1, 0]]]}),
    ("bptt", {"slots": [[[0, 10**9, 0]]]}), ("bptt", {"slots": [[[0, 1]]]}), ("bptt", [1, 2]),
    ("bptt", {"slots": [[[0, 1, -4]]]}),
    ("truncation_length", -1), ("truncation_length", "8"), ("truncation_length", None), ("truncation_length", 2.0),
    ("truncation_length", True), ("truncation_length", 4),
    ("chunk_partition", [2, 5]), ("chunk_partition", "1,0"), ("chunk_partition", [2, 1]),
    ("mixture", "a.cbf"), ("mixture", []), ("mixture", [{"name": "d.cbf"}]),
]


@pytest.mark.parametrize("field, value", TAMPERED)
def test_a_tampered_field_is_a_value_error_naming_it(cbf, state, field, value):
    s = source(cbf)
    with pytest.raises(ValueError, match=f"'{field}'"):
        s.restore_from_checkpoint({**state, field: value})


@pytest.mark.parametrize("field", ["sweep", "position", "partition", "exhausted"])
def test_a_missing_field_is_named(cbf, state, field):
    bad = dict(state)
    del bad[field]
    with pytest.raises(ValueError, match=f"'{field}'"):
        source(cbf).restore_from_checkpoint(bad)


def test_a_position_outside_the_partitions_share_is_refused(cbf):
    a = source(cbf, num_data_partitions=2, partition_index=1)
    a.next_minibatch(8)
    st = a.get_checkpoint_state()
    b = source(cbf, num_data_partitions=2, partition_index=1)
    with pytest.raises(ValueError, match="'position'.*outside this partition's share"):
        b.restore_from_checkpoint({**st, "position": 0})


def test_a_checkpoint_of_another_partition_is_refused_by_a_source_with_its_own(cbf):
    a = source(cbf, num_data_partitions=2, partition_index=0)
    a.next_minibatch(8)
    with pytest.raises(ValueError, match="'partition'"):
        source(cbf, num_data_partitions=2, partition_index=1).restore_from_checkpoint(a.get_checkpoint_state())


def test_a_refused_checkpoint_leaves_the_source_as_it_was(cbf, state):
    a, b = source(cbf), source(cbf)
    a.next_minibatch(16)
    b.next_minibatch(16)
    with pytest.raises(ValueError):
        b.restore_from_checkpoint({**state, "position": -5})
    np.testing.assert_array_equal(a.next_minibatch(16).keys, b.next_minibatch(16).keys)


def test_checkpoint_json_that_is_not_a_dict_is_refused(cbf):
    for bad in (None, [], "state", 3):
        with pytest.raises(ValueError):
            source(cbf).restore_from_checkpoint(bad)


def test_the_issue_reproduction_negative_positions_never_reach_the_kernels(cbf, state, tmp_path):
    """Positions -1..-1000 in a checkpoint state must never reach the kernels (they could crash the
    process or return other heap memory).
    Run in a child so that a crash fails this test instead of the test run."""
    script = tmp_path / "repro.py"
    script.write_text(
        "import json, sys\n"
        "from recordkit.engine.source import MinibatchSource\n"
        "from recordkit.formats.cbf import CBFReader\n"
        f"state = json.loads({json.dumps(json.dumps(state))})\n"
        "refused = 0\n"
        "for pos in list(range(-1, -22, -1)) + [-1000]:\n"
        f"    s = MinibatchSource(CBFReader({cbf!r}), randomize=True, seed=3, max_sweeps=3)\n"
        "    try:\n"
        "        s.restore_from_checkpoint({**state, 'position': pos})\n"
        "    except ValueError:\n"
        "        refused += 1\n"
        "        continue\n"
        "    s.next_minibatch(16)\n"
        "print(refused)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "22"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_checkpoints_give_a_value_error_or_a_working_source(cbf, state, data):
    """Random values in random fields (structurally valid but lying, or nonsense): either the
    restore is refused with a ValueError, or the restored source delivers real minibatches."""
    bad = copy.deepcopy(state)
    for field in data.draw(st.lists(st.sampled_from(sorted(state)), min_size=1, max_size=3)):
        if data.draw(st.booleans()):
            bad[field] = data.draw(json_values)
        else:
            bad.pop(field, None)
    s = source(cbf)
    try:
        s.restore_from_checkpoint(bad)
    except ValueError:
        return
    for _ in range(3):
        mb = s.next_minibatch(16)
        if mb is None:
            break
        assert set(mb.keys.tolist()) <= set(range(60))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 400))
def test_a_truncated_checkpoint_file_is_an_error_not_a_restore(cbf, state, cut):
    full = json.dumps(state)
    text = full[:min(cut, len(full) - 1)]
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return  # the caller's json.load fails first
    with pytest.raises(ValueError):
        source(cbf).restore_from_checkpoint(parsed)


def keys_of(src, **partition):
    return [k for mb in src.minibatches(8, **partition) for k in mb.keys.tolist()]


def partition_state(cbf, index):
    a = source(cbf, max_sweeps=1)
    a.next_minibatch(8, num_data_partitions=2, partition_index=index)
    return a, json.loads(json.dumps(a.get_checkpoint_state()))


def test_a_checkpoint_of_another_partition_is_refused_when_the_first_minibatch_reads_it(cbf):
    """Partition 1's state read as partition 0 used to continue from partition 1's position, past
    the end of partition 0's share: the rest of partition 0's sweep was silently skipped."""
    a, state = partition_state(cbf, 1)
    b = source(cbf, max_sweeps=1)
    b.restore_from_checkpoint(state)
    with pytest.raises(UsageError, match="checkpoint field 'partition': the checkpoint was taken on partition 1 "
                                         "of 2, this source reads partition 0 of 2"):
        b.next_minibatch(8, num_data_partitions=2, partition_index=0)
    with pytest.raises(UsageError, match="taken on partition 1 of 2, this source reads partition 0 of 1"):
        b.next_minibatch(8)
    # the partition it was taken on still resumes exactly
    assert keys_of(b, num_data_partitions=2, partition_index=1) == keys_of(a, num_data_partitions=2,
                                                                             partition_index=1)


def test_a_checkpoint_of_another_partition_is_refused_by_the_restore_that_names_one(cbf):
    _, state = partition_state(cbf, 1)
    b = source(cbf, max_sweeps=1)
    before = b.get_checkpoint_state()
    with pytest.raises(UsageError, match="'partition': the checkpoint was taken on partition 1 of 2, this source "
                                         "reads partition 0 of 2"):
        b.restore_from_checkpoint(state, num_data_partitions=2, partition_index=0)
    assert b.get_checkpoint_state() == before


def test_every_partitions_states_read_as_another_partition_resume_that_partition(cbf):
    """The list form is planned for the partition the first minibatch asks for (here partition 0's
    own state), not the one given to the restore."""
    a, s0 = partition_state(cbf, 0)
    _, s1 = partition_state(cbf, 1)
    b = source(cbf, max_sweeps=1)
    b.restore_from_checkpoint([s0, s1], num_data_partitions=2, partition_index=1)
    assert keys_of(b, num_data_partitions=2, partition_index=0) == keys_of(a, num_data_partitions=2,
                                                                             partition_index=0)
