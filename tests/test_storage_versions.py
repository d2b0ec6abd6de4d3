"""One version per opened source: a file or object replaced mid-sweep is an error, never a mix.

The S3 cases (If-Match, version ids, the range cache) are in test_storage_remote.py; these are
the generic fsspec check and local files.
"""
from __future__ import annotations

import os

import fsspec
import pytest

from recordkit.storage import open_source
from recordkit.storage.retry import RemoteReadError
from recordkit.storage.source import RemoteSource
from recordkit.storage.versions import SourceChangedError

A = bytes(range(256)) * 40
B = bytes(reversed(range(256))) * 40  # same size: nothing but the version tells them apart


def test_an_fsspec_object_replaced_between_two_ranges_is_an_error(tmp_path):
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/versions/blob", A)
    src = RemoteSource("memory://versions/blob", cache_dir=tmp_path)
    assert src.pread(0, 1000) == A[:1000]
    fs.pipe_file("/versions/blob", B)
    with pytest.raises(SourceChangedError, match=r"memory://versions/blob: changed while reading bytes "
                                                 r"1000\.\.2000: opened at modified .*, now modified "):
        src.pread(1000, 1000)
    (entry,) = os.listdir(src._cache.directory)  # only the range of the version opened was kept
    assert entry.startswith(f"{0:016x}-")


def test_a_removed_object_is_an_error_saying_so():
    fs = fsspec.filesystem("memory")
    fs.pipe_file("/versions/gone", A)
    src = RemoteSource("memory://versions/gone")
    fs.rm("/versions/gone")
    with pytest.raises(RemoteReadError, match=r"memory://versions/gone: removed while reading bytes 0\.\.10"):
        src.pread(0, 10)


def test_a_local_file_rewritten_in_place_mid_sweep_is_an_error(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(A)
    src = open_source(path)
    assert src.pread(0, 1000) == A[:1000]
    opened = os.stat(path)
    with open(path, "r+b") as f:
        f.write(B)
    # a rewrite within the file system's timestamp granularity keeps the old mtime: make it visible
    os.utime(path, ns=(opened.st_atime_ns, opened.st_mtime_ns + 1000))
    with pytest.raises(SourceChangedError, match=rf"{path}: file was rewritten in place while reading bytes 1000\.\.2000: opened at "
                                                 rf"modified .*Z \(10240 bytes\), now modified"):
        src.pread(1000, 1000)
    with pytest.raises(SourceChangedError):
        src.pread_into(0, bytearray(10))


def test_a_local_file_truncated_mid_sweep_is_an_error_even_where_its_bytes_remain(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(A)
    src = open_source(path)
    os.truncate(path, 5000)  # as `cp other blob` starts: what follows cannot be told from a rewrite
    with pytest.raises(SourceChangedError, match=rf"{path}: file shrank while reading bytes 0\.\.1000: opened at "
                                                 rf"modified .* \(10240 bytes\), now modified .* \(5000 bytes\)"):
        src.pread(0, 1000)
    assert src.pread(5000, 1000) == b""  # a short read is the reader's to report ("file shrank")


def test_a_local_file_grown_mid_sweep_reads_as_the_snapshot_opened(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(A)
    src = open_source(path)
    with open(path, "ab") as f:
        f.write(B)
    assert src.pread(0, len(A)) == A


def test_a_local_file_replaced_by_rename_mid_sweep_reads_on_as_the_file_opened(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(A)
    src = open_source(path)
    assert src.pread(0, 1000) == A[:1000]
    (tmp_path / "new").write_bytes(B)
    os.replace(tmp_path / "new", path)
    assert src.pread(1000, 9240) == A[1000:]



def test_a_modification_time_as_seconds_and_as_a_datetime_is_one_version():
    """fsspec's memory filesystem reports ``created`` as a datetime from ``info()`` and as seconds in
    a listing: the same instant must not read as a replaced object."""
    from datetime import datetime, timezone
    from recordkit.storage.versions import same_version
    when = datetime(2026, 11, 27, 19, 7, 11, 254758, tzinfo=timezone.utc)
    assert same_version({"size": 537, "created": when}, {"size": 537, "created": when.timestamp()})
    assert not same_version({"size": 537, "created": when}, {"size": 537, "created": when.timestamp() + 1})
