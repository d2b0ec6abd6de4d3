"""The reader engine: the Deserializer protocol and what works over any deserializer."""
from recordkit.engine.chunk import ChunkData, DenseColumn, Sequence, SparseColumn
from recordkit.engine.chunk_partition import ChunkPartition
from recordkit.engine.deserializer import ChunkInfo, Deserializer
from recordkit.engine.streams import StreamSpec

__all__ = ["ChunkData", "ChunkInfo", "ChunkPartition", "DenseColumn", "Deserializer", "Sequence", "SparseColumn", "StreamSpec"]
