"""Mutual exclusion between threads and between processes, and the GIL left free while waiting."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from redis_nodes import PACKAGE_DIR, PATIENT

import redquorum

CONTENDING = dict(retry_count=500, retry_delay=0.005, retry_jitter=0.005, node_timeout=PATIENT)


def test_threads_are_mutually_exclusive(make_client, resource):
    rl = make_client(**CONTENDING)  # one client shared by every thread
    counter = 0
    inside = 0
    most_inside = 0
    bookkeeping = threading.Lock()
    acquisitions = [0] * 8
    failures = []

    def work(index: int) -> None:
        nonlocal counter, inside, most_inside
        for _ in range(25):
            try:
                with rl.lock(resource, ttl=5):
                    with bookkeeping:
                        inside += 1
                        most_inside = max(most_inside, inside)
                    value = counter  # a deliberately non-atomic read-modify-write
                    time.sleep(0.001)
                    counter = value + 1
                    with bookkeeping:
                        inside -= 1
                acquisitions[index] += 1
            except redquorum.NotAcquired:
                pass
            except Exception as exc:  # surfaced below; a thread cannot fail the test itself
                failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures
    assert most_inside == 1
    assert sum(acquisitions) > 0
    assert counter == sum(acquisitions)


WORKER = r"""
import os, sys, time
import redquorum

urls = sys.argv[1:-4]
resource, counter_path, marker_path, iterations = sys.argv[-4:]
rl = redquorum.Redlock(
    urls, retry_count=500, retry_delay=0.005, retry_jitter=0.005, node_timeout=1
)
acquired = overlaps = 0
for _ in range(int(iterations)):
    try:
        with rl.lock(resource, ttl=5):
            try:
                os.close(os.open(marker_path, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                overlaps += 1
            with open(counter_path) as f:
                value = int(f.read())
            time.sleep(0.002)
            with open(counter_path, "w") as f:
                f.write(str(value + 1))
            os.unlink(marker_path)
        acquired += 1
    except redquorum.NotAcquired:
        pass
rl.close()
print(acquired, overlaps)
"""


def test_processes_are_mutually_exclusive(urls, resource, tmp_path):
    counter = tmp_path / "counter"
    counter.write_text("0")
    marker = tmp_path / "inside"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_DIR), env.get("PYTHONPATH")]))
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, *urls, resource, str(counter), str(marker), "20"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    acquired = overlaps = 0
    for worker in workers:
        out, err = worker.communicate(timeout=60)
        assert worker.returncode == 0, err
        done, overlapped = map(int, out.split())
        acquired += done
        overlaps += overlapped
    assert overlaps == 0
    assert acquired > 0
    assert int(counter.read_text()) == acquired


def test_other_threads_run_while_one_blocks_in_lock(make_client, resource):
    holder = make_client().try_lock(resource, ttl=10)
    waiter = make_client(retry_count=100, retry_delay=0.02, retry_jitter=0)  # up to ~2 s
    calling = threading.Event()
    result = {}

    def wait_for_the_lock() -> None:
        calling.set()
        try:
            result["lock"] = waiter.lock(resource, ttl=10)
        except Exception as exc:
            result["error"] = exc

    thread = threading.Thread(target=wait_for_the_lock)
    thread.start()
    calling.wait()
    # Pure Python work: if the waiting thread held the GIL this loop could not run until
    # lock() gave up, and the thread would be finished by the time it ends.
    ticks = 0
    until = time.monotonic() + 0.3
    while time.monotonic() < until:
        ticks += 1
    assert thread.is_alive(), result
    assert ticks > 1000
    holder.release()
    thread.join(timeout=10)
    assert "lock" in result, result
    assert result["lock"].token != holder.token
    result["lock"].release()
