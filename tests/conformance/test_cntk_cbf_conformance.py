"""CNTK's CBF reader tests (CNTKBinaryReaderTests.cpp) run through recordkit's CBFReader.

Each .bin file is read with ``randomize=false`` and compared, through the same
harness as the CTF cases, with the *CTF* control of the same data (CASES.md, "Test
cases: CNTKBinaryReaderTests.cpp"). The same files also check the converter: CTF ->
CBF with the stream headers CASES.md gives must reproduce CNTK's ``ctf2bin.py``
output byte for byte.
"""
from __future__ import annotations

import warnings

import pytest

from conformance.cntk_harness import ReaderSource, cntk_corpus_dir, run_reader_test, token_mismatch, tokens

CORPUS = cntk_corpus_dir()
if not CORPUS.exists():
    pytest.skip(f"CNTK conformance corpus not found at {CORPUS} (set RECORDKIT_SHARED)", allow_module_level=True)

from recordkit import StreamSpec  # noqa: E402
from recordkit.formats.cbf import CBFReader, CBFWriter  # noqa: E402
from recordkit.formats.ctf import CTFReader  # noqa: E402

# name: (bin file, precision, epoch size, mb size, epochs, streams written,
#        source CTF file, ctf2bin header lines "name alias format dim")
CASES = {
    "Simple_dense": ("Simple_dense.bin", "float", 1000, 250, 10, ["features", "labels"], "Simple_dense.txt",
                     ["features F dense 2", "labels L dense 2"]),
    "MNIST_dense": ("MNIST_dense.bin", "double", 1000, 1000, 1, ["features", "labels"], "MNIST_dense.txt",
                    ["features F dense 784", "labels L dense 10"]),
    "10x10_dense": ("10x10_dense.bin", "float", 100, 100, 1, ["features"], "10x10_dense.txt",
                    ["features F0 dense 5"]),
    "50x20_jagged_sequences_dense": ("50x20_jagged_sequences_dense.bin", "double", 508, 508, 1, ["features"],
                                     "50x20_jagged_sequences_dense.txt", ["features F0 dense 3"]),
    "10x10_sparse": ("10x10_sparse.bin", "double", 100, 100, 1, ["features"], "10x10_sparse.txt",
                     ["features F0 sparse 100"]),
    "50x20_jagged_sequences_sparse": ("50x20_jagged_sequences_sparse.bin", "float", 564, 564, 1, ["features"],
                                      "50x20_jagged_sequences_sparse.txt", ["features F0 sparse 100"]),
}


def header_streams(lines):
    return [StreamSpec(n, f, int(d), a) for n, a, f, d in (line.split() for line in lines)]


@pytest.mark.parametrize("name", list(CASES))
def test_cbf_reader_output_matches_cntk_control(name):
    binfile, precision, epoch, mb, epochs, written, *_ = CASES[name]
    reader = CBFReader(CORPUS / "Data/CNTKBinaryReader" / binfile, precision=precision)
    source = ReaderSource(reader)
    out = run_reader_test(source, written, epoch, mb, epochs, True)
    control = (CORPUS / "Control/CNTKTextFormatReader" / (name + ".txt")).read_text()
    problem = token_mismatch(tokens(out), tokens(control))
    assert problem is None, f"CNTKBinaryReader_{name}: {problem}"


@pytest.mark.parametrize("name", list(CASES))
def test_converting_the_ctf_source_reproduces_cntks_cbf_file(name, tmp_path):
    binfile, precision, *_, ctf, header = CASES[name]
    streams = header_streams(header)
    out = tmp_path / binfile
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reader = CTFReader(CORPUS / "Data/CNTKTextFormatReader" / ctf, streams, precision=precision)
        with CBFWriter(out, streams, precision=precision) as w:
            for chunk in reader.iter_chunks():
                w.write_chunk(chunk)
    assert out.read_bytes() == (CORPUS / "Data/CNTKBinaryReader" / binfile).read_bytes()


def test_alias_renames_a_stream_of_the_file():
    reader = CBFReader(CORPUS / "Data/CNTKBinaryReader/Simple_dense.bin",
                       [StreamSpec("x", "dense", 2, alias="features")])
    assert [s.name for s in reader.streams] == ["x"]
    assert reader.load_chunk(0).columns["x"].values.shape == (10000, 2)


def test_simple_jagged_sequence_file_with_eight_streams_reads():
    reader = CBFReader(CORPUS / "Data/CNTKBinaryReader/Simple_jagged_sequence.bin")
    assert len(reader.streams) == 8 and len(reader.chunks) == 101
    n = sum(len(c) for c in reader.iter_chunks())
    assert n == reader.num_sequences == 101
