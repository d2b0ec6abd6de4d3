"""Small helpers shared by the unit tests."""
from __future__ import annotations

import warnings

from recordkit import StreamSpec
from recordkit.formats.ctf import CTFReader


def write(tmp_path, text, name="data.ctf"):
    p = tmp_path / name
    p.write_bytes(text.encode() if isinstance(text, str) else text)
    return p


def read_all(path, streams, **kw):
    """All sequences as (key, {name: dense ndarray | csr}) plus the reader, warnings captured."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reader = CTFReader(path, streams, **kw)
        seqs = [(s.key, s.data) for s in reader]
    return seqs, reader, [str(w.message) for w in caught]


def dense(name, dim, alias=None, **kw):
    return StreamSpec(name, "dense", dim, alias, **kw)


def sparse(name, dim, alias=None, **kw):
    return StreamSpec(name, "sparse", dim, alias, **kw)


PEAK_RSS_CODE = ("def peak_rss_kb():\n"
                 "    # VmHWM belongs to this process's own address space; ru_maxrss would report the\n"
                 "    # parent's peak, which a child started by fork/vfork + exec inherits on Linux.\n"
                 "    for line in open('/proc/self/status'):\n"
                 "        if line.startswith('VmHWM:'):\n"
                 "            return int(line.split()[1])\n")
"""Source of ``peak_rss_kb()`` for a test's child process: its own peak resident set in KiB."""


def peak_rss_kb() -> int:
    """This process's peak resident set (KiB) since it started or since ``reset_peak_rss()``."""
    namespace: dict = {}
    exec(PEAK_RSS_CODE, namespace)
    return namespace["peak_rss_kb"]()


def reset_peak_rss() -> bool:
    """Reset the peak (Linux: write 5 to clear_refs) so a test measures only its own growth;
    False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False
