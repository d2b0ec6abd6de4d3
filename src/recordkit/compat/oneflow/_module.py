"""``oneflow.nn.Module`` for data pipelines (its own module so nn and nn.image can both subclass it)."""
from __future__ import annotations


class Module:
    """``oneflow.nn.Module`` as data pipelines use it: calling a module runs its ``forward``.

    OneFlow scripts wrap their readers and decoders in a Module subclass (``class
    OFRecordDataLoader(flow.nn.Module)``), so subclasses work here unchanged; parameters, buffers
    and hooks of a training Module are not part of this data layer.
    """

    training = True

    def __init__(self, *args, **kwargs):
        self.training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def train(self, mode: bool = True):
        self.training = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    def to(self, *args, **kwargs):
        return self
