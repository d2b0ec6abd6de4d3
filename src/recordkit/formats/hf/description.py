"""``state.json`` and ``dataset_info.json`` of a Hugging Face ``save_to_disk`` directory, read as
untrusted input (``formats/descriptions.py``).

``state.json``'s ``_data_files`` must name files of the directory itself (plain names; a
symbolic link must resolve inside it), each once, and every ``*.arrow`` file of the directory:
a data file left out would shorten the data set without a word. ``dataset_info.json``'s
``recordkit`` object (what ``HFWriter`` records: stream declarations, the sequence count) is
checked field by field. The other fields are ``datasets``' own and left alone.
"""
from __future__ import annotations

from recordkit.formats.descriptions import Fields, listed_files, stays_inside
from recordkit.formats.hf.writer import INFO_KEY
from recordkit.storage import location


def data_files(directory: str, path: str, data: bytes, storage_options=None) -> list[str]:
    """The paths of the data files ``state.json`` (``path``, its text ``data``) lists, in order."""
    fields = Fields(path)
    files = fields.list(fields.document(data).get("_data_files"), "_data_files")
    if not files:
        raise fields.fail("_data_files", "lists no data files")
    listed = []
    for i, entry in enumerate(files):
        fields.object(entry, f"_data_files[{i}]")
        name = fields.name(entry.get("filename"), f"_data_files[{i}].filename")
        stays_inside(fields, directory, name, f"_data_files[{i}].filename")
        listed.append((f"_data_files[{i}].filename", name))
    listed_files(fields, directory, listed, lambda n: n.endswith(".arrow"), storage_options=storage_options)
    return [location.join(directory, name) for _, name in listed]


def recorded_streams(path: str, data: bytes) -> list | None:
    """The stream declarations (as JSON) of the ``recordkit`` object of ``dataset_info.json``
    (``path``, its text ``data``), checked; None when it has none."""
    fields = Fields(path)
    doc = fields.document(data)
    if INFO_KEY not in doc:  # a data set written by datasets itself
        return None
    rk = fields.object(doc[INFO_KEY], INFO_KEY)
    fields.streams(rk.get("streams"), f"{INFO_KEY}.streams")
    if "sequences" in rk:
        fields.int(rk["sequences"], f"{INFO_KEY}.sequences")  # the total: bookkeeping, not read
    return rk["streams"]


def class_labels(data: bytes) -> dict[str, str]:
    """``ClassLabel`` features of ``dataset_info.json`` (its text ``data``) as notes, column name ->
    ``ClassLabel names 0=cat, 1=dog``: a label column is read as its numbers, the names kept here.
    ``datasets``' own fields: anything malformed is left out, never an error."""
    import json
    try:
        features = json.loads(data).get("features")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return {}
    notes = {}
    for name, f in (features.items() if isinstance(features, dict) else ()):
        names = f.get("names") if isinstance(f, dict) and f.get("_type") == "ClassLabel" else None
        if isinstance(names, list) and all(isinstance(n, str) for n in names):
            notes[name] = "ClassLabel names " + ", ".join(f"{i}={n}" for i, n in enumerate(names))
    return notes
