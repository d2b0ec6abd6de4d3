"""One version of a file per opened source: an object replaced mid-sweep is an error, never a mix.

A reader reads a file by many ranges over a long time (one per chunk, every sweep). If the
object is replaced meanwhile, the ranges asked after the replacement would return the new
content: the first chunks of one version and the last ones of another, with nothing to
say so, and the range cache would keep the new bytes under the old version's key and
serve the mix again whenever the old version is back. So the version is recorded when the
source is opened and every later range must be of that version:

* Object stores that take S3 request parameters (s3fs): every ranged GET carries
  ``If-Match`` with the ETag recorded at open, so the store itself refuses a range of any
  other version (412) and no extra request is made. With ``version_aware=True`` the GET
  also names the version id, so the store keeps serving the opened version even after the
  object was overwritten (a sweep then simply completes on its version).
* Other fsspec filesystems: the object's version (ETag, version id, generation, else its
  modification time, and its size) is read again after each range and compared: one
  metadata request more per range, none when the filesystem reports no version at all.
* Local files: the open descriptor pins the inode (a file replaced by rename, as every
  recordkit writer publishes, goes on reading the old content, all of it); a file
  truncated or rewritten in place shows a smaller size or a new modification time,
  checked with one ``fstat`` after each whole read. A file that only grew reads as the
  snapshot taken at open (appending leaves the indexed bytes alone).

A range of another version is ``SourceChangedError`` naming the file and both versions;
it is not retried (no attempt can succeed) and nothing of that range reaches the cache.
"""
from __future__ import annotations

import errno
import os
from datetime import datetime, timezone

from recordkit.storage.retry import RemoteReadError

# where fsspec filesystems report a version, most telling first: an ETag or a generation names
# the content itself (S3, HTTP, GCS), a version id one upload, a modification time whatever
# the filesystem has left
_FIELDS = (("ETag", "ETag"), ("etag", "ETag"), ("generation", "generation"), ("VersionId", "version id"),
           ("LastModified", "modified"), ("mtime", "modified"), ("updated", "modified"), ("created", "modified"))


class SourceChangedError(RemoteReadError):
    """The file or object changed while it was being read: its ranges would mix two versions."""


def _value(info: dict, key: str):
    v = info.get(key)
    return None if v in (None, "", "null") else v


def _comparable(v):
    """A version value as one representation: filesystems report a modification time as a datetime
    in one answer and as seconds in another (fsspec's memory filesystem: a listing and ``info()``)."""
    if isinstance(v, datetime):
        return v.timestamp() if v.tzinfo is not None else v.replace(tzinfo=timezone.utc).timestamp()
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    return str(v)


def same_version(a: dict, b: dict) -> bool:
    """Whether two ``info()`` answers are of one version: same size, and the same value of the
    most telling field both report (answers from a listing and from a HEAD differ in which
    fields they carry)."""
    if int(a.get("size") or 0) != int(b.get("size") or 0):
        return False
    for key, _ in _FIELDS:
        if _value(a, key) is not None and _value(b, key) is not None:
            return _comparable(a[key]) == _comparable(b[key])
    return True


def describe(info: dict) -> str:
    """A version for people: its most telling field and its size."""
    for key, what in _FIELDS:
        if _value(info, key) is not None:
            return f"{what} {info[key]} ({int(info.get('size') or 0)} bytes)"
    return f"{int(info.get('size') or 0)} bytes"


def has_version(info: dict) -> bool:
    return any(_value(info, key) is not None for key, _ in _FIELDS)


class RemotePin:
    """The version of an object recorded at open (its ``info()``), and ranged reads of exactly it."""

    def __init__(self, name: str, path: str, info: dict, fs):
        self.name, self.path, self.info = name, path, info
        self.etag = _value(info, "ETag") or _value(info, "etag")
        self.version_id = _value(info, "VersionId") if getattr(fs, "version_aware", False) else None
        self._checked = has_version(info)

    def read(self, fs, start: int, end: int) -> bytes:
        """Bytes ``start..end`` of the pinned version. ``fs`` is passed each time (a caller may
        swap its filesystem object, e.g. for another endpoint)."""
        s3 = hasattr(fs, "call_s3") and bool(self.etag or self.version_id)
        try:
            data = self._read_s3(fs, start, end) if s3 else fs.cat_file(self.path, start=start, end=end)
        except FileNotFoundError:
            self.check(fs, start, end)  # removed, or its pinned version deleted: say so
            raise
        except OSError as e:
            if s3 and _precondition_failed(e):
                self.check(fs, start, end)
            raise
        if not s3 and self._checked:
            self.check(fs, start, end)
        return data

    def _read_s3(self, fs, start: int, end: int) -> bytes:
        """One GET of the range carrying the pinned ETag (and version id): the store answers 412
        rather than another version's bytes."""
        from fsspec.asyn import sync
        bucket, key, _ = fs.split_path(self.path)
        pinned = {"IfMatch": self.etag} if self.etag else {}
        if self.version_id:
            pinned["VersionId"] = self.version_id
        resp = fs.call_s3("get_object", Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", **pinned)
        body = resp["Body"]
        try:
            return sync(fs.loop, body.read)
        finally:
            body.close()

    def check(self, fs, start: int, end: int) -> None:
        """Raise ``SourceChangedError`` if the object is no longer the version opened."""
        try:
            fs.invalidate_cache(self.path)
            now = fs.info(self.path)
        except FileNotFoundError:
            raise SourceChangedError(f"{self.name}: removed while reading bytes {start}..{end} (opened at "
                                     f"{describe(self.info)})") from None
        if not same_version(self.info, now):
            raise changed(self.name, "changed", describe(self.info), describe(now), start, end)


def changed(name: str, how: str, before: str, now: str, start: int, end: int) -> SourceChangedError:
    return SourceChangedError(f"{name}: {how} while reading bytes {start}..{end}: opened at {before}, now {now}; "
                              f"no byte of the new version was used (open it again to read the new version)")


def _precondition_failed(e: OSError) -> bool:
    """s3fs turns a 412 (``If-Match`` not met) into ``OSError(EINVAL, message)``."""
    response = getattr(e.__cause__, "response", None) or {}
    code = (response.get("Error") or {}).get("Code")
    return code in ("PreconditionFailed", "412") or (e.errno == errno.EINVAL and "pre-condition" in str(e))


def local_version(st: os.stat_result) -> str:
    when = datetime.fromtimestamp(st.st_mtime_ns // 10**9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"modified {when}.{st.st_mtime_ns % 10**9:09d}Z ({st.st_size} bytes)"


def check_local(name: str, fd: int, opened: os.stat_result, start: int, end: int) -> None:
    """Raise ``SourceChangedError`` if the file open as ``fd`` shrank or was rewritten in place
    since ``opened``. A file that grew was appended to: the bytes a reader indexed at open are
    still there, and it reads that snapshot (a rewrite that also grows the file looks the same:
    that much a size and a time cannot tell)."""
    st = os.fstat(fd)
    if st.st_size > opened.st_size or (st.st_size == opened.st_size and st.st_mtime_ns == opened.st_mtime_ns):
        return
    how = "shrank" if st.st_size < opened.st_size else "was rewritten in place"
    raise changed(name, f"file {how}", local_version(opened), local_version(st), start, end)
