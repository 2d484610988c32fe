"""A won campaign: :class:`Leadership`, over a C ``redlock_leadership``, on
:class:`LeadershipBase`, which it shares with :class:`~redquorum.aio.AsyncLeadership`."""

from __future__ import annotations

from typing import Any, Callable, TypeVar

from ._convert import required_text
from ._ffi import lib
from ._held import Calls, Held
from ._managed import public_name

__all__ = ["Leadership", "LeadershipBase", "P"]

P = TypeVar("P", bound="LeadershipBase")


class LeadershipBase(Held):
    """What a leadership is, whether its calls block (:class:`Leadership`) or are awaited
    (:class:`~redquorum.aio.AsyncLeadership`): everything that does not wait on the nodes."""

    _what = "leadership"
    _calls = Calls(
        lib,
        is_held="redlock_leadership_is_leader",
        is_lost="redlock_leadership_is_lost",
        validity_ms="redlock_leadership_validity_ms",
        on_lost="redlock_leadership_on_lost",
        end="redlock_leadership_resign",
        free="redlock_leadership_free",
    )

    def __init__(self, pointer: Any, keep: tuple[object, ...] = ()) -> None:
        """Internal: wraps a C leadership handle. ``keep``: the C callbacks it may still call
        (the election's stopped-leading callback), kept alive as long as it is."""
        super().__init__(pointer)
        self._keep = keep
        self._term = int(lib.redlock_leadership_term(pointer))
        self._name = required_text(lib.redlock_leadership_name(pointer))
        self._identity = required_text(lib.redlock_leadership_identity(pointer))

    @property
    def term(self) -> int:
        """The term: greater than every earlier leader's in the election, never handed out
        again (the fencing token of the lock underneath). Stays readable after resigning."""
        return self._term

    @property
    def name(self) -> str:
        """The election's name."""
        return self._name

    @property
    def identity(self) -> str:
        """This leader's identity."""
        return self._identity

    @property
    def resigned(self) -> bool:
        """True once :meth:`resign` succeeded or found the leadership already lost (or it was
        closed)."""
        return self._is_ended()

    @property
    def is_leader(self) -> bool:
        """True while this process leads: not resigned, not lost, validity left. Cheap: poll it
        during long work."""
        return self._is_held()

    @property
    def is_lost(self) -> bool:
        """True once the leadership was found lost (an extension found it no longer ours on a
        quorum, or it ran out of validity); a resigned leadership is not lost."""
        return self._is_lost()

    def _block(self) -> str:
        return f"the leadership of election {self._name!r}"

    def __repr__(self) -> str:
        return (
            f"<{public_name(type(self))} name={self._name!r} identity={self._identity!r} "
            f"term={self._term} resigned={self.resigned}>"
        )


class Leadership(LeadershipBase):
    """This process's leadership of an election, from :meth:`Election.campaign` or
    :meth:`Redlock.campaign`: a fenced lock on the election's key, extended on the client's
    extender thread for as long as it is held.

    Use it as a context manager (resigned on exit, also when the body raises; leaving the block
    after the leadership was lost raises :class:`LockLost`, as a lock's block does) or call
    :meth:`resign`. Pass :attr:`term` with every write to a store that refuses writes with a
    lower term than it has seen, and stop when :attr:`is_leader` turns false or
    :meth:`on_lost` fires. If it is garbage-collected or closed while still held, it is
    resigned then, without waiting for the nodes.
    """

    def on_lost(self, callback: Callable[[Leadership], object]) -> None:
        """Call ``callback(leadership)`` once if the leadership is found lost; at once if it
        already was.

        As :meth:`Lock.on_lost`: it runs on the client's extender thread, which serves every
        auto-extended lock and leadership of the client, so keep it short (set an event, cancel
        a task); it may call :meth:`resign`. An exception it raises goes to
        :func:`sys.unraisablehook`. Resigning does not call it. Several callbacks may be
        registered; each runs at most once.
        """
        self._when_lost(callback)

    def resign(self) -> None:
        """End the leadership on every node at once: waiting candidates are woken, and the
        election's stopped-leading callback runs (on this thread) if it has not yet.
        Idempotent.

        Raises :class:`LockLost` if it was no longer ours (it expired or was found lost: work
        done under its term may have overlapped the next leader's), :class:`NoQuorum` if too
        few nodes answered (the keys expire with the TTL). Ctrl-C interrupts the wait at once;
        the resignation itself still completes in the background.
        """
        self._end()
