"""Every CTF input of the conformance corpus survives CTF -> CBF -> CTF unchanged.

The streams come from the case table (each data file's config section). The CBF file
must read back to exactly the sequences the CTF reader read, and converting it back
to CTF must read back the same again. Keys: CBF stores none (ordinals), so only
values and sequence order are compared through CBF.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from conformance import cases as C
from conformance.cntk_harness import cntk_corpus_dir

CORPUS = cntk_corpus_dir()
if not CORPUS.exists():
    pytest.skip(f"CNTK conformance corpus not found at {CORPUS}", allow_module_level=True)

from recordkit import StreamSpec  # noqa: E402
from recordkit.formats.cbf import CBFReader, CBFWriter  # noqa: E402
from recordkit.formats.ctf import CTFReader, CTFWriter  # noqa: E402

# one section per data file; files that only error cases read (they must fail) are left out
ERROR_ONLY = {"duplicate_inputs.txt", "invalid_inputs.txt"}
SECTIONS = {}
for section in C.SECTIONS.values():
    if (CORPUS / "Data/CNTKTextFormatReader" / section.data).exists() and section.data not in ERROR_ONLY:
        SECTIONS.setdefault(section.data, section)


def read(reader):
    out = []
    for chunk in reader.iter_chunks(threads=2):
        for i in range(len(chunk)):
            seq = chunk.sequence(i)
            out.append({k: (v.toarray() if hasattr(v, "toarray") else np.asarray(v)) for k, v in seq.data.items()})
    return out


@pytest.mark.parametrize("data", sorted(SECTIONS))
def test_ctf_input_round_trips_through_cbf(data, tmp_path):
    section = SECTIONS[data]
    # a composite section's file holds only its own deserializer's streams
    owned = dict(section.deserializers).get(data) if section.composite else None
    streams = [StreamSpec(**kw) for kw in section.stream_specs("plain") if owned is None or kw["name"] in owned]
    kwargs = dict(precision=section.precision, skip_sequence_ids=section.skip_sequence_ids,
                  max_errors=section.max_errors)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        original = read(CTFReader(CORPUS / "Data/CNTKTextFormatReader" / data, streams, chunk_size=4096, **kwargs))
        cbf = tmp_path / "x.cbf"
        with CBFWriter(cbf, streams, precision=section.precision, chunk_size=2000) as w:
            for chunk in CTFReader(CORPUS / "Data/CNTKTextFormatReader" / data, streams, **kwargs).iter_chunks():
                w.write_chunk(chunk)
        via_cbf = read(CBFReader(cbf))
        back = tmp_path / "x.ctf"
        with CTFWriter(back, streams, precision=section.precision) as w:
            for chunk in CBFReader(cbf).iter_chunks():
                w.write_chunk(chunk)
        again = read(CTFReader(back, streams, precision=section.precision))
    assert len(original) == len(via_cbf) == len(again) > 0
    for a, b, c in zip(original, via_cbf, again):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name])
            np.testing.assert_array_equal(a[name], c[name])
            assert a[name].dtype == b[name].dtype == c[name].dtype
