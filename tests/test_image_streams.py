"""``MinibatchSource(images={stream: ImageStage})``: a bytes stream of encoded images delivered as the
stage's batch array, seeded, its random state in the checkpoint (a fresh source restored from it
makes the same crops), a bad image located by file and record."""
from __future__ import annotations

import functools

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("cv2")
pytest.importorskip("PIL")

from recordkit.engine.source import MinibatchSource  # noqa: E402
from recordkit.errors import FormatError, UsageError  # noqa: E402
from recordkit.formats.parquet import ParquetDeserializer  # noqa: E402
from recordkit.images import ImageStage  # noqa: E402
from test_image_stage import BLOBS  # noqa: E402


def images_parquet(path, blobs=BLOBS * 2):
    pq.write_table(pa.table({"image": pa.array(blobs, pa.binary()), "label": np.arange(len(blobs))}), path,
                   row_group_size=4)
    return str(path)


def source(path, seed=0, **kw):
    return MinibatchSource(ParquetDeserializer(path), randomize=True, seed=1, max_sweeps=2,
                           images={"image": ImageStage(12, seed=seed)}, **kw)


def arrays(src, count=None):
    out = []
    for mb in src.minibatches(3):
        out.append((mb["label"].data[:, 0, 0].tolist(), mb["image"].data.copy()))
        if count is not None and len(out) == count:
            break
    return out


def test_the_stage_turns_the_minibatchs_images_into_one_array_in_its_order(tmp_path):
    path = images_parquet(tmp_path / "i.parquet")
    mb = source(path).next_minibatch(5)
    labels = mb["label"].data[:, 0, 0].astype(int).tolist()
    assert mb["image"].data.shape == (5, 3, 12, 12) and mb["image"].data.dtype == np.float32
    again = ImageStage(12, seed=0)([(BLOBS * 2)[k] for k in labels])  # the same images, the same draws
    assert mb["image"].data.tobytes() == again.tobytes()


def test_a_checkpoint_mid_sweep_restores_the_same_crops_in_a_fresh_source(tmp_path):
    path = images_parquet(tmp_path / "i.parquet")
    first = source(path)
    arrays(first, count=3)
    state = first.get_checkpoint_state()
    rest = arrays(first)
    fresh = source(path, seed=123)  # another seed: the checkpoint's random state replaces it
    fresh.restore_from_checkpoint(state)
    again = arrays(fresh)
    assert [labels for labels, _ in again] == [labels for labels, _ in rest]
    assert all(a.tobytes() == b.tobytes() for (_, a), (_, b) in zip(again, rest))
    unrestored = arrays(source(path, seed=123))[3:]  # the same order, crops from the other seed
    assert [labels for labels, _ in unrestored] == [labels for labels, _ in rest]
    assert all(a.tobytes() != b.tobytes() for (_, a), (_, b) in zip(unrestored, rest))


def test_a_checkpoint_without_the_stages_state_is_refused_and_changes_nothing(tmp_path):
    path = images_parquet(tmp_path / "i.parquet")
    plain = MinibatchSource(ParquetDeserializer(path), randomize=True, seed=1, max_sweeps=2)
    plain.next_minibatch(3)
    staged = source(path)
    before = staged.get_checkpoint_state()
    with pytest.raises(ValueError, match="checkpoint field 'images' is missing"):
        staged.restore_from_checkpoint(plain.get_checkpoint_state())
    bad = dict(before, images={"image": {"rng": "nope"}})
    with pytest.raises(ValueError, match="checkpoint field 'images.image'"):
        staged.restore_from_checkpoint(bad)
    assert staged.get_checkpoint_state() == before


def test_a_bad_image_is_located_by_file_and_record(tmp_path):
    path = images_parquet(tmp_path / "i.parquet", BLOBS[:3] + [b"\xff\xd8\xff not an image"] + BLOBS[:2])
    src = MinibatchSource(ParquetDeserializer(path), randomize=False, max_sweeps=1,
                          images={"image": ImageStage(12, seed=0)})
    with pytest.raises(FormatError) as e:
        src.next_minibatch(6)
    assert str(path) in str(e.value) and "row group 0, row 3 of the group" in str(e.value)


def test_an_image_stage_needs_a_bytes_stream(tmp_path):
    path = images_parquet(tmp_path / "i.parquet")
    with pytest.raises(UsageError, match="stream 'label' is dense, an image stage reads a bytes stream"):
        MinibatchSource(ParquetDeserializer(path), images={"label": ImageStage(12)})
    with pytest.raises(UsageError, match="images: no stream 'img'"):
        MinibatchSource(ParquetDeserializer(path), images={"img": ImageStage(12)})


def test_the_torch_dataset_delivers_the_stages_tensors_and_resumes_them(tmp_path):
    torch = pytest.importorskip("torch")
    from recordkit.integrations.torch import MinibatchDataset, StateTracker
    path = images_parquet(tmp_path / "i.parquet")
    make = functools.partial(source, path)
    tracker = StateTracker()
    items = []
    for item in MinibatchDataset(make, 3):
        tracker.update(item)
        items.append(item)
        if len(items) == 2:
            break
    assert isinstance(items[0]["image"], torch.Tensor) and tuple(items[0]["image"].shape) == (3, 3, 12, 12)
    rest = [item["image"] for item in MinibatchDataset(make, 3)][2:]
    resumed = [item["image"] for item in MinibatchDataset(make, 3, resume_state=tracker.state_dict())]
    assert len(resumed) == len(rest) and all(torch.equal(a, b) for a, b in zip(resumed, rest))


def test_read_images_of_a_bytes_stream_goes_through_the_source_and_resumes(tmp_path, capsys):
    import json
    from bridge_corpus import cli
    path = images_parquet(tmp_path / "i.parquet")
    args = ["read", path, "--images", "image", "--mb-size", "3", "--image-size", "12", "--randomize"]
    code, _, err = cli(capsys, *args, "--stop-after", "2", "--save-state", tmp_path / "s.json")
    assert code == 0, err
    state = json.loads((tmp_path / "s.json").read_text())
    assert set(state["images"]) == {"image"}  # the stage's random state, beside the position
    code, out, err = cli(capsys, *args, "--resume", tmp_path / "s.json", "--json")
    assert code == 0, err
    assert json.loads(out)["images"] == 14 - 6 and json.loads(out)["image_shape"] == [3, 12, 12]


def test_a_bad_image_of_a_reader_without_locations_names_the_chunk_and_sequence():
    from test_bytes_streams import Memory  # blobs b"v<k>": no image at all
    src = MinibatchSource(Memory(), randomize=False, images={"blob": ImageStage(12, seed=0)})
    with pytest.raises(FormatError, match=r"Memory.*: chunk 0, sequence 0 of the chunk"):
        src.next_minibatch(2)
