"""CNTK BrainScript reader sections, parsed and normalized for recordkit.

CNTK users describe their data in config files such as::

    precision = "float"
    reader = [
        readerType = "CNTKTextFormatReader"
        file = "train.txt"
        input = [ features = [ dim = 2; format = "dense" ] ]
    ]

or, with the composite reader, ``reader = { deserializers = ({ type = ...; ... }) }``.
This module turns such text into frozen dataclasses (:class:`ReaderConfig`,
:class:`DeserializerConfig`, :class:`StreamConfig`) that the engine builds a
minibatch source from. It has three layers, each in its own module (``tree`` holds the records they share):

1. ``lexer``: a **tokenizer** that knows CNTK's lexical quirks (bare words that may hold
   ``c:\\paths``, ``:`` as the array separator, ``#`` comments);
2. ``parser``: a **recursive-descent parser** producing case-insensitive records
   (:class:`ConfigRecord`) that remember where every key and value was written,
   and resolving ``$name$`` references the way CNTK does (outward through the
   enclosing sections, after command-line overrides are applied);
3. ``normalizer``: a **normalizer** that applies CNTK's reader semantics (defaults, inheritance
   from enclosing sections in the old reader path, the values CompositeDataReader
   copies into each deserializer) and validates them with CNTK's own messages.
   Unknown parameters inside the reader section are errors, so a typo such as
   ``randomise = false`` does not silently leave randomization on.

Every problem is raised as :class:`recordkit.errors.FormatError` with the
``line:column`` of the offending token (1-based, columns in bytes).
"""
from recordkit.compat.brainscript.normalizer import (CBF_READER, CBF_TYPE, CTF_READER, CTF_TYPE,  # noqa: F401
                                                     DeserializerConfig, ReaderConfig, StreamConfig, reader_config)
from recordkit.compat.brainscript.parser import MAX_EXPANDED_TEXT, MAX_EXPANDED_VALUES, MAX_NESTING, parse  # noqa: F401
from recordkit.compat.brainscript.tree import ConfigArray, ConfigRecord, Location  # noqa: F401

__all__ = [
    "ConfigArray",
    "ConfigRecord",
    "DeserializerConfig",
    "Location",
    "ReaderConfig",
    "StreamConfig",
    "parse",
    "reader_config",
]
