"""The model of one input layer: ``InputLayer`` (store settings at SINGA's defaults, phases,
normalisation) as SINGA's own iteration or as a recordkit Deserializer / MinibatchSource."""
from __future__ import annotations

from dataclasses import dataclass

from recordkit.errors import FormatError, UsageError
from recordkit.formats.singa import STORES, open, store_class
from recordkit.compat.singa.tokens import Where
from recordkit.compat.singa.schema import PHASES

_PHASE_ALIASES = {"train": "kTrain", "test": "kTest", "val": "kVal", "validation": "kVal", "deploy": "kDeploy"}


# ------------------------------------------------------------------------------------------ the model

def _phase(name) -> str:
    """``train``/``test``/... or SINGA's ``kTrain``/``kTest``/... as SINGA's enum name."""
    if name is None:
        return None
    text = str(name)
    text = _PHASE_ALIASES.get(text.lower(), text)
    if text == "kValidation":
        text = "kVal"
    if text not in PHASES:
        raise UsageError(f"phase {name!r}: use train, test, val or deploy (or kTrain, kTest, kVal, kDeploy)")
    return text


@dataclass
class InputLayer:
    """One input layer of a job, with its store settings resolved to SINGA's defaults.

    ``shape`` is None for a 0.1 ``kShardData`` layer (its records carry their shape).
    ``scale``/``norm``: what the 0.1 parser layer (``kRGBImage``, ``kMnist``) did to the
    data layer's output; they become ``mean``/``std`` (``(x - mean) / std``).
    """
    name: str
    type: str
    backend: str
    path: str
    batchsize: int
    shape: tuple | None = None
    random_skip: int = 0
    separator: str = ","
    has_label: bool = True
    encoded: bool = False
    mean_file: str | None = None
    std_file: str | None = None
    mean_value: float | None = None
    std_value: float | None = None
    include: tuple = ()
    exclude: tuple = ()
    partition_dim: int = -1
    wrapped: bool = False            # 0.1 shard values: the image record inside a Record message
    where: Where | None = None
    parser_layer: str | None = None  # the 0.1 kRGBImage / kMnist layer that normalised this one

    def in_phase(self, phase) -> bool:
        """SINGA's rule: a layer with ``include`` is in exactly those phases; otherwise in every
        phase but its ``exclude`` ones."""
        phase = _phase(phase)
        if self.include:
            return phase in self.include
        return phase not in self.exclude

    @property
    def phases(self) -> tuple:
        return self.include or tuple(p for p in ("kTrain", "kVal", "kTest") if p not in self.exclude)

    # -- normalisation ---------------------------------------------------------------------------
    def _shape_for(self, storage_options=None) -> tuple:
        if self.shape:
            return self.shape
        first = self._first_value(storage_options)
        from recordkit.formats.singa.records import decode_record
        rec = decode_record(first, path=self.path, record="tuple 0")
        if not rec["shape"]:
            raise FormatError(self.path, f"layer '{self.name}': the first record has no shape; "
                                         "the layer needs one (SINGA 0.2+: store_conf shape)", record="tuple 0")
        return tuple(rec["shape"])

    def _first_value(self, storage_options=None) -> bytes:
        with open(self.path, "read", self.backend, storage_options=storage_options) as store:
            item = store.read()
        if item is None:
            raise FormatError(self.path, f"layer '{self.name}': the store is empty")
        return self._unwrap(item[1], 0)

    def _unwrap(self, value: bytes, index: int) -> bytes:
        if not self.wrapped:
            return value
        from recordkit.formats.singa.records import unwrap_v01_record
        return unwrap_v01_record(value, path=self.path, record=f"tuple {index}")

    def normalization(self, shape=None, storage_options=None):
        """``(mean, std)`` as float32 arrays of ``shape`` (or None): a file wins over a value, as in SINGA."""
        import numpy as np
        shape = tuple(shape or self._shape_for(storage_options))
        mean = self._load_vector(self.mean_file, shape, storage_options) if self.mean_file else None
        std = self._load_vector(self.std_file, shape, storage_options) if self.std_file else None
        if mean is None and self.mean_value is not None:
            mean = np.full(shape, self.mean_value, dtype=np.float32)
        if std is None and self.std_value is not None:
            if self.std_value == 0:
                raise UsageError(f"layer '{self.name}': std_value must not be 0")
            std = np.full(shape, self.std_value, dtype=np.float32)
        return mean, std

    def _load_vector(self, path: str, shape, storage_options):
        """A mean/std store (``LoadRecord``); for 0.1 layers also a bare serialized record file."""
        from recordkit.formats.singa.layers import mean_from_csv_store, mean_from_record_store
        if self.type == "kCSVInput":
            with open(path, "read", self.backend, storage_options=storage_options) as store:
                return mean_from_csv_store(store, shape, separator=self.separator, path=path)
        try:
            with open(path, "read", self.backend, storage_options=storage_options) as store:
                return mean_from_record_store(store, shape, path=path)
        except FormatError:
            if not self.wrapped:
                raise
        # SINGA 0.1's RGBImageLayer read meanfile with ReadProtoFromBinaryFile: one bare record
        from recordkit.formats.singa.location import StoreLocation
        with StoreLocation(path, storage_options).open_read() as f:
            return mean_from_record_store([(b"", f.read())], shape, path=path)

    # -- SINGA's iteration -----------------------------------------------------------------------
    def batches(self, *, seed=None, shuffle: bool = False, num_batches: int | None = None,
                num_partitions: int = 1, storage_options=None):
        """The layer as SINGA iterated it: a ``RecordInputLayer`` / ``CSVInputLayer`` (endless; ``num_batches``
        ends it) yielding ``(features float32 [batchsize] + shape, labels int32 [batchsize])``.

        ``num_partitions``: the workers of a group; with ``partition_dim: 0`` each reads
        ``batchsize / num_partitions`` records per batch, as SINGA's StoreInputLayer::Setup did.
        """
        from recordkit.formats.singa.layers import CSVInputLayer, RecordInputLayer
        self._check_supported()
        shape = self._shape_for(storage_options)
        mean, std = self.normalization(shape, storage_options)
        batchsize = self.batchsize
        if self.partition_dim == 0 and num_partitions > 1:
            batchsize //= num_partitions
        common = dict(random_skip=self.random_skip, shuffle=shuffle, seed=seed, mean=mean, std=std,
                      num_batches=num_batches, path=self.path)

        def pairs():
            with open(self.path, "read", self.backend, storage_options=storage_options) as store:
                for index, (key, value) in enumerate(store):
                    yield key, self._unwrap(value, index)

        if self.type == "kCSVInput":
            return CSVInputLayer(pairs, batchsize, shape, separator=self.separator, has_label=self.has_label,
                                 **common)
        return RecordInputLayer(pairs, batchsize, shape, **common)

    def _check_supported(self) -> None:
        if self.encoded:
            raise UsageError(f"layer '{self.name}': encoded (JPEG) records are not supported; decode them first "
                             "(SINGA 0.3 decoded them with OpenCV)")
        if self.backend not in STORES:
            store_class(self.backend)  # raises SINGA-worded "unknown / not supported"
        if self.batchsize < 1:
            raise UsageError(f"layer '{self.name}': batchsize must be >= 1, not {self.batchsize}")

    # -- recordkit's engine ----------------------------------------------------------------------
    def deserializer(self, *, precision="float", storage_options=None, **options):
        """The layer's store as a Deserializer: streams ``features`` (dim = prod(shape)) and ``label``
        (absent for a CSV layer with ``has_label: false``), normalised like ``batches()``."""
        import numpy as np
        from recordkit.formats.singa.deserializer import SingaCSVDeserializer, SingaRecordDeserializer
        self._check_supported()
        shape = self._shape_for(storage_options)
        mean, std = self.normalization(shape, storage_options)
        if self.type == "kCSVInput":
            inner = SingaCSVDeserializer(self.path, int(np.prod(shape)), separator=self.separator,
                                         has_label=self.has_label, precision=precision,
                                         storage_options=storage_options, **options)
        elif self.wrapped:
            inner = _ShardDeserializer(self.path, self.backend, precision=precision,
                                       storage_options=storage_options, **options)
        else:
            inner = SingaRecordDeserializer(self.path, self.backend, precision=precision,
                                            storage_options=storage_options, **options)
        dim = int(np.prod(shape))
        if inner.streams[0].dim != dim:
            got = inner.streams[0].dim
            inner.close()
            raise FormatError(self.path, f"layer '{self.name}': the records hold {got} values, the configured shape "
                                         f"{list(shape)} needs {dim}", record="tuple 0")
        return _Normalized(inner, mean, std) if mean is not None or std is not None else inner

    def minibatch_source(self, **kwargs):
        """``MinibatchSource`` over ``deserializer()``; ``kwargs`` go to MinibatchSource (SINGA never
        randomized, so ``randomize`` defaults to False here)."""
        from recordkit.engine.source import MinibatchSource
        kwargs.setdefault("randomize", False)
        options = {k: kwargs.pop(k) for k in ("precision", "storage_options") if k in kwargs}
        return MinibatchSource(self.deserializer(**options), **kwargs)


def _shard_deserializer_class():
    from recordkit.formats.singa.deserializer import SingaRecordDeserializer

    class ShardDeserializer(SingaRecordDeserializer):
        """A SINGA 0.1 shard: each value is a ``Record`` wrapping the image record."""

        def _decode(self, value, index):
            from recordkit.formats.singa.records import unwrap_v01_record
            return super()._decode(unwrap_v01_record(value, path=self.path, record=f"tuple {index}"), index)

    return ShardDeserializer


def _ShardDeserializer(*args, **kwargs):
    return _shard_deserializer_class()(*args, **kwargs)


class _Normalized:
    """A Deserializer whose ``features`` are ``(x - mean) / std`` in float32, as the input layer computes them
    (so ``minibatch_source()`` and ``batches()`` agree bit for bit)."""

    def __init__(self, inner, mean, std):
        import numpy as np
        self.inner = inner
        self.mean = None if mean is None else np.asarray(mean, np.float32).reshape(-1)
        self.std = None if std is None else np.asarray(std, np.float32).reshape(-1)

    def __getattr__(self, name):
        if name == "inner":  # not set yet (unpickling): no recursion through __getattr__
            raise AttributeError(name)
        return getattr(self.inner, name)

    @property
    def streams(self):
        return self.inner.streams

    @property
    def chunks(self):
        return self.inner.chunks

    def _apply(self, chunk):
        import numpy as np
        from recordkit.engine.chunk import DenseColumn
        col = chunk.columns["features"]
        x = col.values.astype(np.float32)
        if self.mean is not None:
            x -= self.mean
        if self.std is not None:
            x /= self.std
        chunk.columns["features"] = DenseColumn(x.astype(col.values.dtype, copy=False), col.seq_offsets)
        return chunk

    def load_chunk(self, chunk_id, **kwargs):
        return self._apply(self.inner.load_chunk(chunk_id, **kwargs))

    def iter_chunks(self, threads: int = 1, **kwargs):
        for info in self.inner.chunks:
            yield self.load_chunk(info.id)

    def close(self):
        self.inner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
