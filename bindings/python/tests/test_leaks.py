"""Handles are freed: no file descriptors or native threads outlive the objects that own them."""

from __future__ import annotations

import gc
import os
import time

from redis_nodes import PATIENT_MS

import redlock_rs


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _threads() -> int:
    # threading.enumerate() cannot see the library's native worker threads; /proc can.
    return len(os.listdir("/proc/self/task"))


def _settle(start_fds: int, start_threads: int) -> tuple:
    deadline = time.monotonic() + 10
    while True:
        gc.collect()
        counts = (_open_fds(), _threads())
        if counts[0] <= start_fds and counts[1] <= start_threads or time.monotonic() > deadline:
            return counts
        time.sleep(0.05)


def test_no_fd_or_thread_leaks(urls, resource):
    gc.collect()
    start = (_open_fds(), _threads())

    rl = redlock_rs.Redlock(urls, node_timeout_ms=PATIENT_MS)
    assert _threads() > start[1]  # the client does run native threads, so this test can see them
    for i in range(2000):
        lock = rl.try_lock(f"{resource}:{i % 50}", ttl_ms=10_000)
        if i % 4:
            lock.release()  # the others are released by being dropped
        del lock
    rl.close()

    for i in range(200):
        client = redlock_rs.Redlock(urls, node_timeout_ms=PATIENT_MS)
        if i % 2:
            client.close()  # the others are closed by being dropped
        del client

    # a lock keeps its closed client's internals alive until it is dropped
    rl = redlock_rs.Redlock(urls, node_timeout_ms=PATIENT_MS)
    lock = rl.try_lock(resource, ttl_ms=10_000)
    rl.close()
    lock.release()
    del lock, rl

    fds, threads = _settle(*start)
    # At most as many as before: a thread or descriptor of an earlier test may have ended since.
    assert fds <= start[0], f"{fds - start[0]} file descriptors leaked"
    assert threads <= start[1], f"{threads - start[1]} threads leaked"
