"""Image stages of a MinibatchSource: bytes streams of encoded images delivered as batch arrays.

``MinibatchSource(reader, images={"image": ImageStage(224, seed=0)})`` hands the ``image``
stream of every minibatch to its stage (``recordkit.images.ImageStage``: decode, random-resized
crop, flip, normalize, on the stage's thread pool) as one batch, in the minibatch's order, so the
stream arrives as the stage's ``(sequences, C, size, size)`` (or NHWC) array instead of the
encoded bytes. The images are the sequences the picker chose: order, randomization, partitions
and checkpoints are those of the numeric streams beside them.

Crops are seeded: each stage's random state goes into the source's checkpoint (``"images"``,
per stream), taken after the last minibatch delivered, so a source restored from it (in a fresh
process too) makes the same crops of the same images as the run that saved it.

A bad image is a ``FormatError`` naming where it is (the reader's ``sequence_location``: file and
record), as the stage reports it. The engine knows no codec: a stage is anything with
``__call__(images, where)``, ``state_dict()`` and ``load_state_dict(state)``.
"""
from __future__ import annotations

import numpy as np

from recordkit.errors import UsageError


class ImageStreams:
    """The stages of the source's bytes streams named in ``stages`` ({stream name: stage})."""

    def __init__(self, streams, stages: dict):
        if not isinstance(stages, dict):
            raise TypeError(f"images must be a dict of stream name -> image stage, not {type(stages).__name__}")
        kinds = {s.name: s for s in streams}
        for name, stage in stages.items():
            spec = kinds.get(name)
            if spec is None:
                raise UsageError(f"images: no stream '{name}' (the streams: {', '.join(kinds)})")
            if not spec.is_bytes:
                raise UsageError(f"images: stream '{name}' is {spec.format}, an image stage reads a bytes stream of "
                                 f"encoded images")
            for method in ("state_dict", "load_state_dict"):
                if not callable(getattr(stage, method, None)) or not callable(stage):
                    raise TypeError(f"images['{name}']: {type(stage).__name__} is no image stage (it needs "
                                    f"__call__, state_dict and load_state_dict, as recordkit.images.ImageStage)")
        self.stages = dict(stages)

    def apply(self, batches: dict, cids: np.ndarray, js: np.ndarray, deserializer) -> None:
        """Replace each staged stream's ``StreamBatch`` of ``batches`` by the stage's batch of its images
        (sequence ``js[i]`` of chunk ``cids[i]`` is image i: where it is, for errors)."""
        from recordkit.engine.minibatch import StreamBatch
        where = _locations(deserializer, cids, js)
        for name, stage in self.stages.items():
            encoded = batches[name].data
            out = stage(encoded, where)
            n = len(encoded)
            batches[name] = StreamBatch(name, False, int(np.prod(out.shape[1:])), np.ones(n, dtype=np.int64),
                                        data=out, mask=np.ones((n, 1), dtype=bool))

    def state(self) -> dict:
        """Each stage's random state (JSON-able): what the next minibatch's crops start from."""
        return {name: stage.state_dict() for name, stage in self.stages.items()}

    def load(self, state) -> dict:
        """Every stage set to ``state`` (``state()``'s output, untrusted: checked by the stages); returns
        the states they had, for ``revert``. A stage the state does not name is an error (its crops
        would not be the saved run's); a ValueError leaves every stage as it was."""
        if not isinstance(state, dict):
            raise ValueError(f"checkpoint field 'images': expected the image stages' states (a dict), found "
                             f"{state!r:.80}" if state is not None else
                             "checkpoint field 'images' is missing: the checkpoint was taken by a source without "
                             f"image stages, this one has them for {', '.join(self.stages)}")
        before = self.state()
        try:
            for name, stage in self.stages.items():
                if name not in state:
                    raise ValueError(f"checkpoint field 'images': no state for the image stage of stream '{name}'")
                try:
                    stage.load_state_dict(state[name])
                except ValueError as e:
                    raise ValueError(f"checkpoint field 'images.{name}': {e}") from None
        except ValueError:
            self.revert(before)
            raise
        return before

    def revert(self, before: dict) -> None:
        for name, stage in self.stages.items():
            stage.load_state_dict(before[name])


def _locations(deserializer, cids: np.ndarray, js: np.ndarray) -> list:
    """Where each picked sequence is, as its reader says (``sequence_location``), for the stage's errors."""
    locate = getattr(deserializer, "sequence_location", None)
    if locate is None:
        from recordkit.engine.deserializer import name_of
        name = name_of(deserializer)
        return [f"{name}: chunk {c}, sequence {j} of the chunk" for c, j in zip(cids.tolist(), js.tolist())]
    return [locate(c, j) for c, j in zip(cids.tolist(), js.tolist())]
