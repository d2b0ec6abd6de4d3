"""``ImageBatchDataset``: ImageStage batches through a torch DataLoader, the same for any number of workers."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("cv2")

from torch.utils.data import DataLoader  # noqa: E402

from recordkit.images import ImageStage  # noqa: E402
from recordkit.integrations.torch_images import ImageBatchDataset  # noqa: E402
from test_image_stage import BLOBS, _webdataset  # noqa: E402


def test_batches_are_the_same_for_any_number_of_workers(tmp_path):
    shard = _webdataset(tmp_path / "s.tar", BLOBS)
    ds = ImageBatchDataset(shard, "jpg,png", 2, size=12, seed=4)
    alone = [b.numpy().tobytes() for b in DataLoader(ds, batch_size=None, num_workers=0)]
    two = [b.numpy().tobytes() for b in DataLoader(ds, batch_size=None, num_workers=2)]
    assert len(alone) == 4 and two == alone
    ds.set_epoch(1)
    assert [b.numpy().tobytes() for b in DataLoader(ds, batch_size=None)] != alone


def test_a_stage_skipping_other_workers_batches_makes_the_batches_it_would_have_made():
    every = list(ImageStage(12, seed=2).batches(BLOBS, 2, prefetch=False))
    odd = list(ImageStage(12, seed=2).batches(BLOBS, 2, select=lambda k: k % 2 == 1))
    assert [b.tobytes() for b in odd] == [b.tobytes() for b in every[1::2]]
