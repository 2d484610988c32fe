"""A candidate in a leader election: :class:`Election`, over a C ``redlock_election``, on
:class:`ElectionBase`, which it shares with :class:`~redquorum.aio.AsyncElection`.

The recipe of etcd's ``concurrency.Election`` (campaign, observe, resign) with client-go's
``leaderelection`` callbacks, built once in the Rust core: a leadership is a fenced lock on the
election's key, extended while it is held, whose fencing token is the term.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
import weakref
from ctypes import byref
from typing import Any, Callable, TypeVar

from . import _bindings as c
from . import _blocking
from . import _convert as convert
from ._cancel import Cancel, CancelHandle
from ._errors import RedlockError, Status, check
from ._ffi import lib
from ._leader import Leader, leader_of, read_leader
from ._leadership import Leadership, P
from ._managed import Managed, public_name
from ._observer import Observer, ObserverBase

__all__ = ["Election", "ElectionBase", "campaign_wait", "election_name", "poll_millis"]

V = TypeVar("V", bound=ObserverBase)

MAX_NAME_BYTES = 1024
MAX_IDENTITY_BYTES = 256


def _bounded_text(what: str, value: object, most: int) -> bytes:
    encoded = convert.c_string(what, value)
    if len(encoded) > most:
        raise ValueError(f"{what} must be at most {most} UTF-8 bytes, got {len(encoded)}")
    return encoded


def election_name(name: object) -> bytes:
    """An election's name for C: a non-empty str of at most 1024 UTF-8 bytes."""
    return _bounded_text("name", name, MAX_NAME_BYTES)


def campaign_wait(cancel: object, timeout: object) -> int | None:
    """A campaign's patience for C: None to wait until leading, else the ms to give up after;
    checks ``cancel`` on the way."""
    if cancel is not None and not isinstance(cancel, Cancel):
        raise TypeError(f"cancel must be a redquorum.Cancel, not {type(cancel).__name__}")
    return convert.millis("timeout", timeout, 0, convert.MAX_TTL_MS)


def poll_millis(poll: object) -> int:
    """An observer's poll interval for C; 0 (the library's default, 1 s) when not given."""
    return convert.millis("poll", poll, 1, convert.MAX_TTL_MS) or 0


# Elections whose new-leader callback runs on a thread of their own, closed at exit while that
# thread may still call into Python: once the interpreter finalises, a foreign thread that asks
# for the GIL is ended under the library's feet.
_watching: weakref.WeakSet[ElectionBase] = weakref.WeakSet()

# The C callbacks of elections closed by their own new-leader callback: the C election is freed
# on another thread once that call returned, so they must outlive the call; kept for good.
_retired: list[tuple[Any, ...]] = []


@atexit.register
def _close_watching() -> None:
    for election in list(_watching):
        election.close()


def _forget_watching() -> None:
    # A forked child has none of the parent's threads: there is nothing of them to stop.
    _watching.clear()


os.register_at_fork(after_in_child=_forget_watching)


class ElectionBase(Managed):
    """What a candidate is, whether its calls block (:class:`Election`) or are awaited
    (:class:`~redquorum.aio.AsyncElection`): everything that does not wait on the nodes."""

    _what = "election"

    def __init__(self, client: Managed, name: str, identity: str, ttl_ms: int) -> None:
        """Internal: use :meth:`Redlock.election`."""
        super().__init__()
        self._pid = os.getpid()
        self._client = client
        encoded_name = election_name(name)
        encoded_identity = _bounded_text("identity", identity, MAX_IDENTITY_BYTES)
        self._name = name
        self._encoded_name = encoded_name
        self._identity = identity
        self._ttl_ms = ttl_ms
        # The C callbacks registered, kept alive while C may call them: started and new-leader
        # as long as the election (or until replaced); stopped-leading also by each leadership
        # won while it was registered (handed to it).
        self._started: Any = None
        self._stopped: Any = None
        self._new_leader: Any = None
        # The thread that runs the new-leader callback, as it last told.
        self._watcher = [0]
        # A setter needs the C election to itself: no campaign may run meanwhile.
        self._configuring = False
        out = c.redlock_election_p()
        err = c.redlock_error_p()
        pointer = client._borrow()
        try:
            status = lib.redlock_client_election(
                pointer, encoded_name, encoded_identity, ttl_ms, byref(out), byref(err)
            )
        finally:
            client._give_back()
        check(status, err)
        if not out:
            raise RedlockError("libredlock returned OK without an election", Status.PANIC)
        self._ptr = out

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        # In a forked child the election's thread is not there to be stopped: leave it be.
        if os.getpid() == self._pid:
            lib.redlock_election_free(pointer)

    def _borrow(self) -> Any:
        pointer = super()._borrow()
        if self._configuring:
            self._give_back()
            raise RuntimeError("a callback of this election is being set on another thread")
        return pointer

    @property
    def name(self) -> str:
        """The election's name."""
        return self._name

    @property
    def identity(self) -> str:
        """This candidate's identity."""
        return self._identity

    @property
    def ttl(self) -> float:
        """The TTL of its leaderships, in seconds."""
        return self._ttl_ms / 1000

    def _campaign_now(
        self, cancel: CancelHandle | None, wait_ms: int | None, kind: type[P]
    ) -> P:
        """One campaign, blocking: a leadership of type ``kind``."""
        out = c.redlock_leadership_p()
        err = c.redlock_error_p()
        handle = None if cancel is None else cancel.pointer
        pointer = self._borrow()
        # What the leadership's end may call, taken with the handle: a setter cannot run now.
        stopped = self._stopped
        try:
            if wait_ms is None:
                status = lib.redlock_election_campaign(pointer, handle, byref(out), byref(err))
            else:
                status = lib.redlock_election_campaign_for(
                    pointer, wait_ms, handle, byref(out), byref(err)
                )
        finally:
            self._give_back()
        check(status, err)
        if not out:
            raise RedlockError("libredlock returned OK without a leadership", Status.PANIC)
        return kind(out, keep=() if stopped is None else (stopped,))

    def _leader_now(self) -> Leader | None:
        return leader_of(self._client, self._encoded_name)

    def _observer(self, kind: type[V], cancel: Cancel | None, poll: object) -> V:
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redquorum.Cancel, not {type(cancel).__name__}")
        return kind(self._client, self._encoded_name, cancel, poll_millis(poll))

    def _set_started_leading(self, callback: Callable[[int], object]) -> None:
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")

        def thunk(_user: int | None, term: int) -> None:
            callback(int(term))

        c_callback = c.redlock_term_callback(thunk)
        self._configure(lib.redlock_election_on_started_leading, c_callback)
        self._started = c_callback

    def _set_stopped_leading(self, callback: Callable[[int], object]) -> None:
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")

        def thunk(_user: int | None, term: int) -> None:
            callback(int(term))

        c_callback = c.redlock_term_callback(thunk)
        self._configure(lib.redlock_election_on_stopped_leading, c_callback)
        self._stopped = c_callback

    def _set_new_leader(self, callback: Callable[[Leader | None], object]) -> None:
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")

        watcher = self._watcher

        def thunk(_user: int | None, leader: Any) -> None:
            watcher[0] = threading.get_ident()
            callback(read_leader(leader))

        c_callback = c.redlock_new_leader_callback(thunk)
        self._configure(lib.redlock_election_on_new_leader, c_callback)
        self._new_leader = c_callback
        _watching.add(self)

    def _configure(self, setter: Callable[..., int], c_callback: Any) -> None:
        """Registers a C callback through ``setter``, with the C election to itself."""
        convert.check_process(self._pid, "election")
        with self._mutex:
            if self._closed:
                raise ValueError("this election is closed")
            if self._borrowed or self._configuring:
                raise RuntimeError(
                    "set an election's callbacks before campaigning: a campaign of it is running"
                )
            self._configuring = True
            self._borrowed += 1
            pointer = self._ptr
        err = c.redlock_error_p()
        try:
            status = setter(pointer, c_callback, None, byref(err))
        finally:
            self._configuring = False
            self._give_back()
        check(status, err)

    def close(self) -> None:
        """Close the election: its new-leader callback stops (a call in progress finishes
        first), and the C election is freed once no campaign uses it. Leaderships won through
        it stay valid. Calling it again is a no-op."""
        watcher = getattr(self, "_watcher", [0])
        if watcher[0] == threading.get_ident():
            _retired.append((self._started, self._stopped, self._new_leader))
        super().close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return (
            f"<{public_name(type(self))} {state} name={self._name!r} identity={self._identity!r} "
            f"ttl={convert.seconds_text(self._ttl_ms)}>"
        )


class Election(ElectionBase):
    """One candidate, named ``identity``, in the election ``name``, from
    :meth:`Redlock.election`; its leaderships last ``ttl`` and are extended while held.

    ::

        election = rl.election("scheduler", "host-a", ttl=10)
        election.on_new_leader(lambda leader: print("now leading:", leader))
        with election.campaign() as leadership:   # blocks until this process leads
            run_scheduler(fence=leadership.term)  # stop when leadership.is_leader turns false

    **At most one leader has validity left at any instant**, and each term is greater than
    every earlier leader's (the fencing token of the lock underneath, under the same
    assumptions): pass :attr:`Leadership.term` with every write to a store that refuses lower
    terms. Any number of threads may campaign with one election at once. Close it with
    :meth:`close` (or a ``with`` block): that stops its new-leader callback; leaderships won
    through it stay valid.
    """

    def campaign(
        self,
        cancel: Cancel | None = None,
        *,
        timeout: convert.Seconds | None = None,
    ) -> Leadership:
        """Block until this candidate leads and return the :class:`Leadership` (a context
        manager that resigns on exit), woken by the resignations and takeovers the nodes
        announce. The started-leading callback has run when it returns.

        Without a ``timeout`` it keeps trying, also while too few nodes answer, until it leads
        or ``cancel`` fires (:class:`Cancelled`, with nothing of it left on the nodes). With
        one (seconds; 0: a single attempt) it gives up then:
        :class:`NotAcquired` while another candidate leads, :class:`NoQuorum` when too few
        nodes answered. In the main thread Ctrl-C interrupts it at once, as it does
        :meth:`Redlock.acquire`. ``ValueError`` for a closed election.
        """
        wait_ms = campaign_wait(cancel, timeout)
        convert.check_process(self._pid, "election")
        return _blocking.run(
            lambda own: self._campaign_now(own, wait_ms, Leadership),
            cancellable=True,
            user_cancel=cancel,
            dispose=Leadership._discard,
        )

    def leader(self) -> Leader | None:
        """Who leads this election now (see :meth:`Redlock.leader`)."""
        return self._leader_now()

    def observe(
        self,
        *,
        cancel: Cancel | None = None,
        poll: convert.Seconds | None = None,
    ) -> Observer:
        """This election's leader changes (see :meth:`Redlock.observe`)."""
        return self._observer(Observer, cancel, poll)

    def on_started_leading(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(term)`` each time this candidate becomes leader, on the campaigning
        thread, before :meth:`campaign` returns. Replaces the callback set before; set it up
        before campaigning (``RuntimeError`` while a campaign runs).

        It may call into the library (:meth:`leader`, say) but not close this election. An
        exception it raises goes to :func:`sys.unraisablehook`.
        """
        self._set_started_leading(callback)

    def on_stopped_leading(self, callback: Callable[[int], object]) -> None:
        """Call ``callback(term)`` once when each leadership won from now on ends: on the thread
        that resigns, closes or drops it, or, when it is found lost, on the client's extender
        thread (keep it short). Replaces the callback set before for leaderships won from now
        on; set it up before campaigning (``RuntimeError`` while a campaign runs).

        An exception it raises goes to :func:`sys.unraisablehook`.
        """
        self._set_stopped_leading(callback)

    def on_new_leader(self, callback: Callable[[Leader | None], object]) -> None:
        """Call ``callback(leader)`` each time the election's leader changes (``None``: nobody
        leads), on a thread of the election's own, until the election is closed: first with the
        state that thread first reads, after this returned (a leader that campaigned meanwhile
        can be that first state: wait for the first call before campaigning to know the state
        before). Replaces the callback set before (waiting for a call of it in progress); set it
        up before campaigning (``RuntimeError`` while a campaign runs).

        Keep it short: the next change is reported once it returned. It may call into the
        library, and close this election, but not set its callbacks (``ValueError``). An
        exception it raises goes to :func:`sys.unraisablehook`.
        """
        self._set_new_leader(callback)
