"""ReadBuffers: chunk read buffers reused across loader threads, views aligned like the file."""
import threading

import numpy as np

from recordkit.storage.read_buffers import PAGE, ReadBuffers


def test_a_given_back_buffer_is_taken_again_instead_of_allocating():
    pool = ReadBuffers()
    buf, view = pool.take(10_000, offset=0)
    pool.give(buf)
    again, _ = pool.take(8_000, offset=123)
    assert again is buf
    assert pool.held_bytes() == 0


def test_views_start_at_the_file_offsets_place_within_a_page():
    pool = ReadBuffers()
    for offset in (0, 12, 4095, 4096 + 16, 33554684):
        buf, view = pool.take(5000, offset)
        assert len(view) == 5000
        assert np.frombuffer(view, np.uint8).ctypes.data % PAGE == offset % PAGE
        pool.give(buf)


def test_a_too_small_buffer_is_not_handed_out_and_the_smallest_that_fits_is():
    pool = ReadBuffers()
    small, _ = pool.take(100, 0)
    big, _ = pool.take(50_000, 0)
    mid, _ = pool.take(9_000, 0)
    for b in (small, big, mid):
        pool.give(b)
    got, view = pool.take(8_000, 0)
    assert got is mid and len(view) == 8_000
    got2, _ = pool.take(20_000, 0)
    assert got2 is big


def test_it_keeps_at_most_keep_buffers_dropping_the_smallest():
    pool = ReadBuffers(keep=2)
    bufs = [pool.take(n, 0)[0] for n in (1000, 3000, 2000)]
    for b in bufs:
        pool.give(b)
    assert sorted(len(b) for b in pool._spare) == [2000 + PAGE, 3000 + PAGE]
    pool.clear()
    assert pool.held_bytes() == 0


def test_threads_taking_at_once_get_distinct_buffers():
    pool = ReadBuffers()
    first, _ = pool.take(4096, 0)
    pool.give(first)
    got, barrier = [], threading.Barrier(4)

    def worker():
        barrier.wait()
        got.append(pool.take(4096, 0)[0])
    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(b) for b in got}) == 4 and sum(b is first for b in got) == 1


def test_give_view_takes_back_only_buffers_this_pool_made():
    pool, other = ReadBuffers(), ReadBuffers()
    buf, view = pool.take(5000, 0)
    foreign_buf, foreign_view = other.take(5000, 0)
    assert not pool.give_view(b"bytes a source returned")
    assert not pool.give_view(memoryview(np.zeros(5000, np.uint8)))
    assert not pool.give_view(foreign_view)  # another pool's: left to it
    assert pool.held_bytes() == 0
    assert pool.give_view(view)
    assert pool.take(5000, 0)[0] is buf


def test_a_buffer_given_back_twice_is_held_once():
    pool = ReadBuffers()
    buf, view = pool.take(5000, 0)
    pool.give(buf)
    pool.give_view(view)
    first, _ = pool.take(5000, 0)
    second, _ = pool.take(5000, 0)
    assert first is buf and second is not buf  # two takers never share one buffer


def test_a_pool_that_keeps_only_while_held_lets_buffers_go_outside_a_burst():
    pool = ReadBuffers(keep=2, only_while_held=True)
    buf, _ = pool.take(5000, 0)
    pool.give(buf)
    assert pool.held_bytes() == 0  # no burst: let go
    with pool.hold():
        buf, _ = pool.take(5000, 0)
        pool.give(buf)
        with pool.hold():  # nested: the outermost hold decides
            pass
        assert pool.take(5000, 0)[0] is buf  # reused inside the burst
        pool.give(buf)
        assert pool.held_bytes() == len(buf)
    assert pool.held_bytes() == 0  # the burst ended: nothing held
