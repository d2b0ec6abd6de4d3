"""recordkit.from_config: BrainScript reader sections to a ready MinibatchSource."""
import pytest

import recordkit
from helpers import write
from recordkit import FormatError


def test_seed_simple_reader_section(tmp_path):
    data = write(tmp_path, "|B 100:3 123:4 |C 8 |A 0 1 2 3 4\n|A 0 1.1 22 0.3 54 |C 123917 |B 1134:1.911\n")
    text = f'''
    reader = [
        readerType = "CNTKTextFormatReader"
        file = "{data}"
        randomize = false
        input = [
            A = [ dim = 5 ; format = "dense" ]
            B = [ dim = 1000000 ; format = "sparse" ]
            C = [ dim = 1 ; format = "dense" ]
        ]
    ]'''
    src = recordkit.from_config(text, max_sweeps=1)
    mb = src.next_minibatch(10)
    assert mb.num_sequences == 2 and mb["A"].data.shape == (2, 1, 5) and mb["B"].csr.shape == (2, 1000000)


def test_composite_section_with_relative_paths_and_aliases(tmp_path):
    write(tmp_path, "1 |a 1 2 3 |b 4 5\n1 |a 6 7 8\n2 |a 1 1 1 |b 2 2\n", "SampleInput.txt")
    text = '''
    reader = {
        verbosity = 0 ; randomize = true ; randomizationWindow = 30
        deserializers = ({
            type = "CNTKTextFormatDeserializer" ; module = "CNTKTextFormatReader"
            file = "SampleInput.txt"
            maxErrors = 100 ; skipSequenceIds = false ; traceLevel = 2
            input = {
                long_a = { alias = "a" ; dim = 3 ; format = "dense" }
                long_b = { alias = "b" ; dim = 2 ; format = "dense" }
            }
        })
    }'''
    src = recordkit.from_config(text, base_dir=str(tmp_path), max_sweeps=1)
    assert [s.name for s in src.streams] == ["long_a", "long_b"]
    total = sum(mb["long_a"].num_samples for mb in src.minibatches(2))
    assert total == 3


def test_unknown_parameter_is_an_error_naming_it(tmp_path):
    text = 'reader = [ readerType = "CNTKTextFormatReader" ; file = "x" ; randomise = true ; ' \
           'input = [ a = [ dim = 1 ; format = "dense" ] ] ]'
    with pytest.raises(FormatError, match="randomise"):
        recordkit.from_config(text)


def test_binary_reader_section(tmp_path):
    from recordkit.formats.cbf import CBFWriter
    from recordkit import StreamSpec
    import numpy as np
    p = tmp_path / "d.bin"
    with CBFWriter(p, [StreamSpec("features", "dense", 2)]) as w:
        for k in range(4):
            w.write({"features": np.full((1, 2), k)})
    text = f'reader = [ readerType = "CNTKBinaryReader" ; file = "{p}" ; randomize = false ; ' \
           f'input = [ x = [ alias = "features" ] ] ]'
    src = recordkit.from_config(text, max_sweeps=1)
    mb = src.next_minibatch(10)
    assert mb["x"].data[:, 0, 0].tolist() == [0, 1, 2, 3]
