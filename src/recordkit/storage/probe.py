"""One look at a remote path, shared by format detection and the reader's open that follows.

Telling a URL's format and opening its reader ask the store the same questions one after
another: is it a directory or a file, which files does the directory hold, the file's size and
version, whether it has a checksum sidecar, its first bytes. On an object store each is a
round trip (20-100 ms). ``look`` asks them all at once, in one round trip, of an S3 store
(s3fs):

* a listing of the name as a prefix in its parent: the object's size and ETag (its version),
  its ``.rkcrc`` sidecar if any, and whether a directory of that name exists;
* a listing of the name as a directory: its entries with their sizes and versions;
* unless the range cache already recorded a version of the URL (a warm open finds its first
  and last block there), the first and last ``OPENING_BLOCK`` bytes and the sidecar, fetched
  speculatively: what detection sniffs and what a CBF reader reads first. A block is kept only
  when the store answered it with the ETag the listing gave: the version pinned is the
  listing's, and every later range is asked of it (``versions.RemotePin``). A sidecar is kept
  with its ETag in the cache's record: warm, a sidecar listed with the ETag recorded is the
  recorded one (else it is asked of the version listed, one more round trip).

``reusing`` makes the answers current while one ``recordkit.open`` runs: ``location``'s
questions (``isdir``, ``isfile``, ``listdir``), ``open_source`` and ``SourcePool`` take them
from there instead of asking again. They are never kept beyond that: the next open looks
again, so a changed object is seen. Other filesystems, a version-aware S3 filesystem (whose
listing carries no version ids), a name that begins ``SIBLINGS`` others and offline reads are not
looked at, nor a store that refuses listings: they ask as before (offline: nothing).
"""
from __future__ import annotations

import contextlib
import re

from recordkit.storage.looked import Probe, answering, current

# what a remote open reads first from each end of a file (a CBF reader's first and last block)
OPENING_BLOCK = 64 << 10
# at most this many names that begin with the one looked at are listed (one page): a name that
# begins hundreds of others (``shard-1`` of ``shard-10000``...) is not looked at
SIBLINGS = 500


@contextlib.contextmanager
def reusing(url, storage_options=None, cache_dir=None):
    """Look at ``url`` once (``look``) and answer the open's questions from it while the block
    runs; nothing for a local path, offline, or where a look is already current for ``url``."""
    if current(url) is not None:
        yield current(url)
        return
    with answering(look(url, storage_options, cache_dir)) as probe:
        yield probe


def look(url, storage_options=None, cache_dir=None) -> Probe | None:
    """Every answer about ``url`` in one round trip (see the module's docstring); None where the
    store is not an S3 one, or the read is offline or local."""
    from recordkit.storage import location, range_cache
    if not location.is_url(url) or range_cache.settings(cache_dir)[1]:
        return None
    fs, path = location.filesystem(url, storage_options)
    if not hasattr(fs, "_lsdir") or not hasattr(fs, "call_s3") or getattr(fs, "version_aware", False):
        return None
    from recordkit.storage.retry import RetryPolicy
    from recordkit.storage.source import concurrently
    path = path.rstrip("/")
    parent, _, name = path.rpartition("/")
    if not parent or not name:
        return None  # a bucket: left to the filesystem
    retry = RetryPolicy.default()
    speculate = cache_dir is None or not _recorded(cache_dir, url)

    def listed(where, prefix, most=None):
        from fsspec.asyn import sync
        try:
            return retry.call(lambda: sync(fs.loop, fs._lsdir, where, refresh=True, prefix=prefix, max_items=most),
                              what=url)
        except (FileNotFoundError, NotADirectoryError):
            return []
        except PermissionError:  # a store that lets objects be read but not listed: asked as before
            return None
    jobs = [lambda: listed(parent, name, SIBLINGS), lambda: listed(path, "")]
    if speculate:
        jobs += [lambda: _ranged(fs, path, "bytes=0-%d" % (OPENING_BLOCK - 1)),
                 lambda: _ranged(fs, path, "bytes=-%d" % OPENING_BLOCK),
                 lambda: _whole(fs, path + location.SIDECAR_SUFFIX)]
    results = concurrently(lambda job: job(), jobs, len(jobs))
    siblings, inside = results[0], results[1]
    if siblings is None or inside is None or len(siblings) >= SIBLINGS:  # (perhaps) not all: asked as before
        return None
    info = next((e for e in siblings if e["name"].rstrip("/") == path and e.get("type") != "directory"), None)
    directory = bool(inside) or any(e["name"].rstrip("/") == path and e.get("type") == "directory" for e in siblings)
    side = next((e for e in siblings if e["name"] == path + location.SIDECAR_SUFFIX), None)
    side_version = None if side is None else side.get("ETag")
    blocks, sidecar_data = [], None
    if speculate and info is not None:
        etag = info.get("ETag")
        blocks = [(offset, data) for offset, data, tag in results[2:4] if data is not None and etag and tag == etag]
        if side_version is not None and results[4][1] == side_version:
            sidecar_data = results[4][0]
    if info is not None and side_version is not None and sidecar_data is None:
        sidecar_data = _recorded_sidecar(cache_dir, url, info, side_version)
        if sidecar_data is None:  # asked of the version listed: its bytes and version go in the record
            sidecar_data = _whole(fs, path + location.SIDECAR_SUFFIX, IfMatch=side_version)[0]
    probe = Probe(url, info, directory, inside if directory else None, side is not None, sidecar_data, blocks)
    probe.sidecar_version = side_version if sidecar_data is not None else None
    return probe


def _recorded_sidecar(cache_dir, url, info: dict, version: str) -> bytes | None:
    """The sidecar bytes the cache recorded with this version of the file, if the sidecar listed
    now is the one recorded (its ETag): a warm open then asks for neither."""
    from recordkit.storage import range_cache
    if cache_dir is None:
        return None
    try:
        doc = range_cache.read_record(cache_dir, url)
    except range_cache.OfflineMissError:
        return None
    same_file = doc.get("size") == int(info.get("size") or -1) and \
        (doc.get("info") or {}).get("ETag") == info.get("ETag")
    if not same_file or doc.get("sidecar_version") != version:
        return None
    return range_cache.sidecar_of(doc)


def _recorded(cache_dir, url) -> bool:
    """Whether the range cache recorded a version of ``url``, or of files in a directory ``url``
    (what a warm open reads first is then likely cached: fetching it speculatively would be for
    nothing)."""
    from recordkit.storage import range_cache
    try:
        range_cache.read_record(cache_dir, url)
    except range_cache.OfflineMissError:
        return bool(range_cache.recorded_files(cache_dir, url))
    return True


_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)")


def _ranged(fs, path: str, spec: str):
    """(offset, bytes, ETag) of one ranged GET, or (0, None, None) when the store has no such
    object or refuses the range (an empty object): a guess that missed costs nothing but the
    request."""
    try:
        resp, data = _get(fs, path, Range=spec)
    except Exception:  # noqa: BLE001 - speculative: whatever went wrong is asked again, properly, later
        return 0, None, None
    m = _CONTENT_RANGE.fullmatch(str(resp.get("ContentRange") or ""))
    if m is None:
        return 0, None, None
    return int(m[1]), data, resp.get("ETag")


def _whole(fs, path: str, **kw):
    """(bytes, ETag) of one GET of a whole object, or (None, None) (as ``_ranged``)."""
    try:
        resp, data = _get(fs, path, **kw)
    except Exception:  # noqa: BLE001 - speculative, as _ranged
        return None, None
    return data, resp.get("ETag")


def _get(fs, path: str, **kw):
    from fsspec.asyn import sync
    bucket, key, _ = fs.split_path(path)
    resp = fs.call_s3("get_object", Bucket=bucket, Key=key, **kw)
    body = resp["Body"]
    try:
        return resp, sync(fs.loop, body.read)
    finally:
        body.close()
