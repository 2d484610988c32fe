"""The client: :class:`Redlock`, over a C ``redlock_client``, on :class:`ClientBase`, which it
shares with :class:`~redquorum.aio.AsyncRedlock`."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from ctypes import byref, c_char_p
from types import TracebackType
from typing import Any, NoReturn, TypeVar

from . import _bindings as c
from . import _blocking, _caller, _inspect
from . import _convert as convert
from ._cancel import Cancel, CancelHandle
from ._election import Election, ElectionBase, election_name, poll_millis
from ._errors import RedlockError, Status, check
from ._events import EventListener, would_log
from ._ffi import lib
from ._inspect import ForcedRelease, Inspection
from ._leader import Leader, leader_of
from ._leadership import Leadership
from ._lock import L, Lock
from ._managed import Managed, public_name
from ._node import NodeStatus, node_statuses
from ._observer import Observer, ObserverBase
from ._options import Options
from ._request import Request
from ._shorthands import Shorthands
from ._stats import Stats, read_stats

__all__ = ["ClientBase", "ClientCore", "Redlock", "check_request"]

MAX_NODE_URL_BYTES = 4096

T = TypeVar("T")
E = TypeVar("E", bound=ElectionBase)
V = TypeVar("V", bound=ObserverBase)
C = TypeVar("C", bound="ClientBase[Any]")


def check_request(request: object) -> None:
    if not isinstance(request, Request):
        raise TypeError(f"request must be a redquorum.Request, not {type(request).__name__}")


class ClientCore(Managed):
    """The C client and its event listener, shared by every :class:`ClientBase` over it."""

    _what = "Redlock client"

    def __init__(self, urls: list[bytes], options: Options, log_events: bool | None) -> None:
        super().__init__()
        self._pid = os.getpid()
        self._listener: EventListener | None = None
        self.node_count = len(urls)
        with options:
            array = (c_char_p * len(urls))(*urls)
            out = c.redlock_client_p()
            err = c.redlock_error_p()
            status = lib.redlock_client_new(
                array, len(urls), options._borrow(), byref(out), byref(err)
            )
            options._give_back()
        check(status, err)
        if not out:
            raise RedlockError("redlock_client_new returned OK without a client", Status.PANIC)
        self._ptr = out
        if log_events or (log_events is None and would_log()):
            self._listener = EventListener(out)

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_client_free(pointer)

    def _borrow(self) -> Any:
        pointer = super()._borrow()
        try:
            convert.check_process(self._pid, "Redlock client")
        except ValueError:
            self._give_back()
            raise
        return pointer

    def close(self) -> None:
        listener = getattr(self, "_listener", None)
        if listener is not None:
            listener.close()
        super().close()


class ClientBase(Shorthands[T]):
    """What a client is, whether its calls block (:class:`Redlock`) or are awaited
    (:class:`~redquorum.aio.AsyncRedlock`): its options, everything that does not wait on the
    nodes, and the calls that do, as blocking functions each kind of client runs its way."""

    _core: ClientCore

    def __init__(
        self,
        nodes: Iterable[str],
        *,
        retry_count: int | None = None,
        retry_delay: convert.Seconds | None = None,
        retry_jitter: convert.Seconds | None = None,
        drift_factor: float | None = None,
        node_timeout: convert.Seconds | None = None,
        max_extensions: int | None = None,
        restart_grace: convert.Seconds | None = None,
        clock_guard: bool | None = None,
        clock_jump_threshold: convert.Seconds | None = None,
        clock_quarantine: convert.Seconds | None = None,
        strict_servers: bool | None = None,
        min_replicas: int | None = None,
        tls_ca_file: str | os.PathLike[str] | None = None,
        tls_client_cert_file: str | os.PathLike[str] | None = None,
        tls_client_key_file: str | os.PathLike[str] | None = None,
        log_events: bool | None = None,
    ) -> None:
        if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Iterable):
            raise TypeError(f"nodes must be a list of Redis URLs, not {type(nodes).__name__}")
        urls: list[bytes] = [convert.c_string("node URL", url) for url in nodes]
        if not urls:
            raise ValueError("nodes must name at least one Redis node")
        options = Options(
            retry_count=retry_count,
            retry_delay=retry_delay,
            retry_jitter=retry_jitter,
            drift_factor=drift_factor,
            node_timeout=node_timeout,
            max_extensions=max_extensions,
            restart_grace=restart_grace,
            clock_guard=clock_guard,
            clock_jump_threshold=clock_jump_threshold,
            clock_quarantine=clock_quarantine,
            strict_servers=strict_servers,
            min_replicas=min_replicas,
            tls_ca_file=tls_ca_file,
            tls_client_cert_file=tls_client_cert_file,
            tls_client_key_file=tls_client_key_file,
        )
        self._core = ClientCore(urls, options, log_events)

    @classmethod
    def _over(cls: type[C], core: ClientCore) -> C:
        """A client of this class over ``core``, shared (closing either closes both)."""
        client = cls.__new__(cls)
        client._core = core
        return client

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (on this client or another over the same C
        client)."""
        return self._core.closed

    def close(self) -> None:
        """Close the client; calling it again is a no-op.

        Locks acquired through it stay usable (release, extend); the connections and worker
        threads go away once the client is closed and those locks are dropped too. A call in
        flight on another thread finishes first. Its events stop being logged at once.
        """
        self._core.close()

    def __enter__(self: C) -> C:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def node_status(self) -> list[NodeStatus]:
        """What the client's worker last saw of each node, in the order of ``nodes`` (it reads
        the worker's state; it never waits for the nodes)."""
        client = self._core._borrow()
        try:
            return node_statuses(client)
        finally:
            self._core._give_back()

    def stats(self) -> Stats:
        """A snapshot of the client's counters (see :class:`Stats`), with their Prometheus
        text: cheap (atomic reads), it never waits for the nodes. ``ValueError`` once closed."""
        client = self._core._borrow()
        try:
            return read_stats(client)
        finally:
            self._core._give_back()

    def _acquire_now(
        self, request: Request, cancel: CancelHandle | None, caller: bytes | None, kind: type[L]
    ) -> L:
        client = self._core._borrow()
        try:
            return request._acquire(client, cancel, caller, kind)
        finally:
            self._core._give_back()

    def _inspect_now(self, resource: str) -> Inspection:
        name = convert.c_string("resource", resource)
        handle = self._core._borrow()
        try:
            return _inspect.inspect(handle, name)
        finally:
            self._core._give_back()

    def _force_release_now(self, resource: str, token: str | None) -> ForcedRelease:
        name = convert.c_string("resource", resource)
        only = None if token is None else convert.c_string("token", token)
        handle = self._core._borrow()
        try:
            return _inspect.force_release(handle, name, only)
        finally:
            self._core._give_back()

    def _election(self, kind: type[E], name: str, identity: str, ttl: convert.Seconds) -> E:
        millis = convert.ttl_millis(ttl)
        convert.check_process(self._core._pid, "Redlock client")
        return kind(self._core, name, identity, millis)

    def _leader_now(self, name: str) -> Leader | None:
        return leader_of(self._core, election_name(name))

    def _observer(
        self, kind: type[V], name: str, cancel: Cancel | None, poll: convert.Seconds | None
    ) -> V:
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redquorum.Cancel, not {type(cancel).__name__}")
        return kind(self._core, election_name(name), cancel, poll_millis(poll))

    # A copy or a pickle would be a second owner of the C client.
    def __copy__(self) -> NoReturn:
        raise TypeError("a Redlock client owns a C handle and cannot be copied")

    def __deepcopy__(self, memo: dict[int, object]) -> NoReturn:
        raise TypeError("a Redlock client owns a C handle and cannot be copied")

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Redlock client owns a C handle and cannot be pickled")

    def __repr__(self) -> str:
        # URLs may carry passwords, so they stay out of the repr.
        state = "closed" if self.closed else "open"
        return f"<{public_name(type(self))} {state} nodes={self._core.node_count}>"


class Redlock(ClientBase[Lock]):
    """A Redlock client over N independent Redis masters; thread-safe.

    ``nodes`` are Redis URLs (``redis://[user:password@]host:port``, ``rediss://`` for TLS; a
    Sentinel-managed master ``redis+sentinel://host:port/NAME`` or a whole Redis Cluster
    ``redis+cluster://host:port?seed=host:port`` is one node; each at most 4096 bytes of UTF-8;
    a ``ValueError`` about them never shows a password, whatever it holds);
    options left as ``None`` take the library's defaults (see :func:`default_options`); every
    duration is in seconds (an int, a float or a :class:`datetime.timedelta`).
    ``max_extensions=None`` means no cap on :meth:`Lock.extend` calls. ``restart_grace`` keeps
    a node whose Redis process is younger than that out of acquire quorums (off by default): set
    it to at least your largest TTL when nodes run without persistence, since a restarted node
    has forgotten its locks. ``tls_ca_file`` is a PEM file of CA certificates to trust for
    ``rediss://`` nodes instead of the system's roots; ``tls_client_cert_file`` and
    ``tls_client_key_file`` (together) present a client certificate to nodes that require one.
    The clock guard is on unless ``clock_guard=False``: a node whose clock jumps forward by more
    than ``clock_jump_threshold`` (default 0.05) is kept out of acquire quorums for
    ``clock_quarantine`` (default 60; make it at least your largest TTL), and a suspension
    of this host marks the locks held across it lost. ``strict_servers=True`` refuses the nodes
    the server probe only warns about (a master with replicas, an evicting
    ``maxmemory-policy``. ``min_replicas=k`` counts a node's vote for an acquisition or an
    extension only once ``WAIT`` confirms that k of its replicas have the write (over a second
    connection per node, so releases and inspections never wait behind a lagging replica, but
    for the release of an acquisition still on its way there); a
    node with fewer replicas fails its vote saying so (on a Redis Cluster node every master
    needs them, and each vote waits for its own master's ``WAIT``). What it protects against:
    the repository's docs/topologies.md.

    The client's events (acquired, released, lost, a node disconnected, ...) become records of
    the ``redquorum`` logger (see bindings/python/README.md, "Logging and metrics"): with
    ``log_events=None`` (the default) when, at creation, a record at ``INFO`` would reach a
    handler (the level allows it and a handler other than a :class:`logging.NullHandler` is
    configured), always with ``True``, never with ``False``. Without it, events cost nothing;
    :meth:`stats` counts in any case. Close the client with :meth:`close` or use it as a
    context manager; locks still alive keep working after the client is closed. A client
    cannot be used in a child process after ``fork()`` (create one there instead).
    """

    def acquire(self, request: Request) -> Lock:
        """Acquire the lock ``request`` describes (see :class:`Request`): every kind, patience,
        auto-extension and cancel handle, in any combination. One C call; the request may be
        acquired again, from any thread.

        Raises :class:`NotAcquired` if another owner held it through the last attempt or the
        wait, :class:`NoQuorum` if too few nodes answered, :class:`Cancelled` if the request's
        :class:`Cancel` fired first, ``ValueError`` for a TTL the client cannot use (e.g. too
        short to auto-extend), a read-write lock the calling thread would wait for itself (it
        holds the resource's write lock, or asks for the write lock holding a read lock), or a
        closed client or request.

        In the main thread, Ctrl-C (``KeyboardInterrupt``) and any signal handler that raises
        interrupt the call at once: the acquisition is cancelled, and a lock it obtained in the
        same instant is released, before the exception propagates.
        """
        check_request(request)
        # Named here, on the calling thread: the call itself may run on a helper thread.
        caller = _caller.thread()
        return _blocking.run(
            lambda cancel: self._acquire_now(request, cancel, caller, Lock),
            cancellable=True,
            user_cancel=request.cancel,
            dispose=Lock._discard,
        )

    def _acquire_new(self, request: Request) -> Lock:
        with request:
            return self.acquire(request)

    def inspect(self, resource: str) -> Inspection:
        """Read ``resource`` on every node: what its key holds (a token, reentrant owners,
        another type, nothing), its remaining TTL and the fence counter, plus whether a quorum
        holds it and by which token (see :class:`Inspection`).

        Read-only. Waits for every node up to ``node_timeout``; a node that is down, times
        out or answers with an error (a ``NOPERM`` of a tight ACL) is reported in its entry
        (:attr:`NodeInspection.error`) instead of failing the call. Each node is read at a
        slightly different moment. ``ValueError``/``TypeError`` for an empty or non-str
        resource or a closed client.
        """
        return self._inspect_now(resource)

    def force_release(self, resource: str, token: str | None = None) -> ForcedRelease:
        """**An operator's tool**: delete the lock on ``resource`` on every node, only where
        its key still holds ``token`` (a lock's token or a reentrant owner, as
        :meth:`inspect` shows it), or whatever it holds when ``token`` is ``None``.

        Each deletion is announced, so waiters try at once; the fence counter is never
        touched. The danger: a live holder is not told. Its lock is gone while it may still be
        working, the next acquirer overlaps it, and its auto-extension reports it lost only at
        its next extension. Use it for a lock whose holder is known dead, with the token read
        by :meth:`inspect`, so that a holder that took the lock after you looked is left
        alone.

        Waits for every node up to ``node_timeout``; node failures are reported per node.
        Check :attr:`ForcedRelease.on_quorum`. ``ValueError``/``TypeError`` for an empty or
        non-str resource or token, or a closed client.
        """
        return self._force_release_now(resource, token)

    def election(self, name: str, identity: str, *, ttl: convert.Seconds) -> Election:
        """A candidate named ``identity`` in the leader election ``name`` (see
        :class:`Election`), whose leaderships last ``ttl`` seconds and are extended while held.
        Nothing is sent yet: :meth:`Election.campaign` runs.

        ``name`` is a non-empty str of at most 1024 UTF-8 bytes, ``identity`` (what observers see
        of this candidate: a host or pod name) of at most 256. The TTL must leave room for an
        extension: a third of it must exceed ``node_timeout``. ``ValueError``/``TypeError``
        otherwise, or for a closed client.
        """
        return self._election(Election, name, identity, ttl)

    def campaign(
        self,
        name: str,
        identity: str,
        *,
        ttl: convert.Seconds,
        cancel: Cancel | None = None,
        timeout: convert.Seconds | None = None,
    ) -> Leadership:
        """Lead the election ``name`` as ``identity``: :meth:`election` and
        :meth:`Election.campaign` in one call, for a ``with`` block::

            with rl.campaign("scheduler", "host-a", ttl=10) as leadership:
                ...  # leading, in term leadership.term; resigned on exit

        Leaving the block after the leadership was lost raises :class:`LockLost`, as leaving a
        lost lock's block does. ``cancel`` and ``timeout`` as for :meth:`Election.campaign`.
        """
        with self.election(name, identity, ttl=ttl) as election:
            return election.campaign(cancel, timeout=timeout)

    def leader(self, name: str) -> Leader | None:
        """Who leads the election ``name`` now, from any process, candidate or not: a
        :class:`Leader` whose campaign returned its leadership, or ``None`` only when no
        leadership can be held on a quorum of nodes.

        Waits for every node up to ``node_timeout``. Raises :class:`NoQuorum` when the nodes
        cannot tell (too few answered, a node of a leader that holds a bare quorum hangs or
        restarted within ``restart_grace``, a new leader is being confirmed);
        ``ValueError``/``TypeError`` for a bad name or a closed client.
        """
        return self._leader_now(name)

    def observe(
        self,
        name: str,
        *,
        cancel: Cancel | None = None,
        poll: convert.Seconds | None = None,
    ) -> Observer:
        """Follow the election ``name``: an iterator of its leader changes (see
        :class:`Observer`), each a :class:`Leader` or ``None`` for nobody::

            for leader in rl.observe("scheduler", cancel=stop):
                print("nobody leads" if leader is None else f"{leader.identity} leads")

        Between announcements the nodes are read every ``poll`` seconds (default 1). Iteration
        ends when ``cancel`` fires or the observer is closed.
        """
        return self._observer(Observer, name, cancel, poll)
