"""Small helpers shared by the unit tests."""
from __future__ import annotations

import contextlib
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


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` memory figure of this process, in KiB (``VmHWM``, ``VmRSS``...)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_rss_kb() -> int:
    """This process's peak resident set (KiB) since it started or since ``reset_peak_rss()``.
    VmHWM belongs to this process's own address space; ru_maxrss would report the parent's peak,
    which a child started by fork/vfork + exec inherits on Linux."""
    return status_kb("VmHWM")


@contextlib.contextmanager
def address_space_limit(extra: int = 2 << 30):
    """While inside, this process may map at most ``extra`` more bytes (RLIMIT_AS, restored after):
    a claimed count that makes the code allocate gigabytes raises MemoryError, which fails the test
    instead of filling the machine's memory."""
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = status_kb("VmSize") * 1024 + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _source_of(fn) -> str:
    import inspect
    import textwrap
    return textwrap.dedent(inspect.getsource(fn)) + "\n"


PEAK_RSS_CODE = _source_of(status_kb) + _source_of(peak_rss_kb)
"""Source of ``peak_rss_kb()`` for a test's child process: its own peak resident set in KiB."""


def refused_in_a_child(setup: str, call: str, case: str) -> None:
    """Run ``call`` after ``setup`` in a child process and assert it was refused with an
    IndexError/ValueError while the process lived (a crash fails the test, not the test run)."""
    import subprocess
    import sys
    import textwrap
    code = setup + textwrap.dedent(f"""
    try:
        {call}
    except (IndexError, ValueError) as e:
        print("refused:", e)
    else:
        print("accepted")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{case}: the process died ({out.returncode}): {out.stderr[-500:]}"
    assert out.stdout.startswith("refused:"), f"{case}: {out.stdout}{out.stderr[-300:]}"


def reset_peak_rss() -> bool:
    """Reset the peak (Linux: write 5 to clear_refs) so a test measures only its own growth;
    False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def write_valued_cbf(path, n: int, *, longest: int, dim: int = 3, chunk_size: int = 256) -> str:
    """A CBF file of ``n`` sequences, sequence ``i`` holding ``i % longest + 1`` samples of stream
    ``x`` (dense ``dim``) all equal to ``i``: which sequence a minibatch row came from is its value."""
    import numpy as np
    from recordkit.formats.cbf import CBFWriter
    with CBFWriter(path, [StreamSpec("x", "dense", dim)], chunk_size=chunk_size) as w:
        for i in range(n):
            w.write({"x": np.full((i % longest + 1, dim), i, dtype=np.float32)})
    return str(path)
