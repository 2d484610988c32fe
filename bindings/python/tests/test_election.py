"""Leader election with real nodes: campaign, resign, terms that grow, a waiting candidate woken
by a resignation, the ``with`` block after a loss (a hung majority), observers, cancellation
(a handle, Ctrl-C, a cancelled task), the callbacks, asyncio and refused arguments."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time

import pytest
from redis_nodes import values

import redquorum
from redquorum import Cancel, Election, Leader, Leadership, Observer
from redquorum.aio import AsyncLeadership, AsyncRedlock

TTL = 5  # seconds: a third of it (an extension's period) is well above the patient node timeout
PROMPT_S = 1.5  # generous bound on "at once"
SOON_S = 10.0  # generous bound on "soon": a callback, an observer's wake-up


def key(name: str) -> str:
    return f"redlock:election:{name}"


def eventually(condition, within: float = SOON_S) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_campaign_resign_and_a_higher_term_each_time(nodes, make_client, resource):
    rl = make_client()
    assert rl.leader(resource) is None  # nobody leads a new election
    with rl.election(resource, "host-a", ttl=TTL) as election:
        assert isinstance(election, Election)
        assert (election.name, election.identity, election.ttl) == (resource, "host-a", TTL)
        before = time.time()
        leadership = election.campaign()
        assert isinstance(leadership, Leadership)
        assert leadership.is_leader and not leadership.is_lost
        assert 0 < leadership.validity <= TTL
        assert (leadership.name, leadership.identity) == (resource, "host-a")
        first = leadership.term
        assert first > 0

        leader = rl.leader(resource)
        assert isinstance(leader, Leader)
        assert leader.identity == "host-a"
        assert leader.term == first
        assert leader.transitions == 1
        assert 0 < leader.ttl <= TTL
        assert before - 60 < leader.since < time.time() + 60  # the nodes' clock
        assert election.leader().term == first  # type: ignore[union-attr]

        leadership.resign()
        assert leadership.resigned
        assert not leadership.is_leader and not leadership.is_lost
        assert leadership.validity == 0.0
        assert leadership.term == first  # readable after resigning
        assert rl.leader(resource) is None
        leadership.resign()  # again: nothing happens

        with election.campaign() as second:
            assert second.term > first
            assert rl.leader(resource).transitions == 2  # type: ignore[union-attr]
        assert second.resigned and rl.leader(resource) is None


def test_with_campaign_enters_as_leader_and_resigns_on_exit(nodes, make_client, resource):
    rl = make_client()
    with rl.campaign(resource, "host-a", ttl=TTL) as leadership:
        assert leadership.is_leader
        assert rl.leader(resource).identity == "host-a"  # type: ignore[union-attr]
    assert leadership.resigned
    assert rl.leader(resource) is None
    # A block that raises resigns too, and the exception is the body's.
    with pytest.raises(ZeroDivisionError):
        with rl.campaign(resource, "host-a", ttl=5) as leadership:
            1 / 0  # noqa: B018
    assert rl.leader(resource) is None


def test_a_waiting_candidate_is_woken_by_the_resignation(nodes, make_client, resource):
    a, b = make_client(), make_client()
    ttl = 30  # a takeover well within it was woken by the resignation, not by expiry
    first = a.campaign(resource, "host-a", ttl=ttl)
    got: dict[str, object] = {}

    def campaign() -> None:
        with b.election(resource, "host-b", ttl=ttl) as election:
            got["leadership"] = election.campaign()
            got["at"] = time.monotonic()

    waiter = threading.Thread(target=campaign)
    waiter.start()
    time.sleep(0.5)
    assert waiter.is_alive(), "B leads while A does"
    resigned = time.monotonic()
    first.resign()
    waiter.join(SOON_S)
    assert not waiter.is_alive()
    second = got["leadership"]
    assert isinstance(second, Leadership)
    assert second.term > first.term
    assert got["at"] - resigned < ttl / 2  # type: ignore[operator]
    assert a.leader(resource).identity == "host-b"  # type: ignore[union-attr]
    # A bounded campaign against a leader gives up.
    with a.election(resource, "host-a", ttl=ttl) as election:
        with pytest.raises(redquorum.NotAcquired):
            election.campaign(timeout=0)
        start = time.monotonic()
        with pytest.raises(redquorum.NotAcquired):
            election.campaign(timeout=0.3)
        assert time.monotonic() - start >= 0.25
    second.resign()


def test_leaving_the_block_after_the_leadership_was_lost_raises(nodes, make_client, resource):
    rl = make_client(node_timeout=0.1)
    election = rl.election(resource, "host-a", ttl=1.5)
    stopped: list[int] = []
    election.on_stopped_leading(stopped.append)
    lost = threading.Event()
    with pytest.raises(redquorum.LockLost) as raised:
        with election.campaign() as leadership:
            leadership.on_lost(lambda _leadership: lost.set())
            hung = nodes[:3]
            for node in hung:
                node.stop()
            try:
                assert lost.wait(SOON_S), "the leadership was not found lost"
                assert leadership.is_lost and not leadership.is_leader
                assert leadership.validity == 0.0
            finally:
                for node in hung:
                    node.cont()
            # The workers answer again, so that the resignation on leaving reaches the nodes.
            assert eventually(lambda: _answers(rl, resource))
    assert "lost" in str(raised.value)
    assert eventually(lambda: stopped == [leadership.term])  # once, with the term
    election.close()


def _answers(rl: redquorum.Redlock, name: str) -> bool:
    try:
        rl.leader(name)
    except redquorum.NoQuorum:
        return False
    return True


def test_observe_sees_each_change_and_ends_when_cancelled(nodes, make_client, resource):
    rl = make_client()
    cancel = Cancel()
    seen: list[Leader | None] = []
    observer = rl.observe(resource, cancel=cancel)
    assert isinstance(observer, Observer)
    thread = threading.Thread(target=lambda: seen.extend(observer))
    thread.start()
    assert eventually(lambda: len(seen) == 1)
    assert seen[0] is None
    leadership = rl.campaign(resource, "watched", ttl=TTL)
    assert eventually(lambda: len(seen) == 2)
    assert seen[1] is not None
    assert (seen[1].identity, seen[1].term) == ("watched", leadership.term)
    leadership.resign()
    assert eventually(lambda: len(seen) == 3)
    assert seen[2] is None
    cancel.cancel()
    thread.join(PROMPT_S + 5)
    assert not thread.is_alive(), "the observer did not end when its cancel fired"
    with pytest.raises(StopIteration):
        next(observer)
    observer.close()


def test_closing_an_observer_ends_a_wait_on_another_thread(make_client, resource):
    rl = make_client()
    with rl.observe(resource, poll=0.05) as observer:
        assert next(observer) is None
        ended = threading.Event()

        def wait() -> None:
            for _ in observer:
                pass
            ended.set()

        threading.Thread(target=wait).start()
        time.sleep(0.2)
    assert ended.wait(PROMPT_S + 5)


def test_ctrl_c_interrupts_an_observer_and_a_campaign(nodes, make_client, resource):
    rl = make_client()
    observer = rl.observe(resource)
    assert next(observer) is None
    baseline = threading.active_count()
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(observer)
    timer.join()
    assert time.monotonic() - start < 0.3 + PROMPT_S
    with pytest.raises(StopIteration):  # an interrupted observer has ended
        next(observer)
    observer.close()

    holder = rl.campaign(resource, "holder", ttl=TTL)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        rl.campaign(resource, "waiter", ttl=TTL)
    timer.join()
    assert time.monotonic() - start < 0.3 + PROMPT_S
    assert eventually(lambda: threading.active_count() <= baseline)
    # Nothing of the interrupted campaign is left: the holder's token only.
    assert len({v for v in values(nodes, key(resource)) if v is not None}) == 1
    assert rl.leader(resource).identity == "holder"  # type: ignore[union-attr]
    holder.resign()


def test_a_cancelled_campaign_leaves_nothing_behind(nodes, make_client, resource):
    rl = make_client()
    holder = rl.campaign(resource, "holder", ttl=TTL)
    cancel = Cancel()
    threading.Timer(0.3, cancel.cancel).start()
    start = time.monotonic()
    with pytest.raises(redquorum.Cancelled) as raised:
        rl.campaign(resource, "waiter", ttl=TTL, cancel=cancel)
    assert time.monotonic() - start < 0.3 + PROMPT_S
    assert resource in str(raised.value)
    assert len({v for v in values(nodes, key(resource)) if v is not None}) == 1
    assert rl.leader(resource).identity == "holder"  # type: ignore[union-attr]
    # A handle that fired before the call ends it at once, bounded or not.
    with rl.election(resource, "waiter", ttl=TTL) as election:
        with pytest.raises(redquorum.Cancelled):
            election.campaign(cancel)
        with pytest.raises(redquorum.Cancelled):
            election.campaign(cancel, timeout=60)
    holder.resign()


def test_the_callbacks(nodes, make_client, resource):
    rl = make_client()
    started: list[tuple[int, str | None]] = []
    stopped: list[int] = []
    leaders: list[tuple[str | None, bool]] = []
    election = rl.election(resource, "me", ttl=TTL)

    def on_started(term: int) -> None:
        # Calling back into the library from the campaigning thread.
        leader = election.leader()
        started.append((term, None if leader is None else leader.identity))

    election.on_started_leading(on_started)
    election.on_stopped_leading(stopped.append)
    def on_new_leader(leader: Leader | None) -> None:
        on_main = threading.current_thread() is threading.main_thread()
        leaders.append((None if leader is None else leader.identity, on_main))

    election.on_new_leader(on_new_leader)
    assert eventually(lambda: len(leaders) == 1)
    leadership = election.campaign()
    assert started == [(leadership.term, "me")]  # before campaign returned
    assert stopped == []
    assert eventually(lambda: len(leaders) == 2)
    leadership.resign()
    assert stopped == [leadership.term]  # on the resigning thread, once
    leadership.close()
    assert stopped == [leadership.term]
    assert eventually(lambda: len(leaders) == 3)
    # Dropped unresigned: stopped too (the leadership keeps the callback alive).
    second = election.campaign()
    term = second.term
    assert eventually(lambda: len(leaders) == 4)
    del second
    assert eventually(lambda: stopped == [leadership.term, term])
    assert eventually(lambda: len(leaders) == 5)
    election.close()  # the new-leader callback stops
    assert leaders == [(None, False), ("me", False), (None, False), ("me", False), (None, False)]
    with rl.campaign(resource, "other", ttl=TTL):
        time.sleep(0.3)
    assert len(leaders) == 5


def test_a_new_leader_callback_may_close_its_own_election(make_client, resource):
    rl = make_client()
    election = rl.election(resource, "me", ttl=TTL)
    done = threading.Event()
    errors: list[BaseException] = []

    def once(_leader: Leader | None) -> None:
        try:
            election.on_new_leader(print)  # not from within: the library refuses
        except ValueError as exc:
            errors.append(exc)
        election.close()
        done.set()

    election.on_new_leader(once)
    assert done.wait(SOON_S)
    assert election.closed
    assert len(errors) == 1


def test_asyncio(nodes, urls, resource):
    async def main() -> None:
        async with AsyncRedlock(urls, node_timeout=1) as rl:
            assert await rl.leader(resource) is None
            seen: list[Leader | None] = []
            changes = rl.observe(resource)

            async def follow() -> None:
                async for change in changes:
                    seen.append(change)

            follower = asyncio.ensure_future(follow())
            deadline = time.monotonic() + SOON_S
            while not seen:  # the state before anyone campaigns: nobody
                assert time.monotonic() < deadline
                await asyncio.sleep(0.01)
            # Per call of on_new_leader: who leads, and whether it ran in the loop's thread.
            called: list[tuple[str | None, bool]] = []
            async with rl.election(resource, "async", ttl=TTL) as election:
                election.on_new_leader(
                    lambda leader: called.append(
                        (
                            None if leader is None else leader.identity,
                            threading.current_thread() is threading.main_thread(),
                        )
                    )
                )
                # Its first call reports what its thread first reads, which can come after a
                # campaign begun meanwhile: wait for it (nobody), as for the observer above.
                deadline = time.monotonic() + SOON_S
                while not called:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.01)
                async with rl.campaign(resource, "async", ttl=TTL) as leadership:
                    assert isinstance(leadership, AsyncLeadership)
                    assert leadership.is_leader and leadership.term > 0
                    leader = await rl.leader(resource)
                    assert leader is not None and leader.term == leadership.term
                    assert (await election.leader()).term == leadership.term  # type: ignore[union-attr]
                    deadline = time.monotonic() + SOON_S
                    while len(seen) < 2 or len(called) < 2:
                        assert time.monotonic() < deadline, (seen, called)
                        await asyncio.sleep(0.01)
                assert leadership.resigned
                deadline = time.monotonic() + SOON_S
                while len(seen) < 3 or len(called) < 3:
                    assert time.monotonic() < deadline, (seen, called)
                    await asyncio.sleep(0.01)
            assert [None if c is None else c.identity for c in seen] == [None, "async", None]
            assert called == [(None, True), ("async", True), (None, True)]
            # Cancelling the task that waits ends the observer.
            follower.cancel()
            with pytest.raises(asyncio.CancelledError):
                await follower
            with pytest.raises(StopAsyncIteration):
                await changes.__anext__()

            # A cancelled campaign task leaves nothing behind.
            holder = await rl.campaign(resource, "holder", ttl=TTL)

            async def wait() -> AsyncLeadership:
                return await rl.campaign(resource, "waiter", ttl=TTL)

            waiter = asyncio.ensure_future(wait())
            await asyncio.sleep(0.3)
            assert not waiter.done()
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert len({v for v in values(nodes, key(resource)) if v is not None}) == 1
            assert (await rl.leader(resource)).identity == "holder"  # type: ignore[union-attr]
            await holder.resign()

    asyncio.run(main())


def test_bad_arguments(make_client, resource):
    rl = make_client()
    for name, identity, error in [
        ("", "a", ValueError),
        (resource, "", ValueError),
        (7, "a", TypeError),
        (resource, b"a", TypeError),
        (resource, None, TypeError),
        (resource, "a\0b", ValueError),
        ("n" * 1025, "a", ValueError),
        (resource, "i" * 257, ValueError),
        (resource, "é" * 129, ValueError),  # 258 bytes
    ]:
        with pytest.raises(error):
            rl.election(name, identity, ttl=TTL)  # type: ignore[arg-type]
    rl.election("n" * 1024, "i" * 256, ttl=TTL).close()  # the longest allowed
    with pytest.raises(TypeError):
        rl.election(resource, "a")  # no TTL
    with pytest.raises(TypeError):
        rl.election(resource, "a", TTL)  # type: ignore[misc]  # the TTL is a keyword
    with pytest.raises(ValueError, match="too short"):
        rl.election(resource, "a", ttl=1)  # a third of it is below the node timeout
    with pytest.raises(ValueError):
        rl.leader("")
    with pytest.raises(TypeError):
        rl.leader(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rl.observe(resource, poll=0)
    with pytest.raises(TypeError):
        rl.observe(resource, cancel="now")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        rl.campaign(resource, "a", ttl=TTL, cancel=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        rl.campaign(resource, "a", ttl=TTL, timeout=-1)

    election = rl.election(resource, "a", ttl=TTL)
    for setter in (
        election.on_started_leading,
        election.on_stopped_leading,
        election.on_new_leader,
    ):
        with pytest.raises(TypeError):
            setter("not callable")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        election.campaign(timeout="soon")  # type: ignore[arg-type]

    # A setter while a campaign runs is refused, not raced.
    holder = rl.campaign(resource, "holder", ttl=TTL)
    outcome: list[BaseException] = []

    def campaign() -> None:
        try:
            election.campaign(timeout=2)
        except redquorum.NotAcquired as exc:
            outcome.append(exc)

    thread = threading.Thread(target=campaign)
    thread.start()
    refused = None
    while refused is None and thread.is_alive():  # until the campaign has begun
        try:
            election.on_stopped_leading(print)
        except RuntimeError as exc:
            refused = exc
        time.sleep(0.01)
    assert refused is not None, "a setter during the campaign was taken"
    thread.join()
    assert len(outcome) == 1
    holder.resign()

    election.close()
    with pytest.raises(ValueError, match="closed"):
        election.campaign()
    with pytest.raises(ValueError, match="closed"):
        election.on_new_leader(print)
