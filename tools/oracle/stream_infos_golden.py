"""Record what CNTK 2.7's cntk.io says about a source's streams.

    /work/shared/tools/cntk-oracle python tools/oracle/stream_infos_golden.py

Runs under the oracle's Python 3.6. For each case below, builds the MinibatchSource with
cntk.io and writes, per entry of ``stream_infos()`` (sorted by m_id): m_name, m_id,
m_storage_format, m_element_type (CNTK's raw enum ints: StorageFormat Dense 0 / SparseCSC 1 /
SparseBlockCol 2, DataType Float 1 / Double 2), m_sample_layout.dimensions(),
m_defines_mb_size, m_is_binary and as_string(), plus the enum values themselves, into
tests/data/cntk_stream_infos/expected.json. tests/test_compat_cntk_streams.py holds
recordkit.compat.cntk to it. Inputs: tools/oracle/make_stream_infos_inputs.py.
"""
import json
import os
import warnings

warnings.filterwarnings("ignore")

import cntk  # noqa: E402
import cntk.cntk_py as cp  # noqa: E402
from cntk.io import CBFDeserializer, CTFDeserializer, MinibatchSource, StreamDef, StreamDefs  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(REPO, "tests", "data", "cntk_stream_infos")
CTF = os.path.join(DATA, "inputs", "tags.ctf")
CBF = os.path.join(DATA, "inputs", "tags.cbf")


def ctf_streams():
    return StreamDefs(word=StreamDef(field="w", shape=50, is_sparse=True),
                      features=StreamDef(field="f", shape=4, defines_mb_size=True),
                      tag=StreamDef(field="t", shape=12, is_sparse=True))


# name -> (deserializer kind, declared streams or None, MinibatchSource keyword arguments)
CASES = {
    "ctf": ("ctf", "all", {}),
    "ctf_one_stream": ("ctf", {"labels": {"field": "t", "shape": 12, "is_sparse": True}}, {}),
    "ctf_bptt": ("ctf", "all", {"truncation_length": 3}),
    "ctf_names_not_in_alias_order": ("ctf", {"zz": {"field": "f", "shape": 4}, "aa": {"field": "w", "shape": 50,
                                                                                      "is_sparse": True},
                                             "mm": {"field": "t", "shape": 12, "is_sparse": True}}, {}),
    "ctf_dense_stream_only": ("ctf", {"f": {"field": "f", "shape": 4}}, {}),
    "composite_ctf_ctf": ("ctf+ctf", [{"zz": {"field": "f", "shape": 4}},
                                      {"word": {"field": "w", "shape": 50, "is_sparse": True},
                                       "aa": {"field": "t", "shape": 12, "is_sparse": True}}], {}),
    "composite_cbf_ctf": ("cbf+ctf", [None, {"ctf_f": {"field": "f", "shape": 4}}], {}),
    "cbf_no_streams_declared": ("cbf", None, {}),
    "cbf_one_declared_renamed": ("cbf", {"f2": {"field": "features", "shape": 4}}, {}),
    "cbf_two_declared": ("cbf", {"tag": {"field": "tag", "shape": 12, "is_sparse": True},
                                 "word": {"field": "word", "shape": 50, "is_sparse": True}}, {}),
    "cbf_bptt": ("cbf", None, {"truncation_length": 3}),
}


def build(kind, declared):
    if "+" in kind:
        return [build(k, d) for k, d in zip(kind.split("+"), declared)]
    if kind == "ctf":
        defs = ctf_streams() if declared == "all" else StreamDefs(**{k: StreamDef(**v) for k, v in declared.items()})
        return CTFDeserializer(CTF, defs)
    if declared is None:
        return CBFDeserializer(CBF)
    return CBFDeserializer(CBF, StreamDefs(**{k: StreamDef(**v) for k, v in declared.items()}))


def main():
    out = {"cntk_version": cntk.__version__,
           "enums": {"StorageFormat": {"Dense": cp.StorageFormat_Dense, "SparseCSC": cp.StorageFormat_SparseCSC,
                                       "SparseBlockCol": cp.StorageFormat_SparseBlockCol},
                     "DataType": {n: getattr(cp, "DataType_" + n) for n in
                                  ("Unknown", "Float", "Double", "Float16", "Int8", "Int16", "UChar")}},
           "cases": {}}
    for name, (kind, declared, kwargs) in sorted(CASES.items()):
        src = MinibatchSource(build(kind, declared), randomize=False, max_sweeps=1, **kwargs)
        infos = []
        for s in sorted(src.stream_infos(), key=lambda s: s.m_id):
            infos.append({"m_name": s.m_name, "m_id": s.m_id, "m_storage_format": s.m_storage_format,
                          "m_element_type": s.m_element_type,
                          "m_sample_layout": list(s.m_sample_layout.dimensions()),
                          "m_defines_mb_size": s.m_defines_mb_size, "m_is_binary": s.m_is_binary,
                          "as_string": s.as_string()})
        out["cases"][name] = {"deserializer": kind, "declared": declared, "source": kwargs, "stream_infos": infos}
        print(name, [(i["m_name"], i["m_id"], i["m_storage_format"]) for i in infos])
    with open(os.path.join(DATA, "expected.json"), "w") as fh:
        json.dump(out, fh, indent=1, sort_keys=True)
        fh.write("\n")


if __name__ == "__main__":
    main()
