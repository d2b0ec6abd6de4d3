"""A MinibatchSource from a BrainScript reader section (``recordkit.from_config``).

The parsing and CNTK's validation live in ``brainscript.py``; this module only maps
the normalized ``ReaderConfig`` onto recordkit's readers and engine, filling in the
defaults CNTK 2.7 applied where the config leaves them open.
"""
from __future__ import annotations

import os

from recordkit.compat.brainscript import ReaderConfig, reader_config
from recordkit.engine.composite import CompositeDeserializer
from recordkit.engine.source import MinibatchSource
from recordkit.engine.streams import StreamSpec

CTF_TYPE = "CNTKTextFormatDeserializer"
CBF_TYPE = "CNTKBinaryDeserializer"
CBF_DEFAULT_WINDOW_CHUNKS = 128


def build_deserializer(d, base_dir: str | None = None):
    path = d.file if base_dir is None or os.path.isabs(d.file) else os.path.join(base_dir, d.file)
    if d.type == CTF_TYPE:
        from recordkit.formats.ctf import CTFReader
        streams = [StreamSpec(s.name, s.format, s.dim, s.alias, defines_mb_size=s.defines_mb_size)
                   for s in d.streams]
        return CTFReader(path, streams, precision=d.precision, max_errors=d.max_errors,
                         skip_sequence_ids=d.skip_sequence_ids, trace_level=d.trace_level,
                         chunk_size=d.chunk_size, cache_index=d.cache_index,
                         keep_data_in_memory=d.keep_data_in_memory)
    if d.type == CBF_TYPE:
        from recordkit.formats.cbf.parts import open_cbf_data_set  # a file, or a directory of CBF parts
        selection = {s.name: s.alias for s in d.streams} or None
        return open_cbf_data_set(path, selection, precision=d.precision, keep_data_in_memory=d.keep_data_in_memory,
                                 trace_level=d.trace_level)
    raise ValueError(f"deserializer type {d.type!r} is not supported")


def default_window(cfg: ReaderConfig) -> tuple[int | None, bool]:
    """CNTK 2.7's window when the config gives none: (window, sample_based)."""
    if cfg.randomization_window is not None:
        return cfg.randomization_window, cfg.sample_based_randomization_window
    if not cfg.composite and len(cfg.deserializers) == 1:
        d = cfg.deserializers[0]
        if d.type == CTF_TYPE:
            return max(1, (1 << 32) // d.chunk_size), False  # old CTF path: 4 GiB worth of chunks
        return CBF_DEFAULT_WINDOW_CHUNKS, False
    return None, False  # composite path: the whole data set


def source_from_config(cfg: ReaderConfig, *, base_dir: str | None = None, **engine) -> MinibatchSource:
    readers = [build_deserializer(d, base_dir) for d in cfg.deserializers]
    deserializer = readers[0] if len(readers) == 1 else CompositeDeserializer(readers)
    window, sample_based = default_window(cfg)
    engine.setdefault("trace_level", cfg.trace_level)
    engine.setdefault("max_memory", None)  # CNTK 2.7's defaults, unbounded; warned about when beyond memory
    return MinibatchSource(deserializer, randomize=cfg.randomize, window=window, sample_based_window=sample_based,
                           seed=cfg.randomization_seed, frame_mode=cfg.frame_mode,
                           truncation_length=cfg.truncation_length if cfg.truncated else 0, **engine)


def from_config(text, *, section: str | None = None, overrides: dict | None = None, base_dir: str | None = None,
                source: str = "<config>", **engine) -> MinibatchSource:
    """A ready MinibatchSource from BrainScript text (or an already parsed dict).

    ``section``: the config section holding ``reader`` (e.g. a CNTK test's section);
    ``overrides``: command-line style assignments (``{"defMBSize": "true"}``);
    ``base_dir``: where relative ``file`` paths are resolved (default: the working
    directory, as CNTK does); ``engine``: MinibatchSource options the reader section
    does not hold (``max_sweeps``, ``max_samples``, ``num_data_partitions``, ...).
    """
    cfg = reader_config(text, section=section, overrides=overrides, source=source)
    return source_from_config(cfg, base_dir=base_dir, **engine)
