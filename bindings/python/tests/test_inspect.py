"""The operator's tools through the Python binding: Redlock.inspect and Redlock.force_release."""

from __future__ import annotations

import asyncio
import uuid

import pytest

import redquorum
from redquorum import KeyKind, ReleaseOutcome
from redquorum.aio import AsyncRedlock

QUORUM = 3  # of the 5 test nodes
TTL = 20  # seconds


def _with_token(insp: redquorum.Inspection, token: str) -> int:
    """Nodes that answered with ``token`` under a live key with a TTL no longer than set."""
    return sum(
        n.error is None
        and n.kind is KeyKind.TOKEN
        and n.token == token
        and n.key_type == "string"
        and n.ttl is not None
        and 0 < n.ttl <= TTL
        and not n.persistent
        and n.live
        for n in insp.nodes
    )


def test_a_free_resource(nodes, make_client, resource):
    insp = make_client().inspect(resource)
    assert insp.resource == resource
    assert (insp.held, insp.holder, insp.fence, insp.quorum) == (False, None, None, QUORUM)
    assert [n.node for n in insp.nodes] == [f"127.0.0.1:{node.port}" for node in nodes]
    for n in insp.nodes:
        assert n.answered and n.error is None
        assert (n.kind, n.key_type, n.token, n.owners) == (KeyKind.ABSENT, "none", None, {})
        assert (n.ttl, n.persistent, n.fence, n.live) == (None, False, None, False)


def test_a_plain_and_a_fenced_lock(make_client, resource):
    rl = make_client()
    with rl.try_lock(resource, ttl=TTL) as lock:
        insp = rl.inspect(resource)
        assert insp.held and insp.holder == lock.token
        assert _with_token(insp, lock.token) >= QUORUM
        assert insp.fence is None
    fenced_resource = resource + ":fenced"
    with rl.acquire(redquorum.Request(fenced_resource, ttl=TTL, fenced=True, retries=0)) as lock:
        assert lock.fence is not None
        insp = rl.inspect(fenced_resource)
        assert insp.held and insp.holder == lock.token
        assert insp.fence is not None and insp.fence >= lock.fence
        assert sum(n.fence is not None and n.fence >= lock.fence for n in insp.nodes) >= QUORUM


def test_a_reentrant_lock_shows_its_owners(make_client, resource):
    rl = make_client()
    alice = uuid.uuid4().hex
    with rl.acquire(redquorum.Request(resource, ttl=TTL, reentrant=alice, retries=0)):
        with rl.acquire(redquorum.Request(resource, ttl=TTL, reentrant=alice, retries=0)):
            insp = rl.inspect(resource)
    assert insp.held and insp.holder == alice
    owners = [n for n in insp.nodes if n.kind is KeyKind.OWNERS]
    assert all(n.token is None and n.key_type == "hash" for n in owners)
    twice = [n for n in owners if n.owners == {alice: 2} and n.ttl and n.ttl <= TTL]
    assert len(twice) >= QUORUM


def test_a_key_of_another_type_blocks_and_never_expires(nodes, make_client, resource):
    for node in nodes:
        node.command("RPUSH", resource, "not a lock")
    insp = make_client().inspect(resource)
    assert insp.held and insp.holder is None
    for n in insp.nodes:
        assert (n.kind, n.key_type, n.ttl, n.persistent, n.live) == (
            KeyKind.OTHER,
            "list",
            None,
            True,
            True,
        )
        assert n.token is None and n.owners == {}


def test_down_nodes_are_reported_and_the_call_succeeds(nodes, make_client, resource):
    rl = make_client()
    lock = rl.try_lock(resource, ttl=TTL)
    nodes[0].kill()
    nodes[1].kill()
    insp = rl.inspect(resource)
    down = {f"127.0.0.1:{nodes[0].port}", f"127.0.0.1:{nodes[1].port}"}
    for n in insp.nodes:
        if n.node in down:
            assert n.error and not n.answered
            assert (n.kind, n.key_type, n.ttl, n.live) == (KeyKind.UNKNOWN, None, None, False)
    # The three live nodes hold it: still a quorum.
    assert insp.held and insp.holder == lock.token
    released = rl.force_release(resource, lock.token)
    assert [n.outcome for n in released.nodes if n.node in down] == [ReleaseOutcome.ERROR] * 2
    assert all(n.error for n in released.nodes if n.node in down)
    assert released.on_quorum and released.confirmed >= QUORUM
    with pytest.raises(redquorum.LockLost):
        lock.release()


def test_noperm_on_one_node_is_that_nodes_error(nodes, make_client, resource):
    # A user that may run scripts but not touch the resource's keys: the script fails NOPERM.
    limited = nodes[0]
    limited.command("ACL", "SETUSER", "limited", "on", ">pw", "~elsewhere:*", "+@all")
    try:
        urls = [n.url for n in nodes]
        urls[0] = f"redis://limited:pw@127.0.0.1:{limited.port}"
        insp = make_client(urls).inspect(resource)
        first = insp.nodes[0]
        assert first.node == f"127.0.0.1:{limited.port}"  # no credentials
        assert first.error is not None and "NOPERM" in first.error, first.error
        assert first.kind is KeyKind.UNKNOWN
        assert all(n.error is None and n.kind is KeyKind.ABSENT for n in insp.nodes[1:])
    finally:
        limited.command("ACL", "DELUSER", "limited")


def test_force_release_with_a_wrong_token_keeps_the_key(make_client, resource):
    rl = make_client()
    with rl.try_lock(resource, ttl=TTL) as lock:
        released = rl.force_release(resource, "not-the-token")
        assert (released.resource, released.token) == (resource, "not-the-token")
        assert released.quorum == QUORUM and len(released.nodes) == 5
        assert sum(n.outcome is ReleaseOutcome.HELD_BY_OTHER for n in released.nodes) >= QUORUM
        assert not released.on_quorum and released.confirmed < QUORUM
        insp = rl.inspect(resource)
        assert insp.held and _with_token(insp, lock.token) >= QUORUM
        assert lock.held


def test_force_release_with_the_token_removes_it_and_keeps_the_fence(make_client, resource):
    rl = make_client()
    lock = rl.acquire(redquorum.Request(resource, ttl=TTL, fenced=True, retries=0))
    released = rl.force_release(resource, lock.token)
    assert released.on_quorum and released.confirmed >= QUORUM
    assert sum(n.outcome is ReleaseOutcome.DELETED for n in released.nodes) >= QUORUM
    assert all(n.error is None for n in released.nodes)
    insp = rl.inspect(resource)
    assert not insp.held and insp.holder is None
    assert sum(n.kind is KeyKind.ABSENT for n in insp.nodes) >= QUORUM
    assert insp.fence is not None and lock.fence is not None and insp.fence >= lock.fence
    with pytest.raises(redquorum.LockLost):
        lock.extend(ttl=TTL)  # the holder finds out at its next extension
    with rl.acquire(redquorum.Request(resource, ttl=TTL, fenced=True, retries=0)) as next_lock:
        assert next_lock.fence is not None and next_lock.fence > lock.fence


def test_force_release_without_a_token_removes_any_holder(make_client, resource):
    rl = make_client()
    held = rl.acquire(redquorum.Request(resource, ttl=TTL, reentrant="bob", retries=0))
    released = rl.force_release(resource)
    assert released.token is None and released.on_quorum
    assert sum(n.outcome is ReleaseOutcome.DELETED for n in released.nodes) >= QUORUM
    with rl.try_lock(resource, ttl=TTL):
        pass
    with pytest.raises(redquorum.LockLost):
        held.release()
    never = rl.force_release(resource + ":never")
    assert sum(n.outcome is ReleaseOutcome.ABSENT for n in never.nodes) >= QUORUM
    assert never.on_quorum


def test_bad_arguments(make_client, resource):
    rl = make_client()
    with pytest.raises(ValueError, match="resource"):
        rl.inspect("")
    with pytest.raises(TypeError):
        rl.inspect(7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NUL"):
        rl.inspect("a\0b")
    with pytest.raises(ValueError, match="resource"):
        rl.force_release("")
    with pytest.raises(ValueError, match="token"):
        rl.force_release(resource, "")
    with pytest.raises(TypeError):
        rl.force_release(resource, b"tok")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rl.inspect("\ud800")  # not encodable as UTF-8
    rl.close()
    with pytest.raises(ValueError, match="closed"):
        rl.inspect(resource)
    with pytest.raises(ValueError, match="closed"):
        rl.force_release(resource)


def test_asyncio_facade(urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            lock = await rl.try_lock(resource, ttl=TTL)
            insp = await rl.inspect(resource)
            assert insp.held and insp.holder == lock.token
            kept = await rl.force_release(resource, "not-the-token")
            assert not kept.on_quorum
            gone = await rl.force_release(resource, lock.token)
            assert gone.on_quorum
            assert not (await rl.inspect(resource)).held
            with pytest.raises(redquorum.LockLost):
                await lock.extend(ttl=TTL)
            with pytest.raises(ValueError):
                await rl.inspect("")

    asyncio.run(main())
