"""Handles are freed: no file descriptors or native threads outlive the objects that own them."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time

from redis_nodes import PATIENT

import redquorum


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
    # The process-wide parts that stay for good, started first so that they are not counted:
    # the cancel relay (a thread and a self-pipe, with the first cancel handle).
    redquorum.Cancel()
    gc.collect()
    start = (_open_fds(), _threads())

    rl = redquorum.Redlock(urls, node_timeout=PATIENT)
    assert _threads() > start[1]  # the client does run native threads, so this test can see them
    for i in range(2000):
        lock = rl.try_lock(f"{resource}:{i % 50}", ttl=10)
        if i % 4:
            lock.release()  # the others are released by being dropped
        del lock
    rl.close()

    for i in range(200):
        client = redquorum.Redlock(urls, node_timeout=PATIENT)
        if i % 2:
            client.close()  # the others are closed by being dropped
        del client

    # a lock keeps its closed client's internals alive until it is dropped
    rl = redquorum.Redlock(urls, node_timeout=PATIENT)
    lock = rl.try_lock(resource, ttl=10)
    rl.close()
    lock.release()
    del lock, rl

    fds, threads = _settle(*start)
    # At most as many as before: a thread or descriptor of an earlier test may have ended since.
    assert fds <= start[0], f"{fds - start[0]} file descriptors leaked"
    assert threads <= start[1], f"{threads - start[1]} threads leaked"


_BLOCKING_CALLS = """
import gc, os, sys, time
import redquorum

def name(task):
    try:
        with open(f"/proc/self/task/{task}/comm") as comm:
            return comm.read().strip()
    except FileNotFoundError:  # the thread ended after the listing
        return ""

def workers():
    names = (name(t) for t in os.listdir("/proc/self/task"))
    return sorted(n for n in names if n.startswith("redlock-node"))

rl = redquorum.Redlock(sys.argv[1].split(","))
assert workers(), "the client runs node workers, so this test can see them"
# On the main thread, blocking calls (lock, release) run on helper threads.
with rl.lock(sys.argv[2], ttl=10):
    pass
lock = rl.try_lock(sys.argv[2], ttl=10)
lock.release()
del lock
rl.close()
del rl
deadline = time.monotonic() + 10
while workers() and time.monotonic() < deadline:
    gc.collect()
    time.sleep(0.05)
print(" ".join(workers()) or "none")
"""


def test_blocking_calls_keep_nothing_of_a_closed_client(urls, resource):
    """The helper threads of the main thread's blocking calls hold nothing once a call has
    ended: a closed and dropped client's node workers go (it used to keep the last call's
    lock, and so its client, alive until the next call). A fresh interpreter, so that no other
    test's client is counted."""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(redquorum.__file__)))
    out = subprocess.run(
        [sys.executable, "-c", _BLOCKING_CALLS, ",".join(urls), resource],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "none", f"node workers left: {out.stdout.strip()}"
