"""OneFlow's C++ random streams, draw for draw, where OneFlow's own are reproducible.

OneFlow 0.9's ``OFRecordReader`` shuffles with a buffer (``RandomShuffleDataset``) driven by
``std::default_random_engine`` (libstdc++: ``minstd_rand0``) seeded through
``std::seed_seq({seed})``, one ``std::uniform_int_distribution<int>(0, size - 1)`` draw per
record; with ``shuffle_after_epoch`` it reshuffles the part list before every epoch after the
first with ``std::shuffle(parts, std::mt19937(524287 + epoch))``, cumulatively. Both are
reproduced here in pure Python (a few draws per record; libstdc++'s algorithms, as in GCC 12,
checked against OneFlow 0.9.0's output in tests/test_compat_oneflow_golden.py), so a seeded
OneFlow script reads its records in the same order under recordkit.

Not reproduced: the coin flip and random-crop streams (see recordkit.formats.ofrecord.decoders).
"""
from __future__ import annotations

import numpy as np

_M32 = 0xFFFFFFFF
ONEFLOW_DATASET_SEED = 524287  # kOneflowDatasetSeed


def seed_seq_generate(seeds, n: int) -> list[int]:
    """``std::seed_seq(seeds).generate(out, out + n)`` ([rand.util.seedseq])."""
    v = [int(s) & _M32 for s in seeds]
    s = len(v)
    b = [0x8B8B8B8B] * n
    t = 11 if n >= 623 else 7 if n >= 68 else 5 if n >= 39 else 3 if n >= 7 else (n - 1) // 2
    p = (n - t) // 2
    q = p + t
    m = max(s + 1, n)

    def T(x):
        return x ^ (x >> 27)

    for k in range(m):
        r1 = (1664525 * T(b[k % n] ^ b[(k + p) % n] ^ b[(k - 1) % n])) & _M32
        r2 = (r1 + (s if k == 0 else (k % n + v[k - 1]) if k <= s else k % n)) & _M32
        b[(k + p) % n] = (b[(k + p) % n] + r1) & _M32
        b[(k + q) % n] = (b[(k + q) % n] + r2) & _M32
        b[k % n] = r2
    for k in range(m, m + n):
        r3 = (1566083941 * T((b[k % n] + b[(k + p) % n] + b[(k - 1) % n]) & _M32)) & _M32
        r4 = (r3 - k % n) & _M32
        b[(k + p) % n] ^= r3
        b[(k + q) % n] ^= r4
        b[k % n] = r4
    return b


class MinStdRand0:
    """``std::default_random_engine`` of libstdc++ (``minstd_rand0``), seeded like OneFlow's shuffle buffer."""

    MODULUS = 2147483647
    MIN, MAX = 1, 2147483646

    def __init__(self, seed: int):
        # seed_seq({int64 seed}) keeps the low 32 bits; linear_congruential_engine::seed(seq) draws k + 3 = 4
        # words and uses the last one (k = 1 word for a 31-bit modulus).
        s = seed_seq_generate([seed], 4)[3] % self.MODULUS
        self.x = s if s else 1

    def __call__(self) -> int:
        self.x = (self.x * 16807) % self.MODULUS
        return self.x

    def uniform_int(self, low: int, high: int) -> int:
        """``std::uniform_int_distribution<int>(low, high)(engine)`` (libstdc++'s downscaling path)."""
        urngrange = self.MAX - self.MIN
        uerange = high - low + 1
        scaling = urngrange // uerange
        past = uerange * scaling
        while True:
            ret = self() - self.MIN
            if ret < past:
                return low + ret // scaling


class MT19937:
    """``std::mt19937(seed)`` raw 32-bit draws (NumPy's legacy MT19937 has the same seeding)."""

    def __init__(self, seed: int):
        self._rs = np.random.RandomState(int(seed) & _M32)

    def __call__(self) -> int:
        return int(self._rs.randint(0, 1 << 32, dtype=np.uint64))

    def uniform_int(self, low: int, high: int) -> int:
        """``std::uniform_int_distribution(low, high)`` over a full 32-bit engine: libstdc++ (GCC >= 11)
        uses Lemire's multiply-and-shift with rejection."""
        rng = high - low + 1
        if rng > 1 << 32:
            raise ValueError("range above 2^32 is not needed here")
        if rng == 1 << 32:
            return low + self()
        product = self() * rng
        lowbits = product & _M32
        if lowbits < rng:
            threshold = ((1 << 32) - rng) % rng
            while lowbits < threshold:
                product = self() * rng
                lowbits = product & _M32
        return low + (product >> 32)


def std_shuffle(items: list, gen: MT19937) -> None:
    """``std::shuffle(items.begin(), items.end(), gen)`` as libstdc++ does it, in place (two positions per
    draw when the range allows, as GCC >= 9)."""
    n = len(items)
    if n == 0:
        return
    urngrange = _M32
    if urngrange // n >= n:
        i = 1
        if n % 2 == 0:
            j = gen.uniform_int(0, 1)
            items[i], items[j] = items[j], items[i]
            i += 1
        while i != n:
            swap_range = i + 1
            x = gen.uniform_int(0, swap_range * (swap_range + 1) - 1)
            a, b = divmod(x, swap_range + 1)
            items[i], items[a] = items[a], items[i]
            i += 1
            items[i], items[b] = items[b], items[i]
            i += 1
        return
    for i in range(1, n):
        j = gen.uniform_int(0, i)
        items[i], items[j] = items[j], items[i]


def shuffled_parts(paths: list, epoch: int) -> list:
    """The global part list OneFlow reads in ``epoch`` with ``shuffle_after_epoch`` (cumulative shuffles)."""
    order = list(paths)
    for e in range(1, epoch + 1):
        std_shuffle(order, MT19937(ONEFLOW_DATASET_SEED + e))
    return order
