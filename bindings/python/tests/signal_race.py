"""Signals at random offsets around a holder's release, many rounds; run by test_signals.py.

A separate process, so that pytest's own handling of SIGINT stays out of the way. Each round:
a holder (another thread) holds the resource and releases it at a random moment; the main
thread waits for the resource (``wait_timeout``, often with ``auto_extend=True``); SIGINT (from
a timer thread) or SIGALRM (``setitimer``, with a handler that raises) lands within ±30 ms of the
release: during the wait, in the instant the waiter gets the lock, or in the ``with`` body. The
waiter's key must then be gone from every node well before its TTL (10 s): the interrupted
acquisition was cancelled, or the lock it obtained was released, never orphaned (an orphan with
auto-extension would live for ever).

Usage: ``python signal_race.py MODE ROUNDS SEED URL...`` with MODE ``sigint`` or ``sigalrm``;
prints one JSON object with the counts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
import uuid
from urllib.parse import urlparse

import redquorum
from redis_nodes import resp

TTL_S = 10
# Undo and release are sent before the calls return but applied a little later, and a node may
# lag behind the quorum: poll this long, far below the TTL, for the keys to go.
GONE_WITHIN_S = 2.0


class Alarm(Exception):
    pass


def nap(seconds: float) -> None:
    # In short sleeps, as a program that wants prompt signals must: the kernel may deliver a
    # process-directed signal (SIGALRM, kill) to another thread, and then a long sleep of the
    # main thread is not interrupted; Python runs the handler only when the sleep ends. (Seen
    # once in CI: a latency of 2.0 s, the length of the body's sleep.)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


def main() -> None:
    mode, rounds, seed, urls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
    rng = random.Random(seed)
    ports = [urlparse(url).port for url in urls]
    rl = redquorum.Redlock(urls, node_timeout=1)
    if mode == "sigalrm":

        def on_alarm(_signum: int, _frame: object) -> None:
            raise Alarm()

        signal.signal(signal.SIGALRM, on_alarm)
    baseline_threads = threading.active_count()
    stages = {"acquire": 0, "body": 0, "after": 0}
    leaked: list[dict[str, object]] = []
    latencies: list[float] = []
    undelivered = 0
    for index in range(rounds):
        resource = f"race:{mode}:{index}:{uuid.uuid4().hex}"
        auto = index % 3 != 2
        fenced = index % 4 == 1
        holder = rl.try_lock(resource, ttl=TTL_S)
        start = time.monotonic()
        release_at = start + 0.03 + rng.uniform(0.0, 0.02)
        signal_at = release_at + rng.uniform(-0.03, 0.03)
        sent = [signal_at]

        def release_holder() -> None:
            time.sleep(max(0.0, release_at - time.monotonic()))
            holder.release()

        def send_sigint() -> None:
            time.sleep(max(0.0, signal_at - time.monotonic()))
            sent[0] = time.monotonic()
            os.kill(os.getpid(), signal.SIGINT)

        releaser = threading.Thread(target=release_holder)
        sender = threading.Thread(target=send_sigint) if mode == "sigint" else None
        stage = "acquire"
        caught = None
        try:
            releaser.start()
            if sender is not None:
                sender.start()
            else:
                signal.setitimer(signal.ITIMER_REAL, max(1e-4, signal_at - time.monotonic()))
            request = redquorum.Request(
                resource, ttl=TTL_S, wait_timeout=5, auto_extend=auto, fenced=fenced
            )
            with rl.acquire(request):
                stage = "body"
                nap(2.0)
            stage = "after"
            nap(2.0)
        except (KeyboardInterrupt, Alarm):
            caught = time.monotonic()
        if caught is None:
            undelivered += 1
        else:
            stages[stage] += 1
            latencies.append(caught - max(sent[0], signal_at))
        releaser.join()
        if sender is not None:
            sender.join()
        deadline = time.monotonic() + GONE_WITHIN_S
        while True:
            found = [resp(port, "GET", resource) for port in ports]
            if all(value is None for value in found):
                break
            if time.monotonic() > deadline:
                leaked.append(
                    {"round": index, "stage": stage, "auto_extend": auto, "found": found}
                )
                break
            time.sleep(0.01)
    deadline = time.monotonic() + 5.0
    while threading.active_count() > baseline_threads and time.monotonic() < deadline:
        time.sleep(0.01)
    print(
        json.dumps(
            {
                "rounds": rounds,
                "stages": stages,
                "undelivered": undelivered,
                "leaked": leaked,
                "max_latency_s": max(latencies, default=0.0),
                "threads_left": threading.active_count() - baseline_threads,
            }
        )
    )
    rl.close()


if __name__ == "__main__":
    main()
