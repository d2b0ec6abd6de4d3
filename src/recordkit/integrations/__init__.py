"""Bridges from recordkit's reader engine to training frameworks.

Each submodule imports its framework only when it is itself imported, so
``import recordkit`` never pulls one in:

- ``recordkit.integrations.torch``: ``MinibatchDataset`` (a PyTorch
  ``IterableDataset`` that splits the data across DataLoader workers and
  ``torch.distributed`` ranks, with exact resume) and ``to_torch`` (one
  minibatch as a dict of tensors).
- ``recordkit.integrations.random_access``: ``RandomAccessDataSource``
  (``len``/``[i]`` over any indexed reader; Grain's data-source protocol),
  with no framework import at all.
- ``recordkit.integrations.ray``: Ray Data datasources with one block per chunk
  (``read_ctf``, ``read_cbf``, ``read_ofrecord``, ``read_singa``), CBF/OFRecord
  datasinks writing one atomic part per task, and ``minibatches_from_ray`` for
  workers fed by ``streaming_split`` (``pip install 'recordkit[ray]'``).
- ``recordkit.integrations.spark``: a Spark 4 Python data source (``register(spark)``,
  ``spark.read.format("recordkit")``, ``df.write.format("recordkit")``), partitions
  planned like Ray's blocks (``chunk_plan``), writes published whole (``task_sets``)
  (``pip install 'recordkit[spark]'``).
"""
