"""PyTorch: :class:`recordkit.images.ImageStage` batches of a data set's encoded images as a
``torch.utils.data.IterableDataset`` (items are whole batches: use ``batch_size=None``)::

    from torch.utils.data import DataLoader
    from recordkit.integrations.torch_images import ImageBatchDataset

    ds = ImageBatchDataset("shards/", "jpg", 64, size=224, mean=MEAN, std=STD, seed=0)
    loader = DataLoader(ds, batch_size=None, num_workers=2)
    for epoch in range(epochs):
        ds.set_epoch(epoch)                 # new crops and flips each epoch, as DistributedSampler
        for images in loader:               # float32 (64, 3, 224, 224) tensors
            ...

Worker ``w`` of ``W`` makes batches ``w, w + W, ...`` (the DataLoader hands them out in that
round-robin order) and takes every other batch's random draws without decoding it, so the
batches are the same, in the same order, for any number of workers. Each worker reads the whole
image stream (the bytes, not the pixels). The stage itself uses every core of its process;
with workers, give it fewer (``recordkit.images.pool.THREADS``) or use ``num_workers=0``.
"""
from __future__ import annotations

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info


class ImageBatchDataset(IterableDataset):
    """Batches of ``batch_size`` images of ``field`` in the data set at ``path`` (any format with an
    image source: :func:`recordkit.images.open_images`), through ``ImageStage(**stage_options)``."""

    def __init__(self, path, field, batch_size: int, *, drop_last: bool = False, storage_options=None,
                 cache_dir=None, **stage_options):
        from recordkit.images import ImageStage
        if stage_options.get("seed") is None:  # one seed for every worker, drawn here
            stage_options["seed"] = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
        ImageStage(**stage_options)  # bad settings fail here, not in a worker
        self.path, self.field, self.batch_size, self.drop_last = path, field, int(batch_size), bool(drop_last)
        self.storage = dict(storage_options=storage_options, cache_dir=cache_dir)
        self.stage_options = stage_options
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Seed the crops and flips of ``epoch`` (the stage's seed and the epoch together)."""
        self.epoch = int(epoch)

    def __iter__(self):
        import torch

        from recordkit.images import ImageStage, open_images
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        options = dict(self.stage_options, seed=np.random.SeedSequence([self.stage_options["seed"], self.epoch]))
        stage = ImageStage(**options)
        pairs = open_images(self.path, self.field, **self.storage)
        for batch in stage.batches(pairs, self.batch_size, drop_last=self.drop_last,
                                   select=lambda k: k % workers == worker):
            yield torch.from_numpy(batch)
