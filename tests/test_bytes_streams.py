"""Bytes streams: one ``bytes`` value per sequence (an encoded image, a text), riding the same
sample picking as the numeric streams: order, randomization, partitions and checkpoints alike."""
import numpy as np
import pytest

from recordkit.engine.chunk import BytesColumn, ChunkData, DenseColumn
from recordkit.engine.deserializer import ChunkInfo, DeserializerBase
from recordkit.engine.source import MinibatchSource
from recordkit.engine.streams import StreamSpec, stream_arguments


class Memory(DeserializerBase):
    """``chunks`` of ``size`` sequences each: sequence k has label k and the value b"v<k>"."""

    def __init__(self, chunks=5, size=4):
        self._streams = [StreamSpec("label", "dense", 1), StreamSpec("blob", "bytes", 1)]
        self._chunks = [ChunkInfo(i, size, size) for i in range(chunks)]
        self.size = size

    def load_chunk(self, cid, **_):
        k = np.arange(cid * self.size, (cid + 1) * self.size)
        return ChunkData(cid, k.astype(np.uint64), np.ones(self.size, np.int64),
                         {"label": DenseColumn(k.astype(np.float32).reshape(-1, 1), np.arange(self.size + 1)),
                          "blob": BytesColumn([b"v%d" % i for i in k])})


def delivered(src, size=3, count=None):
    out = []
    for mb in src.minibatches(size):
        out.append(mb)
        if count is not None and len(out) == count:
            break
    return out


def pairs(mbs):
    return [(int(lab), val) for mb in mbs for lab, val in zip(mb["label"].data[:, 0, 0], mb["blob"].data)]


def test_bytes_values_follow_their_sequences_in_randomized_order():
    src = MinibatchSource(Memory(), randomize=True, window=2, seed=3, max_sweeps=2)
    mbs = delivered(src)
    got = pairs(mbs)
    assert all(val == b"v%d" % lab for lab, val in got)
    assert sorted(lab for lab, _ in got[:20]) == list(range(20))
    assert [lab for lab, _ in got[:20]] != list(range(20))
    batch = mbs[0]["blob"]
    assert batch.is_bytes and batch.data.dtype == object and batch.data.ndim == 1
    assert list(batch.lengths) == [1] * len(batch.data)


def test_bytes_partitions_are_disjoint_and_cover_the_sweep():
    seen = []
    for i in range(2):
        src = MinibatchSource(Memory(), randomize=True, seed=1, max_sweeps=1, num_data_partitions=2,
                              partition_index=i, partition_by="samples")
        seen += [val for mb in delivered(src) for val in mb["blob"].data]
    assert sorted(seen) == sorted(b"v%d" % k for k in range(20))


def test_bytes_resume_from_a_checkpoint_delivers_the_same_values():
    src = MinibatchSource(Memory(), randomize=True, window=2, seed=5, max_sweeps=2)
    delivered(src, count=3)
    state = src.get_checkpoint_state()
    rest = pairs(delivered(src))
    again = MinibatchSource(Memory(), randomize=True, window=2, seed=5, max_sweeps=2)
    again.restore_from_checkpoint(state)
    assert pairs(delivered(again)) == rest


def test_bytes_declaration_text_round_trips():
    for text, alias in (("img=bytes", "img"), ("img=bytes:jpg", "jpg"), ("img=bytes:1", "img"),
                        ("img=bytes:1:1", "1")):
        spec = StreamSpec.parse(text)
        assert (spec.format, spec.dim, spec.alias) == ("bytes", 1, alias)
        assert StreamSpec.parse(stream_arguments([spec])[len("--stream "):]) == spec
    assert StreamSpec.from_dict(spec.to_dict("double")).is_bytes
    assert "precision" not in spec.to_dict("double")
    with pytest.raises(ValueError, match="one value per sequence"):
        StreamSpec("img", "bytes", 3)


def test_truncated_bptt_refuses_a_bytes_stream_by_name():
    from recordkit.errors import UsageError
    src = MinibatchSource(Memory(), randomize=False, truncation_length=2)
    with pytest.raises(UsageError, match="bytes stream 'blob' holds one value per sequence"):
        src.next_minibatch(4)


def test_chunks_whose_numbers_differ_in_dtype_still_gather_their_bytes():
    class Mixed(Memory):
        def load_chunk(self, cid, **_):
            chunk = super().load_chunk(cid)
            if cid % 2:
                col = chunk.columns["label"]
                chunk.columns["label"] = DenseColumn(col.values.astype(np.float64), col.seq_offsets)
            return chunk
    src = MinibatchSource(Mixed(), randomize=True, seed=2, max_sweeps=1)
    got = pairs(delivered(src, size=20))
    assert len(got) == 20 and all(val == b"v%d" % lab for lab, val in got)


def test_random_access_gives_a_bytes_streams_value_as_bytes():
    from recordkit.integrations.random_access import sequence_record
    rec = sequence_record(Memory().load_chunk(1), 2)
    assert rec["blob"] == b"v6" and rec["label"].tolist() == [[6.0]]


def test_a_bytes_stream_joins_other_readers_streams_in_a_composite():
    from recordkit.engine.composite import CompositeDeserializer

    class Other(Memory):
        def __init__(self):
            super().__init__(chunks=2, size=10)
            self._streams = [StreamSpec("caption", "bytes", 1)]

        def load_chunk(self, cid, **_):
            chunk = super().load_chunk(cid)
            return ChunkData(cid, chunk.keys, chunk.lengths,
                             {"caption": BytesColumn([b"c" + v for v in chunk.columns["blob"].values])})

    src = MinibatchSource(CompositeDeserializer([Memory(), Other()]), randomize=True, seed=4, max_sweeps=1)
    got = [(int(lab), blob, cap) for mb in delivered(src)
           for lab, blob, cap in zip(mb["label"].data[:, 0, 0], mb["blob"].data, mb["caption"].data)]
    assert sorted(lab for lab, _, _ in got) == list(range(20))
    assert all(blob == b"v%d" % lab and cap == b"cv%d" % lab for lab, blob, cap in got)


def test_the_memory_plan_counts_a_bytes_streams_chunk_bytes():
    from recordkit.engine.memory import generic_chunk_bytes
    chunks = [ChunkInfo(0, 10, 10, 0, 1 << 20)]
    numbers = generic_chunk_bytes([StreamSpec("label", "dense", 1)], chunks)
    with_images = generic_chunk_bytes([StreamSpec("label", "dense", 1), StreamSpec("image", "bytes", 1)], chunks)
    assert with_images[0] - numbers[0] >= 1 << 20  # the images are the chunk's bytes
