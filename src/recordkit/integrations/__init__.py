"""Bridges from recordkit's reader engine to training frameworks.

Each submodule imports its framework only when it is itself imported, so
``import recordkit`` never pulls one in:

- ``recordkit.integrations.torch``: ``MinibatchDataset`` (a PyTorch
  ``IterableDataset`` that splits the data across DataLoader workers and
  ``torch.distributed`` ranks, with exact resume) and ``to_torch`` (one
  minibatch as a dict of tensors).
"""
