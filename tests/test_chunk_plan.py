"""How the Ray and Spark reads cut an input into files: the formats whose registry entry has
``file_openers`` file by file (keys numbered on across files where the format keeps no keys),
any other through its one reader."""
import dataclasses

import numpy as np
import pytest

from recordkit.engine.streams import StreamSpec
from recordkit.errors import UsageError
from recordkit.formats import registry
from recordkit.formats.cbf import CBFReader, CBFWriter
from recordkit.integrations.chunk_plan import ChunkPlan, openers_for

X = [StreamSpec("x", "dense", 2)]


def _cbf(path, first, count):
    with CBFWriter(path, X) as w:
        for i in range(first, first + count):
            w.write({"x": np.full((1, 2), i, dtype=np.float32)})


def test_a_cbf_directory_is_planned_part_by_part_with_its_keys_numbered_on(tmp_path):
    (tmp_path / "set").mkdir()
    _cbf(tmp_path / "set" / "part-00000.cbf", 0, 3)
    _cbf(tmp_path / "set" / "part-00001.cbf", 3, 2)
    kind, openers, continue_keys = openers_for(tmp_path / "set")
    assert kind == "cbf" and continue_keys
    assert [o.func for o in openers] == [CBFReader, CBFReader]
    assert [o.args[0].rsplit("/", 1)[1] for o in openers] == ["part-00000.cbf", "part-00001.cbf"]
    assert [i.key_base for i in ChunkPlan(openers, continue_keys=continue_keys).inputs] == [0, 3]


def test_a_ctf_file_planned_without_streams_asks_for_them(tmp_path):
    (tmp_path / "a.ctf").write_text("0 |x 1 2\n")
    with pytest.raises(UsageError, match="--stream"):
        openers_for(tmp_path / "a.ctf")
    _, openers, continue_keys = openers_for(tmp_path / "a.ctf", streams=["x=dense:2"], max_errors=3)
    assert len(openers) == 1 and not continue_keys and openers[0].keywords["max_errors"] == 3


def test_a_format_is_planned_file_by_file_by_its_registry_entry_alone(monkeypatch, tmp_path):
    """A format with ``file_openers`` needs nothing else to be planned file by file: no table of
    names in the integrations."""
    toy = dataclasses.replace(registry.get("kvfile"), name="toy", family=None)
    monkeypatch.setitem(registry.FORMATS, "toy", toy)
    kind, openers, continue_keys = openers_for(tmp_path / "store.bin", source_format="toy")
    assert kind == "toy" and len(openers) == 1 and openers[0].func.__name__ == "SingaRecordDeserializer"
    monkeypatch.setitem(registry.FORMATS, "toy", dataclasses.replace(toy, keys=False))
    assert openers_for(tmp_path / "store.bin", source_format="toy")[2]
    # without the hook: one input read through the format's reader
    monkeypatch.setitem(registry.FORMATS, "toy", dataclasses.replace(toy, file_openers=None))
    _, openers, continue_keys = openers_for(tmp_path / "store.bin", source_format="toy")
    assert len(openers) == 1 and openers[0].func.__func__ is registry.Format.open_reader and not continue_keys
