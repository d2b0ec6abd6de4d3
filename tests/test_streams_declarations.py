"""Stream declarations recorded in a data set's metadata read back as the same declarations."""
import numpy as np
import pytest

from recordkit.engine.streams import StreamSpec, streams_from_json, streams_to_json


def test_declarations_round_trip_through_json_values():
    streams = [StreamSpec("features", "dense", 4, alias="f", defines_mb_size=True),
               StreamSpec("labels", "sparse", 10)]
    back = streams_from_json(streams_to_json(streams, precision="double"))
    assert back == streams
    assert [s.alias for s in back] == ["f", "labels"]
    assert all(s.dtype == np.float64 for s in back)


def test_precision_is_left_out_when_unknown():
    d = StreamSpec("x", "dense", 3).to_dict()
    assert d == {"name": "x", "alias": "x", "format": "dense", "dim": 3}


@pytest.mark.parametrize("bad, message", [
    ({"name": "x", "format": "dense"}, "lacks dim"),
    ({"name": "x", "format": "ragged", "dim": 3}, "format must be"),
    ({"name": "x", "format": "dense", "dim": 0}, "positive integer"),
    ("x", "must be an object"),
])
def test_a_wrong_recorded_declaration_names_what_is_wrong(bad, message):
    with pytest.raises(ValueError, match=message):
        streams_from_json([bad])


def test_recorded_declarations_are_checked_as_a_set():
    with pytest.raises(ValueError, match="declared twice"):
        streams_from_json([{"name": "x", "format": "dense", "dim": 1}] * 2)


@pytest.mark.parametrize("key, value", [("dim", 1.5), ("dim", True), ("dim", "3"), ("name", 7), ("format", ["dense"]),
                                        ("alias", ["a"]), ("defines_mb_size", "yes"), ("precision", 1)])
def test_a_recorded_field_of_the_wrong_json_type_is_refused_by_its_place(key, value):
    """Recorded declarations are JSON written by ``to_dict``: 1.5, true or "3" is an edit, not a dim."""
    d = {"name": "x", "format": "dense", "dim": 3, key: value}
    with pytest.raises(ValueError, match=rf"^streams\[1\]: {key}: expected"):
        streams_from_json([{"name": "y", "format": "dense", "dim": 1}, d])
