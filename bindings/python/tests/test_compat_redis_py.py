"""Wire compatibility with redis-py's ``Lock``: a plain lock is ``SET resource token NX PX ttl``
at the resource's own key, so redlock and redis-py's lock (like redsync and node-redlock)
exclude each other on the same key, and each releases only its own token.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import redis

import redquorum
from redis_nodes import RedisNode


def test_redlock_and_redis_py_locks_exclude_each_other(
    nodes: list[RedisNode],
    make_client: Callable[..., redquorum.Redlock],
    resource: str,
) -> None:
    node = nodes[0]
    rl = make_client([node.url], retry_count=0)
    py = redis.Redis.from_url(node.url)
    try:
        theirs = py.lock(resource, timeout=10, blocking=False)
        assert theirs.acquire()
        # The same key: redlock is refused while redis-py holds it.
        with pytest.raises(redquorum.NotAcquired):
            rl.try_lock(resource, ttl=10)
        assert py.get(resource) == theirs.local.token
        theirs.release()

        with rl.try_lock(resource, ttl=10) as ours:
            assert py.get(resource) == ours.token.encode()
            other = py.lock(resource, timeout=10, blocking=False)
            assert not other.acquire(), "redis-py got a lock redlock holds"
            assert 0 < py.pttl(resource) <= 10_000
        # Released by redlock (its token only): redis-py gets it at once.
        again = py.lock(resource, timeout=10, blocking=False)
        assert again.acquire()
        again.release()
        assert py.exists(resource) == 0
    finally:
        py.close()
