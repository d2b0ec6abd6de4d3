"""A write split over tasks: each task writes its run of sequences aside, the driver publishes the whole.

Distributed writers (Ray's ``DataSetDatasink``, the Spark data source's writer) cannot let
their tasks write into the output: a failed or retried task would leave a partial or
doubled set. So every task writes a complete data set of its own with the format's writer
(``task_output``: ``.OUT.<token>.tasks/task-TTTTT`` beside the output, the same bytes a
local conversion writes), and when every task is done the driver joins them in task order
and publishes the result at once (``publish``): directory formats through their registry
``joiner`` (shards renumbered, descriptions and indexes merged); one-file formats whose
reader takes a directory of parts (CBF, Parquet) as ``part-NNNNN<ext>`` files renamed into a
``StagedDirectory``. Either way nothing appears under OUT before it is complete, and a
failed write removes the task outputs (``discard``). Local paths (or a shared file system).
"""
from __future__ import annotations

import os
import uuid

from recordkit.errors import UsageError
from recordkit.storage import location

__all__ = ["work_directory", "task_output", "publish", "discard", "check_writable"]


def work_directory(directory: str) -> str:
    """A fresh directory for the tasks' outputs, hidden beside ``directory`` (same file system)."""
    parent, name = os.path.split(directory.rstrip("/"))
    return location.join(parent or ".", f".{name}.{uuid.uuid4().hex[:12]}.tasks")


def _as_parts(fmt) -> bool:
    """A one-file format whose reader takes a directory of ``part-NNNNN<ext>`` files."""
    return (not fmt.output_directory and bool(fmt.extensions) and fmt.directory_probe is not None
            and bool(_load(fmt.directory_probe)([_part_name(fmt, 0)])))


def _load(ref: str):
    import importlib
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def _part_name(fmt, i: int) -> str:
    return f"part-{int(i):05d}{fmt.extensions[0]}"


def check_writable(fmt) -> None:
    """A UsageError unless tasks' outputs of ``fmt`` can be joined into one data set."""
    fmt.require("writing")
    if fmt.joiner is None and not _as_parts(fmt):
        raise UsageError(f"{fmt.name}: a distributed write cannot join its tasks' outputs (it writes "
                         f"directory formats with a joiner, or one-file formats read as a directory of parts)")


def task_output(fmt, work: str, task: int) -> str:
    """Where task ``task`` writes its data set (a directory, or one part file)."""
    name = _part_name(fmt, task) if fmt.joiner is None else f"task-{int(task):05d}"
    return location.join(work, name)


def publish(fmt, outputs: list[str], directory: str, streams, *, work: str, precision: str = "float",
            storage_options=None, checksums: bool = False) -> list[str]:
    """Join the tasks' ``outputs`` (in task order) into the data set ``directory`` and publish it whole;
    no output at all publishes one empty set, as a local conversion of nothing writes. The work
    directory is removed either way. Returns the paths written."""
    try:
        if not outputs:  # (no task made the work directory: none had rows)
            location.makedirs(work, storage_options)
            empty = task_output(fmt, work, 0)
            fmt.open_writer(empty, streams, precision=precision, storage_options=storage_options).close()
            outputs = [empty]
        if fmt.joiner is not None:
            names = fmt.join(outputs, directory, storage_options=storage_options, checksums=checksums)
        else:
            names = _publish_parts(fmt, outputs, directory, storage_options)
    finally:
        discard(work, storage_options)
    return [location.join(directory, n) for n in names]


def _publish_parts(fmt, outputs, directory, storage_options) -> list[str]:
    """Part files renamed, numbered in order, into a staged directory published in one step."""
    import re
    from recordkit.storage.staged_directory import StagedDirectory
    ext = re.escape(fmt.extensions[0])
    staged = StagedDirectory(directory, lambda n: re.fullmatch(r"part-\d+" + ext, n) is not None,
                             storage_options=storage_options, what=f"{fmt.name} part directory")
    names = []
    try:
        for i, path in enumerate(outputs):
            name = _part_name(fmt, i)
            os.replace(path, staged.path(name))
            if os.path.exists(location.sidecar_path(path)):
                os.replace(location.sidecar_path(path), staged.path(name + ".rkcrc"))
            names.append(name)
        staged.commit()
    except BaseException:
        staged.discard()
        raise
    return names


def discard(work: str, storage_options=None) -> None:
    location.remove_tree(work, storage_options)
