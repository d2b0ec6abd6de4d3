"""A manifest cannot switch off the key check it is there for: keys all set to 0 (repeated keys)
or ``keyed: false`` still have a keyed output's keys compared, position by position, so an
output whose keys differ fails; a genuine manifest of a source without keys still passes."""
from __future__ import annotations

import json

import numpy as np
import pytest

from bridge_corpus import STREAMS, cli, make_ctf


def edited(manifest, out, *, keys=None, **meta_changes) -> str:
    z = dict(np.load(manifest))
    meta = json.loads(str(z["meta"]))
    meta.update(meta_changes)
    z["meta"] = np.array(json.dumps(meta))
    if keys is not None:
        z["keys"] = keys(z["keys"])
    with open(out, "wb") as f:
        np.savez(f, **z)
    return str(out)


@pytest.fixture
def converted(tmp_path, capsys):
    """(manifest, the output, an output of the same data under other keys)."""
    src = make_ctf(tmp_path / "in.ctf", n=8)
    out, manifest = tmp_path / "out.ctf", tmp_path / "m.npz"
    assert cli(capsys, "convert", src, out, *STREAMS, "--manifest", manifest)[0] == 0
    text = open(src).read().splitlines()
    first = text[0].split()[0]
    other_src = tmp_path / "other.ctf"  # the first sequence's id changed, nothing else
    other_src.write_text("\n".join(("999" + line[len(first):]) if line.split()[0] == first else line
                                   for line in text) + "\n")
    other = tmp_path / "other.ctf.out"
    assert cli(capsys, "convert", other_src, other, "--to", "ctf", *STREAMS)[0] == 0
    return str(manifest), str(out), str(other)


def verify(capsys, manifest, dst):
    return cli(capsys, "verify", "--manifest", manifest, dst, *STREAMS)


def test_a_manifest_with_every_key_zero_fails_against_a_keyed_output(converted, capsys, tmp_path):
    manifest, out, _ = converted
    assert verify(capsys, manifest, out)[0] == 0
    zeros = edited(manifest, tmp_path / "zeros.npz", keys=np.zeros_like)
    code, text, err = verify(capsys, zeros, out)
    assert code == 1 and "at this position in the manifest" in text, text + err
    assert "keys compared position by position" in err


def test_a_manifest_edited_to_keyed_false_still_compares_a_keyed_outputs_keys(converted, capsys, tmp_path):
    manifest, out, other = converted
    assert verify(capsys, manifest, other)[0] == 1  # matched by key: key 999 is not in the manifest
    unkeyed = edited(manifest, tmp_path / "unkeyed.npz", keyed=False)
    code, text, err = verify(capsys, unkeyed, other)
    assert code == 1 and "key 999 in DST" in text, text + err
    assert verify(capsys, unkeyed, out)[0] == 0  # the same keys, compared position by position


def test_only_the_caller_can_skip_the_keys(converted, capsys, tmp_path):
    manifest, _, other = converted
    unkeyed = edited(manifest, tmp_path / "unkeyed.npz", keyed=False)
    code, _, err = cli(capsys, "verify", "--manifest", unkeyed, other, *STREAMS, "--keys", "no")
    assert code == 0 and "keys not compared" in err


def test_a_manifest_of_a_source_without_keys_still_verifies_its_keyed_output(tmp_path, capsys):
    src = make_ctf(tmp_path / "in.ctf", n=8)
    cbf, manifest, out = tmp_path / "a.cbf", tmp_path / "m.npz", tmp_path / "back.ctf"
    assert cli(capsys, "convert", src, cbf, *STREAMS)[0] == 0
    assert cli(capsys, "convert", cbf, out, "--manifest", manifest)[0] == 0  # CBF stores no keys: ordinals
    assert json.loads(str(np.load(manifest)["meta"]))["keyed"] is False
    code, text, err = cli(capsys, "verify", "--manifest", manifest, out, "--stream", "feat=dense:4",
                          "--stream", "lab=sparse:50")
    assert code == 0, text + err
