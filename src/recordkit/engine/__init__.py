"""The reader engine: the Deserializer protocol and what works over any deserializer.

The names below are imported on first use (``from recordkit.engine import ChunkData`` works as
before), so importing one engine module does not pull in all of them and SciPy.
"""
# CNTK's chunkSizeInBytes default (32 MiB): how much of a file one chunk covers, for every reader and
# writer that cuts chunks by size (CTF, CBF, the CTF -> CBF converter, HF record batches, BrainScript).
DEFAULT_CHUNK_SIZE = 32 << 20

_LAZY = {
    "BytesColumn": "recordkit.engine.chunk", "ChunkData": "recordkit.engine.chunk", "DenseColumn": "recordkit.engine.chunk",
    "Sequence": "recordkit.engine.chunk", "SparseColumn": "recordkit.engine.chunk",
    "ChunkPartition": "recordkit.engine.chunk_partition",
    "ChunkInfo": "recordkit.engine.deserializer", "Deserializer": "recordkit.engine.deserializer",
    "StreamSpec": "recordkit.engine.streams",
}

__all__ = sorted([*_LAZY, "DEFAULT_CHUNK_SIZE"])


def __getattr__(name):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'recordkit.engine' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
