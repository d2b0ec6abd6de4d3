"""cntk.io's names over recordkit's engine: swap the import, keep the script.

```python
# from cntk.io import MinibatchSource, CTFDeserializer, StreamDef, StreamDefs, INFINITELY_REPEAT
from recordkit.compat.cntk import MinibatchSource, CTFDeserializer, StreamDef, StreamDefs, INFINITELY_REPEAT
```

Deserializer descriptions are dictionaries, as in cntk.io, so the extra keys CNTK
users set on them (``d['maxErrors'] = 10``, ``cacheIndex``, ``skipSequenceIds``,
``chunkSizeInBytes``, ``traceLevel``, ``keepDataInMemory``, ``precision``) work here
too. ``next_minibatch`` returns ``{StreamInformation: MinibatchData}`` (or keyed by
``input_map``'s keys), and an empty dict once the data is exhausted.
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np

from recordkit.engine.composite import CompositeDeserializer
from recordkit.engine.source import MinibatchSource as _EngineSource
from recordkit.engine.streams import StreamSpec
from recordkit.engine import DEFAULT_CHUNK_SIZE

INFINITELY_REPEAT = 2**64 - 1
FULL_DATA_SWEEP = 2**64 - 2
DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS = 128

__all__ = ["MinibatchSource", "CTFDeserializer", "CBFDeserializer", "StreamDef", "StreamDefs",
           "StreamInformation", "MinibatchData", "INFINITELY_REPEAT", "FULL_DATA_SWEEP",
           "DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS", "TraceLevel", "StorageFormat", "DataType", "NDShape"]


class TraceLevel:
    Error = 0
    Warning = 1
    Info = 2


class StorageFormat(IntEnum):
    """CNTK's StorageFormat (cntk_py.StorageFormat_*): CNTK 2.7 gives ``m_storage_format`` as these ints."""
    Dense = 0
    SparseCSC = 1
    SparseBlockCol = 2


class DataType(IntEnum):
    """CNTK's DataType (cntk_py.DataType_*): CNTK 2.7 gives ``m_element_type`` as these ints."""
    Unknown = 0
    Float = 1
    Double = 2
    UChar = 3
    Float16 = 4
    Int8 = 5
    Int16 = 6


class NDShape:
    """The part of CNTK's NDShape a ``m_sample_layout`` is used for: ``dimensions()`` (a tuple),
    ``rank()``, ``total_size()`` and the predicates; equal to another NDShape or a tuple of the
    same dimensions."""

    def __init__(self, dims):
        self._dims = tuple(int(d) for d in dims)

    def dimensions(self) -> tuple:
        return self._dims

    def rank(self) -> int:
        return len(self._dims)

    def total_size(self) -> int:
        return int(np.prod(self._dims, dtype=np.int64)) if self._dims else 1

    def is_scalar(self) -> bool:
        return self.rank() == 0 or self._dims == (1,) * self.rank()

    def is_unknown(self) -> bool:
        return False

    def has_free_dimension(self) -> bool:
        return False

    def has_inferred_dimension(self) -> bool:
        return False

    def has_unbound_dimension(self) -> bool:
        return False

    def __eq__(self, other):
        if isinstance(other, NDShape):
            return self._dims == other._dims
        return isinstance(other, (tuple, list)) and self._dims == tuple(other)

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return f"NDShape({list(self._dims)})"


class Record(dict):
    """cntk.io's Record: a dict whose keys are also attributes."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


def StreamDef(field=None, shape=None, is_sparse=False, transforms=None, context=None, scp=None, mlf=None,
              broadcast=None, defines_mb_size=False, max_sequence_length=65535):
    """A stream of a deserializer: ``field`` is its name in the file, ``shape`` its dimension."""
    return Record(field=field, shape=shape, is_sparse=is_sparse, transforms=transforms, context=context,
                  scp=scp, mlf=mlf, broadcast=broadcast, defines_mb_size=defines_mb_size,
                  max_sequence_length=max_sequence_length)


StreamDefs = Record


def _dim(shape, key):
    if isinstance(shape, (tuple, list)):
        if len(shape) != 1:
            raise ValueError(f"stream '{key}': CTF streams are vectors, shape {shape} is not")
        shape = shape[0]
    if shape is None:
        raise ValueError(f"stream '{key}': shape (the dimension) must be given")
    return int(shape)


class CTFDeserializer(dict):
    """``CTFDeserializer(filename, streams)``: a CTF file and its streams (a dict, as in cntk.io)."""

    def __init__(self, filename, streams):
        inputs = {}
        for key, s in streams.items():
            if not s.get("field"):
                raise ValueError(f"CTFDeserializer: stream name for key {key} must be specified")
            inputs[key] = {"dim": _dim(s.get("shape"), key), "format": "sparse" if s.get("is_sparse") else "dense",
                           "definesMBSize": bool(s.get("defines_mb_size")), "alias": s["field"]}
        super().__init__(type="CNTKTextFormatDeserializer", file=str(filename), input=inputs)

    def build(self, precision: str = "float", trace_level: int = 1, max_errors: int = 0):
        from recordkit.formats.ctf import CTFReader
        streams = [StreamSpec(name, cfg["format"], cfg["dim"], cfg["alias"], defines_mb_size=cfg["definesMBSize"])
                   for name, cfg in self["input"].items()]
        return CTFReader(self["file"], streams, precision=self.get("precision", precision),
                         max_errors=int(self.get("maxErrors", max_errors)),
                         skip_sequence_ids=bool(self.get("skipSequenceIds", False)),
                         trace_level=int(self.get("traceLevel", trace_level)),
                         chunk_size=int(self.get("chunkSizeInBytes", DEFAULT_CHUNK_SIZE)),
                         cache_index=bool(self.get("cacheIndex", False)),
                         keep_data_in_memory=bool(self.get("keepDataInMemory", False)))


class CBFDeserializer(dict):
    """``CBFDeserializer(filename, streams={})``: a CBF file; streams rename (``field`` = name in the file).

    As in CNTK, the source delivers every stream of the file: declared ones under their new
    names, the others under their names in the file, all in the file's order."""

    def __init__(self, filename, streams=None):
        inputs = {}
        for key, s in (streams or {}).items():
            field = s.get("field") or key
            inputs[key] = {"alias": field}
        super().__init__(type="CNTKBinaryDeserializer", file=str(filename), input=inputs)

    def build(self, precision=None, trace_level: int = 1, max_errors: int = 0):
        from recordkit.formats.cbf.parts import open_cbf_data_set as CBFReader  # a file, or a directory of CBF parts
        precision = self.get("precision", precision)
        keep = bool(self.get("keepDataInMemory", False))
        trace = int(self.get("traceLevel", trace_level))
        reader = CBFReader(self["file"], None, precision=precision, keep_data_in_memory=keep, trace_level=trace)
        if not self["input"]:
            return reader
        renamed: dict = {}
        for name, cfg in self["input"].items():
            renamed.setdefault(cfg["alias"], []).append(name)
        pairs = []
        for spec in reader.streams:  # the file's streams, in order
            pairs.extend((name, spec.name) for name in renamed.pop(spec.name, [spec.name]))
        pairs.extend((name, alias) for alias, names in renamed.items() for name in names)  # not in the file: error
        reader.close()
        return CBFReader(self["file"], dict(pairs), precision=precision, keep_data_in_memory=keep, trace_level=trace)


def _cntk_ids(readers) -> dict:
    """Stream name -> CNTK's stream id: deserializer after deserializer; within a CTF deserializer
    by name (CNTK keeps its inputs in a sorted map), elsewhere in the reader's (the file's) order.
    What CNTK 2.7 gives (tests/data/cntk_stream_infos/expected.json)."""
    from recordkit.formats.ctf import CTFReader
    ids = {}
    for reader in readers:
        names = [s.name for s in reader.streams]
        for name in (sorted(names) if isinstance(reader, CTFReader) else names):
            ids.setdefault(name, len(ids))
    return ids


class StreamInformation:
    """What ``source.streams.<name>`` is: hashable, usable as a minibatch key.

    CNTK's fields: ``m_name``, ``m_id``, ``m_storage_format`` (a ``StorageFormat``: Dense for
    every stream under truncated BPTT, which delivers sparse streams dense, as CNTK does),
    ``m_element_type`` (a ``DataType``: Float, or Double where recordkit delivers float64, which
    CNTK's Python API never does), ``m_sample_layout`` (an ``NDShape`` of the dimension),
    ``m_defines_mb_size``, ``m_is_binary`` and ``as_string()``; plus recordkit's plainer
    ``name``, ``stream_id``, ``is_sparse`` (as declared), ``storage_format``, ``shape``, ``dtype``
    (a bytes stream, which CNTK never had: ``storage_format`` "bytes", ``dtype`` object).
    """

    def __init__(self, spec: StreamSpec, stream_id: int, dtype=None, dense_delivery: bool = False):
        self.name = spec.name
        self.m_name = spec.name
        self.stream_id = stream_id
        self.m_id = stream_id
        self.is_sparse = spec.is_sparse
        self.storage_format = spec.format  # "dense", "sparse", or "bytes" (recordkit's: no CNTK equivalent)
        self.m_storage_format = StorageFormat.SparseCSC if spec.is_sparse and not dense_delivery else StorageFormat.Dense
        self.shape = (spec.dim,)
        self.m_sample_layout = NDShape(self.shape)
        self.dtype = np.dtype(object) if spec.is_bytes else np.dtype(dtype or spec.dtype or np.float32)
        self.m_element_type = DataType.Double if self.dtype == np.float64 else DataType.Float
        self.defines_mb_size = spec.defines_mb_size
        self.m_defines_mb_size = bool(spec.defines_mb_size)
        self.m_is_binary = False

    def as_string(self) -> str:
        return f"{self.m_name}({list(self.shape)})"

    def __hash__(self):
        return hash((self.name, self.stream_id))

    def __eq__(self, other):
        return isinstance(other, StreamInformation) and (self.name, self.stream_id) == (other.name, other.stream_id)

    def __repr__(self):
        return f"StreamInformation(name={self.name!r}, shape={self.shape}, is_sparse={self.is_sparse})"


class MinibatchData:
    """One stream of a minibatch: counts, flags, and the values."""

    def __init__(self, batch, end_of_sweep: bool):
        self._batch = batch
        self.num_sequences = batch.num_sequences
        self.num_samples = batch.num_samples
        self.end_of_sweep = end_of_sweep
        self.is_sparse = batch.is_sparse
        self.mask = None if batch.is_sparse else batch.mask

    @property
    def data(self):
        return self._batch.csr if self.is_sparse else self._batch.data

    @property
    def shape(self):
        return self.asarray().shape

    def asarray(self) -> np.ndarray:
        """(sequences, max length, dim), zero padded (sparse streams densified)."""
        return self._batch.asarray()

    def as_sequences(self, variable=None) -> list:
        """One array (dense) or CSR matrix (sparse) of shape (samples, dim) per sequence."""
        return self._batch.as_sequences()

    def __repr__(self):
        return f"MinibatchData(num_sequences={self.num_sequences}, num_samples={self.num_samples})"


class MinibatchSource:
    """cntk.io.MinibatchSource on recordkit's engine (same parameters, same defaults)."""

    def __init__(self, deserializers, max_samples=INFINITELY_REPEAT, max_sweeps=INFINITELY_REPEAT,
                 randomization_window_in_chunks=DEFAULT_RANDOMIZATION_WINDOW_IN_CHUNKS,
                 randomization_window_in_samples=0, randomization_seed=0, trace_level=TraceLevel.Warning,
                 multithreaded_deserializer=None, frame_mode=False, truncation_length=0, randomize=True,
                 max_errors=0):
        if max_samples != INFINITELY_REPEAT and max_sweeps != INFINITELY_REPEAT:
            raise ValueError("MinibatchSourceConfig: max samples and max sweeps are mutually exclusive options "
                             "and cannot have non-default values at the same time.")
        if randomization_window_in_chunks and randomization_window_in_samples:
            raise ValueError("randomization_window_in_chunks and randomization_window_in_samples are mutually "
                             "exclusive")
        if frame_mode and truncation_length:
            raise ValueError("frame_mode and truncation_length are mutually exclusive")
        if isinstance(deserializers, dict):
            deserializers = [deserializers]
        readers = [d.build(trace_level=trace_level, max_errors=max_errors) if hasattr(d, "build") else d
                   for d in deserializers]
        deserializer = readers[0] if len(readers) == 1 else CompositeDeserializer(readers)
        if max_samples == FULL_DATA_SWEEP:
            max_samples, max_sweeps = INFINITELY_REPEAT, 1
        window, sample_based = (randomization_window_in_samples, True) if randomization_window_in_samples \
            else (randomization_window_in_chunks, False)
        self._source = _EngineSource(
            deserializer, randomize=bool(randomize), window=window or None, sample_based_window=sample_based,
            seed=int(randomization_seed),
            max_samples=None if max_samples == INFINITELY_REPEAT else int(max_samples),
            max_sweeps=None if max_sweeps == INFINITELY_REPEAT else int(max_sweeps),
            frame_mode=frame_mode, truncation_length=int(truncation_length), trace_level=int(trace_level),
            max_memory=None)  # CNTK 2.7's windows, unbounded; the engine warns when they exceed the memory available
        ids = _cntk_ids(readers)
        fallback = getattr(deserializer, "dtype", None)
        self.streams = Record({s.name: StreamInformation(s, ids.get(s.name, i), s.dtype or fallback,
                                                         dense_delivery=bool(truncation_length))
                               for i, s in enumerate(deserializer.streams)})

    @property
    def engine(self) -> _EngineSource:
        """The recordkit MinibatchSource underneath."""
        return self._source

    def stream_info(self, name) -> StreamInformation:
        if name in self.streams:
            return self.streams[name]
        raise ValueError(f"stream '{name}' not found; the source has: {', '.join(self.streams)}")

    def __getitem__(self, name) -> StreamInformation:
        return self.stream_info(name)

    def stream_infos(self) -> list:
        return list(self.streams.values())

    def next_minibatch(self, minibatch_size_in_samples, input_map=None, device=None, num_data_partitions=None,
                       partition_index=None) -> dict:
        mb = self._source.next_minibatch(minibatch_size_in_samples, num_data_partitions=num_data_partitions,
                                         partition_index=partition_index)
        if mb is None:
            return {}
        by_info = {info: MinibatchData(mb[name], mb.end_of_sweep) for name, info in self.streams.items()}
        if input_map is None:
            return by_info
        return {key: by_info[info] for key, info in input_map.items()}

    def get_checkpoint_state(self) -> dict:
        return self._source.get_checkpoint_state()

    def restore_from_checkpoint(self, checkpoint: dict) -> None:
        self._source.restore_from_checkpoint(checkpoint)

    @property
    def current_position(self) -> dict:
        return self.get_checkpoint_state()

    @current_position.setter
    def current_position(self, state: dict) -> None:
        self.restore_from_checkpoint(state)

    @property
    def is_distributed(self) -> bool:
        return self._source.partition is not None and self._source.partition[0] > 1
