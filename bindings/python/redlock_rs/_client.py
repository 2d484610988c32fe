"""The Pythonic layer: :class:`Redlock` (a client) and :class:`Lock` (one acquisition)."""

from __future__ import annotations

import math
import os
import secrets
import threading
import weakref
from collections.abc import Iterable
from ctypes import byref, c_char_p, c_int64, c_uint32, c_uint64
from dataclasses import dataclass
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Union

from . import _ffi
from ._errors import LockLost, RedlockError, Status, check
from ._ffi import lib

if TYPE_CHECKING:
    from ._inspect import ForcedRelease, Inspection
    from ._request import AutoExtend, Cancel, Request, _CancelHandle

__all__ = ["Redlock", "Lock", "NodeStatus", "Seconds", "default_options"]

Seconds = Union[int, float, timedelta]
"""A duration in seconds (``10``, ``2.5``) or a :class:`datetime.timedelta`."""


def _int(name: str, value: object, minimum: int, maximum: int) -> int:
    # bool is an int subclass, but True as a TTL or retry count is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be in {minimum}..={maximum}, got {value}")
    return value


def _c_string(name: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError(f"{name} must not be empty")
    if "\0" in value:
        # No echo of the value: a node URL may carry a password.
        raise ValueError(f"{name} must not contain NUL characters")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not encodable as UTF-8: {exc}") from exc


def _path(name: str, value: object) -> bytes:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), not {type(value).__name__}")
    path = os.fspath(value)
    if isinstance(path, bytes):
        raise TypeError(f"{name} must be a str path, not bytes")
    return _c_string(name, path)


def _set(setter: Callable[..., int], handle: Any, *args: Any) -> None:
    """Call one ``redlock_*_set_*`` function of the C options builders; raise as ``check``."""
    err = _ffi.ErrorPtr()
    check(setter(handle, *args, byref(err)), err)


def _ttl(ttl_ms: object) -> int:
    return _int("ttl_ms", ttl_ms, 1, _ffi.MAX_TTL_MS)


def _millis(
    name: str, seconds: object, ms_name: str, ms: object, minimum: int, maximum: int
) -> int | None:
    """One duration given as ``name`` (seconds or a timedelta) or ``ms_name`` (an int of ms).

    ``None`` when neither is given; ``ValueError`` when both are, so that a call never has two
    different answers to "how long".
    """
    if seconds is not None and ms is not None:
        raise ValueError(f"pass {name} (seconds) or {ms_name} (milliseconds), not both")
    if ms is not None:
        return _int(ms_name, ms, minimum, maximum)
    if seconds is None:
        return None
    if isinstance(seconds, timedelta):
        # Exact integer arithmetic: a timedelta is days, seconds and microseconds.
        micros = (seconds.days * 86_400 + seconds.seconds) * 1_000_000 + seconds.microseconds
        millis = (micros + 500) // 1000
    elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(
            f"{name} must be seconds (int or float) or a datetime.timedelta, "
            f"not {type(seconds).__name__}"
        )
    elif isinstance(seconds, int):
        millis = seconds * 1000
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"{name} must be a finite number of seconds, got {seconds!r}")
        millis = round(seconds * 1000)
    if not minimum <= millis <= maximum:
        raise ValueError(
            f"{name} must be in {minimum / 1000:g}..={maximum / 1000:g} seconds "
            f"(whole milliseconds), got {seconds!r}"
        )
    return millis


def _ttl_of(ttl_ms: object, ttl: object) -> int:
    millis = _millis("ttl", ttl, "ttl_ms", ttl_ms, 1, _ffi.MAX_TTL_MS)
    if millis is None:
        raise TypeError(
            "missing the lock's time to live: pass ttl (seconds or a datetime.timedelta) "
            "or ttl_ms (milliseconds)"
        )
    return millis


def _check_process(created_in: int, what: str) -> None:
    # The library's worker threads do not survive fork(); without this check a child's calls
    # would wait out node_timeout_ms and report NoQuorum, which hides the real cause.
    if os.getpid() != created_in:
        raise ValueError(
            f"this {what} was created in process {created_in} and cannot be used after fork(): "
            "create a new Redlock in the child process"
        )


def _decode(raw: bytes | None) -> str:
    if raw is None:
        raise RedlockError("libredlock returned NULL for a live handle", Status.PANIC)
    return raw.decode("utf-8", "replace")


def default_options() -> dict[str, int | float | bool | None]:
    """The library's default options, as the keyword arguments of :class:`Redlock` take them."""
    # The getters read NULL options as the defaults.
    return {
        "retry_count": lib.redlock_options_retry_count(None),
        "retry_delay_ms": lib.redlock_options_retry_delay_ms(None),
        "retry_jitter_ms": lib.redlock_options_retry_jitter_ms(None),
        "drift_factor": lib.redlock_options_drift_factor(None),
        "node_timeout_ms": lib.redlock_options_node_timeout_ms(None),
        "max_extensions": lib.redlock_options_max_extensions(None) or None,
        "restart_grace_ms": lib.redlock_options_restart_grace_ms(None) or None,
        "clock_guard": bool(lib.redlock_options_clock_guard(None)),
        "clock_jump_threshold_ms": lib.redlock_options_clock_jump_threshold_ms(None),
        "clock_quarantine_ms": lib.redlock_options_clock_quarantine_ms(None),
        "strict_servers": bool(lib.redlock_options_strict_servers(None)),
    }


@dataclass(frozen=True)
class NodeStatus:
    """What the client's worker last saw of one node (see :meth:`Redlock.node_status`)."""

    address: str
    """``host:port`` of the node, never with credentials."""
    connected: bool
    connects: int
    """Connections established so far."""
    restarts: int
    """Restarts seen: reconnects that found a different server ``run_id``."""
    run_id: str | None
    """The server's ``run_id``; ``None`` before the first connect or when ``INFO`` is denied."""
    uptime_ms: int | None
    """The server's uptime (whole seconds when reported, plus the time since)."""
    grace_remaining_ms: int
    """With ``restart_grace_ms``: how much longer the node does not count toward acquires."""
    server_version: str | None = None
    """The server's ``redis_version`` at the last connect; ``None`` when unknown."""
    persistence: str | None = None
    """The node's persistence as it reported it (e.g. ``"no AOF, no RDB snapshots"``);
    ``None`` when unknown. Without persistence a restart forgets locks: consider
    ``restart_grace_ms``."""
    warnings: tuple[str, ...] = ()
    """What the server probe and the clock guard found worth attention (replicas of a master,
    an evicting ``maxmemory-policy``, a clock that stepped back, a command the ACL denies)."""
    clock_offset_ms: int | None = None
    """The node's clock minus ours at the last ``TIME`` sample; ``None`` when the guard is off,
    ``TIME`` is denied or no acquire has sampled it yet."""
    quarantine_remaining_ms: int = 0
    """How much longer the node is out of acquire quorums because its clock jumped forward."""
    quarantine_reason: str | None = None
    """Why the node is in clock quarantine, while it is."""


def _optional(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


def _guard_fields(raw: Any) -> dict[str, Any]:
    """The clock guard's and server probe's fields of a C node status."""
    offset = c_int64()
    known = lib.redlock_node_status_clock_offset_ms(raw, byref(offset))
    return {
        "server_version": _optional(lib.redlock_node_status_server_version(raw)),
        "persistence": _optional(lib.redlock_node_status_persistence(raw)),
        "warnings": tuple(
            _optional(lib.redlock_node_status_warning(raw, i)) or ""
            for i in range(lib.redlock_node_status_warning_count(raw))
        ),
        "clock_offset_ms": int(offset.value) if known else None,
        "quarantine_remaining_ms": int(lib.redlock_node_status_quarantine_remaining_ms(raw)),
        "quarantine_reason": _optional(lib.redlock_node_status_quarantine_reason(raw)),
    }


class Lock:
    """One acquisition of a resource, returned by :meth:`Redlock.lock` and :meth:`Redlock.try_lock`.

    Use it as a context manager (released on exit, also when the body raises) or call
    :meth:`release`. A Lock may be shared between threads; its calls are serialised. If it is
    garbage-collected while still held it is released then, but do not rely on that: the
    resource stays locked until it is, or until the TTL runs out.
    """

    def __init__(self, handle: Any, client: Redlock) -> None:
        """Internal: wraps a C lock handle. Obtain locks from :class:`Redlock` instead."""
        self._handle = handle
        # Keeps the client object (and so its Python-side state) alive as long as the lock.
        self._client = client
        self._pid = os.getpid()
        # RLock: an on_lost callback that runs at once (lock already lost) may call release().
        self._mutex = threading.RLock()
        self._released = False
        self._callbacks: list[Any] = []
        self._resource = _decode(lib.redlock_lock_resource(handle))
        self._token = _decode(lib.redlock_lock_token(handle))
        self._resources = [self._resource]
        self._fence = _number(lib.redlock_lock_fence, handle)
        self._hold_count = _number(lib.redlock_lock_hold_count, handle)
        self._permit = _permit(handle)

    @property
    def resource(self) -> str:
        """The locked resource name (the Redis key)."""
        return self._resource

    @property
    def token(self) -> str:
        """The random value stored under the key; unique per acquisition. For a reentrant lock,
        the owner."""
        return self._token

    @property
    def resources(self) -> list[str]:
        """The locked resources: one, or for :meth:`Redlock.lock_many` all of them, sorted."""
        return list(self._resources)

    @property
    def fence(self) -> int | None:
        """The fencing token of a lock from :meth:`Redlock.lock_fenced`; None for other locks.

        Strictly greater than the token of every fenced lock of the same resource whose holder
        came before, also when nodes restart without their data, provided they stay out a
        restart delay or restart grace (see the README). Send it with every write to the
        protected resource, which rejects writes with a lower token than it has seen.
        """
        return self._fence

    @property
    def hold_count(self) -> int | None:
        """For a reentrant lock: the owner's holds once this one was counted (1 = outermost)."""
        return self._hold_count

    @property
    def permit(self) -> int | None:
        """For a semaphore permit (:meth:`Redlock.semaphore`): the slot held, 0 to permits - 1;
        None for other locks."""
        return self._permit

    @property
    def released(self) -> bool:
        """True once :meth:`release` succeeded or found the lock already lost."""
        return self._released

    @property
    def held(self) -> bool:
        """True while the lock is ours: not released, not lost, validity left.

        For a lock taken with ``auto_extend=True`` the library's extender thread keeps this
        true while the lock is being extended; it turns false as soon as an extension finds the
        lock lost. Cheap: poll it during long work.
        """
        handle = self._handle
        return bool(handle) and bool(lib.redlock_lock_is_held(handle))

    @property
    def lost(self) -> bool:
        """True once the lock was found lost (an extension found it no longer ours on a quorum,
        or an auto-extended lock ran out of validity); a released lock is not lost."""
        handle = self._handle
        return bool(handle) and bool(lib.redlock_lock_is_lost(handle))

    @property
    def validity_ms(self) -> int:
        """Milliseconds left during which the lock is guaranteed to be ours; 0 once released."""
        with self._mutex:
            if not self._handle:
                return 0
            return int(lib.redlock_lock_validity_ms(self._handle))

    @property
    def validity(self) -> float:
        """Seconds left during which the lock is guaranteed to be ours; 0.0 once released."""
        return self.validity_ms / 1000

    def on_lost(self, callback: Callable[[Lock], object]) -> None:
        """Call ``callback(lock)`` once if the lock is found lost; at once if it already was.

        For an ``auto_extend=True`` lock it runs on the client's extender thread, which serves
        every auto-extended lock of the client: keep it short (set an event, cancel a task). It
        may call :meth:`release`. An exception it raises goes to :func:`sys.unraisablehook`. A
        release does not call it. Several callbacks may be registered; each runs at most once.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        _check_process(self._pid, "lock")
        # A weak reference: the C side keeps the thunk, the thunk must not keep the Lock alive
        # (its __del__ frees the C lock, after which the callback can no longer run).
        this = weakref.ref(self)

        def thunk(_user: int | None, _resource: bytes | None) -> None:
            lock = this()
            if lock is not None:
                callback(lock)

        c_callback = _ffi.LostCallback(thunk)
        with self._mutex:
            if not self._handle:
                raise ValueError("this lock was freed")
            # Kept for as long as the C lock lives: the extender thread may call it any time.
            self._callbacks.append(c_callback)
            err = _ffi.ErrorPtr()
            status = lib.redlock_lock_on_lost(self._handle, c_callback, None, byref(err))
        check(status, err)

    def extend(self, ttl_ms: int | None = None, *, ttl: Seconds | None = None) -> None:
        """Set the lock's TTL to ``ttl`` seconds (or ``ttl_ms`` ms) from now on a quorum of nodes.

        Raises :class:`LockLost` if the lock is no longer ours (expired or released),
        :class:`ExtensionLimit` once ``max_extensions`` is used up (the lock is still held),
        :class:`NoQuorum` if too few nodes answered, ``ValueError`` for a bad TTL. Ctrl-C
        interrupts the wait at once; the extension itself still completes in the background.
        """
        millis = _ttl_of(ttl_ms, ttl)
        _check_process(self._pid, "lock")
        _blocking.run(lambda _cancel: self._extend_now(millis), cancellable=False)

    def _extend_now(self, millis: int) -> None:
        # No Python mutex around the call: C serialises calls on one lock, and a waiter that a
        # signal interrupted must not leave a mutex held by the helper thread behind.
        err = _ffi.ErrorPtr()
        status = lib.redlock_lock_extend(self._handle, millis, byref(err))
        check(status, err)

    def release(self) -> None:
        """Delete the key on every node where it still holds our token. Idempotent.

        Raises :class:`LockLost` if a quorum no longer held our token (the critical section may
        not have been exclusive), :class:`NoQuorum` if too few nodes answered (call again, or
        let the TTL expire the key). Ctrl-C interrupts the wait at once; the release itself
        still completes in the background (bounded by the node timeout), even if the
        interpreter is exiting.
        """
        if self._released:
            return
        _check_process(self._pid, "lock")
        _main_thread_holds.forget(self)
        _blocking.run(lambda _cancel: self._release_now(), cancellable=False)

    def _release_now(self) -> None:
        err = _ffi.ErrorPtr()
        status = lib.redlock_lock_release(self._handle, byref(err))
        if status in (Status.OK, Status.LOST):
            self._released = True
        check(status, err)

    def _discard(self) -> None:
        """Free the C lock now, which releases it without waiting for the nodes: for a lock
        obtained in the instant its caller was interrupted, which nobody will ever see."""
        handle, self._handle = self._handle, None
        if handle:
            # Before any Python call: a handler raising at its first bytecode must not lose
            # the only reference to a lock that nobody else can release.
            lib.redlock_lock_free(handle)
            self._released = True
        _main_thread_holds.forget(self)

    def __enter__(self) -> Lock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if exc is None:
            # A LockLost here tells the caller their critical section was not protected.
            lost = self.lost
            self.release()
            if lost:
                raise LockLost(
                    f"lock {self._resource!r} was lost while the block ran: the work may have "
                    "overlapped another owner's",
                    Status.LOST,
                )
            return
        try:
            self.release()
        except Exception as release_error:  # never mask the body's own exception
            if hasattr(exc, "add_note"):
                exc.add_note(f"redlock: releasing {self._resource!r} failed too: {release_error}")

    def __repr__(self) -> str:
        return f"<redlock_rs.Lock resource={self._resource!r} released={self._released}>"

    def __del__(self, _free: Callable[..., None] = lib.redlock_lock_free) -> None:
        handle = getattr(self, "_handle", None)
        if handle:
            self._handle = None
            _free(handle)
        _main_thread_holds.forget(self)


class _MainThreadHolds:
    """The read and write locks the main thread holds, by resource.

    The library refuses at once a thread's read-write acquisition that would wait for that
    thread's own lock (a write lock while it holds the read or write lock, a read lock while it
    holds the write lock). It tells threads apart by OS thread, and the main thread's blocking
    calls run on a helper thread each (see ``_blocking``), so for the main thread the check is
    made here. Other threads call the library directly on their own thread, where it checks.
    """

    def __init__(self) -> None:
        # No mutex: Lock.__del__ calls forget(), and the garbage collector may run it on a
        # thread that is inside one of these methods already (a plain mutex would deadlock
        # there). Each method makes one dict operation, atomic under the interpreter's lock.
        self._held: dict[int, tuple[str, str]] = {}  # id(lock) -> (resource, "read"/"write")

    def check(self, request: Request) -> str | None:
        """The mode the main thread would wait for itself on; None when it would not."""
        mode = "read" if request.read else "write" if request.write else None
        if mode is None or not _blocking.in_main_thread():
            return None
        for resource, held in tuple(self._held.values()):
            if resource == request.resource and (mode == "write" or held == "write"):
                return held
        return None

    def add(self, lock: Lock, request: Request) -> None:
        if (request.read or request.write) and _blocking.in_main_thread():
            self._held[id(lock)] = (lock.resource, "read" if request.read else "write")

    def forget(self, lock: Lock) -> None:
        self._held.pop(id(lock), None)


_main_thread_holds = _MainThreadHolds()


class Redlock:
    """A Redlock client over N independent Redis masters; thread-safe.

    ``nodes`` are Redis URLs (``redis://[user:password@]host:port``, ``rediss://`` for TLS);
    options left as ``None`` take the library's defaults (see :func:`default_options`).
    ``max_extensions=None`` means no cap on :meth:`Lock.extend` calls. ``restart_grace_ms`` keeps
    a node whose Redis process is younger than that out of acquire quorums (off by default): set
    it to at least your largest TTL when nodes run without persistence, since a restarted node
    has forgotten its locks. ``tls_ca_file`` is a PEM file of CA certificates to trust for
    ``rediss://`` nodes instead of the system's roots; ``tls_client_cert_file`` and
    ``tls_client_key_file`` (together) present a client certificate to nodes that require one.
    The clock guard is on unless ``clock_guard=False``: a node whose clock jumps forward by more
    than ``clock_jump_threshold_ms`` (default 50) is kept out of acquire quorums for
    ``clock_quarantine_ms`` (default 60000; make it at least your largest TTL), and a suspension
    of this host marks the locks held across it lost. ``strict_servers=True`` refuses the nodes
    the server probe only warns about (a master with replicas, an evicting
    ``maxmemory-policy``). Close the client with :meth:`close` or use it as a context manager; locks still alive keep
    working after the client is closed. A client cannot be used in a child process after
    ``fork()`` (create one there instead).
    """

    def __init__(
        self,
        nodes: Iterable[str],
        *,
        retry_count: int | None = None,
        retry_delay_ms: int | None = None,
        retry_jitter_ms: int | None = None,
        drift_factor: float | None = None,
        node_timeout_ms: int | None = None,
        max_extensions: int | None = None,
        restart_grace_ms: int | None = None,
        clock_guard: bool | None = None,
        clock_jump_threshold_ms: int | None = None,
        clock_quarantine_ms: int | None = None,
        strict_servers: bool | None = None,
        tls_ca_file: str | os.PathLike[str] | None = None,
        tls_client_cert_file: str | os.PathLike[str] | None = None,
        tls_client_key_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self._handle: Any = None
        self._mutex = threading.Lock()
        self._in_flight = 0
        self._pid = os.getpid()
        self._closed = True  # until the C client exists
        if isinstance(nodes, (str, bytes)) or not isinstance(nodes, Iterable):
            raise TypeError(f"nodes must be a list of Redis URLs, not {type(nodes).__name__}")
        urls: list[bytes] = [_c_string("node URL", url) for url in nodes]
        if not urls:
            raise ValueError("nodes must name at least one Redis node")
        if (tls_client_cert_file is None) != (tls_client_key_file is None):
            raise ValueError("tls_client_cert_file and tls_client_key_file go together")
        for name, flag in (("clock_guard", clock_guard), ("strict_servers", strict_servers)):
            if flag is not None and not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
        if clock_guard is False and clock_jump_threshold_ms is not None:
            raise ValueError("clock_jump_threshold_ms has no effect with clock_guard=False")
        threshold = quarantine = None
        if clock_jump_threshold_ms is not None:
            threshold = _int("clock_jump_threshold_ms", clock_jump_threshold_ms, 0, _ffi.MAX_TTL_MS)
        if clock_quarantine_ms is not None:
            quarantine = _int("clock_quarantine_ms", clock_quarantine_ms, 1, _ffi.MAX_TTL_MS)
        options = _ffi.OptionsPtr()
        err = _ffi.ErrorPtr()
        check(lib.redlock_options_new(byref(options), byref(err)), err)
        try:
            if retry_count is not None:
                count = _int("retry_count", retry_count, 0, _ffi.UINT32_MAX)
                _set(lib.redlock_options_set_retry_count, options, count)
            if retry_delay_ms is not None:
                delay = _int("retry_delay_ms", retry_delay_ms, 0, _ffi.UINT64_MAX)
                _set(lib.redlock_options_set_retry_delay_ms, options, delay)
            if retry_jitter_ms is not None:
                jitter = _int("retry_jitter_ms", retry_jitter_ms, 0, _ffi.UINT64_MAX)
                _set(lib.redlock_options_set_retry_jitter_ms, options, jitter)
            if drift_factor is not None:
                _set(lib.redlock_options_set_drift_factor, options, _drift(drift_factor))
            if node_timeout_ms is not None:
                timeout = _int("node_timeout_ms", node_timeout_ms, 1, _ffi.UINT64_MAX)
                _set(lib.redlock_options_set_node_timeout_ms, options, timeout)
            if max_extensions is not None:
                # C spells "no cap" as 0; in Python that is None, so 0 cannot mean "unlimited".
                cap = _int("max_extensions", max_extensions, 1, _ffi.UINT32_MAX)
                _set(lib.redlock_options_set_max_extensions, options, cap)
            if restart_grace_ms is not None:
                grace = _int("restart_grace_ms", restart_grace_ms, 0, _ffi.MAX_TTL_MS)
                _set(lib.redlock_options_set_restart_grace_ms, options, grace)
            if clock_guard is not None:
                _set(lib.redlock_options_set_clock_guard, options, clock_guard)
            if threshold is not None:
                _set(lib.redlock_options_set_clock_jump_threshold_ms, options, threshold)
            if quarantine is not None:
                _set(lib.redlock_options_set_clock_quarantine_ms, options, quarantine)
            if strict_servers is not None:
                _set(lib.redlock_options_set_strict_servers, options, strict_servers)
            if tls_ca_file is not None:
                _set(lib.redlock_options_set_tls_ca_file, options, _path("tls_ca_file", tls_ca_file))
            if tls_client_cert_file is not None:
                _set(
                    lib.redlock_options_set_tls_client_cert_file,
                    options,
                    _path("tls_client_cert_file", tls_client_cert_file),
                    _path("tls_client_key_file", tls_client_key_file),
                )
            array = (c_char_p * len(urls))(*urls)
            out = _ffi.ClientPtr()
            status = lib.redlock_client_new(array, len(urls), options, byref(out), byref(err))
        finally:
            lib.redlock_options_free(options)
        check(status, err)
        if not out:
            raise RedlockError("redlock_client_new returned OK without a client", Status.PANIC)
        self._handle = out
        self._node_count = len(urls)
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def acquire(self, request: Request) -> Lock:
        """Acquire the lock ``request`` describes (see :class:`Request`): every kind, patience,
        auto-extension and cancel handle, in any combination.

        Raises :class:`NotAcquired` if another owner held it through the last attempt or the
        wait, :class:`NoQuorum` if too few nodes answered, :class:`Cancelled` if the request's
        :class:`Cancel` fired first, ``ValueError`` for a TTL the client cannot use (e.g. too
        short to auto-extend) or a closed client.

        In the main thread, Ctrl-C (``KeyboardInterrupt``) and any signal handler that raises
        interrupt the call at once: the acquisition is cancelled, and a lock it obtained in the
        same instant is released, before the exception propagates.
        """
        if not isinstance(request, _request.Request):
            raise TypeError(f"request must be a redlock_rs.Request, not {type(request).__name__}")
        held = _main_thread_holds.check(request)
        if held is not None:
            wanted = "read" if request.read else "write"
            raise ValueError(
                f"invalid argument: this thread holds a {held} lock on {request.resource!r}: a "
                f"{wanted} lock would wait for it forever (no upgrade or downgrade); release it "
                "first"
            )
        return _blocking.run(
            lambda cancel: self._acquire_now(request, cancel),
            cancellable=True,
            user_cancel=request.cancel,
            dispose=Lock._discard,
            accept=lambda lock: _main_thread_holds.add(lock, request),
        )

    def _acquire_now(self, request: Request, cancel: _CancelHandle | None) -> Lock:
        built = request._build(cancel)
        try:
            lock = self._call(
                lambda handle, out, err: lib.redlock_client_acquire(handle, built.pointer, out, err)
            )
        finally:
            built.free()
        if request.resource is None:
            lock._resources = sorted(request.resources)
        return lock

    def lock(
        self,
        resource: str,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
        auto_extend: bool = False,
        wait_timeout_ms: int | None = None,
        wait_timeout: Seconds | None = None,
        max_hold_ms: int | None = None,
        max_hold: Seconds | None = None,
        extend_fraction: float | None = None,
        notifications: bool = True,
        cancel: Cancel | None = None,
    ) -> Lock:
        """Acquire ``resource`` for ``ttl`` seconds (or ``ttl_ms`` ms), retrying per the options.

        A shorthand for :meth:`acquire` with a :class:`Request` of a plain lock.

        Every duration takes seconds (an int, a float or a :class:`datetime.timedelta`) under
        its plain name, or milliseconds (an int) under its ``_ms`` name; one of the two, not
        both (``ValueError``).

        ``auto_extend=True`` keeps the lock alive while it is held: the library's extender
        thread (one per client) extends it every ``extend_fraction`` (default 1/3) of the TTL.
        :attr:`Lock.held` and :attr:`Lock.lost` say whether it still is; leaving a ``with``
        block whose lock was lost meanwhile raises :class:`LockLost`. Extension stops when the
        lock is released or garbage-collected, or ``max_hold_ms`` after acquisition.

        ``wait_timeout_ms`` waits up to that long for a busy resource instead of
        ``retry_count`` attempts, woken by the release notifications the nodes publish
        (``notifications=False`` polls at ``retry_delay_ms`` instead).

        Blocks (without holding the GIL) until acquired or out of retries: about
        ``retry_count * (retry_delay_ms + retry_jitter_ms)`` plus the node timeouts at most;
        Ctrl-C interrupts it at once (see :meth:`acquire`). Raises :class:`NotAcquired` if
        another owner holds it, :class:`NoQuorum` if too few nodes answered,
        :class:`Cancelled` if ``cancel`` fired, ``ValueError``/``TypeError`` for bad arguments
        or a closed client.
        """
        return self.acquire(
            _lock_request(
                resource,
                ttl_ms,
                ttl=ttl,
                auto_extend=auto_extend,
                wait_timeout_ms=wait_timeout_ms,
                wait_timeout=wait_timeout,
                max_hold_ms=max_hold_ms,
                max_hold=max_hold,
                extend_fraction=extend_fraction,
                notifications=notifications,
                cancel=cancel,
            )
        )

    def try_lock(
        self, resource: str, ttl_ms: int | None = None, *, ttl: Seconds | None = None
    ) -> Lock:
        """Like :meth:`lock`, but a single attempt without retries."""
        return self.acquire(_request.Request(resource, ttl, ttl_ms=ttl_ms, retries=0))

    @staticmethod
    def new_owner() -> str:
        """A fresh random owner name for :meth:`reentrant_lock` (40 hex digits, like a token)."""
        return secrets.token_hex(20)

    def node_status(self) -> list[NodeStatus]:
        """What the client's worker last saw of each node, in the order of ``nodes``."""
        handle = self._enter()
        try:
            result = []
            for index in range(lib.redlock_client_node_count(handle)):
                raw = _ffi.NodeStatusPtr()
                err = _ffi.ErrorPtr()
                check(lib.redlock_client_node_status(handle, index, byref(raw), byref(err)), err)
                try:
                    uptime = lib.redlock_node_status_uptime_ms(raw)
                    run_id = lib.redlock_node_status_run_id(raw) or b""
                    result.append(
                        NodeStatus(
                            address=_decode(lib.redlock_node_status_address(raw)),
                            connected=bool(lib.redlock_node_status_connected(raw)),
                            connects=int(lib.redlock_node_status_connects(raw)),
                            restarts=int(lib.redlock_node_status_restarts(raw)),
                            run_id=run_id.decode("ascii", "replace") or None,
                            uptime_ms=None if uptime == _ffi.UINT64_MAX else int(uptime),
                            grace_remaining_ms=int(lib.redlock_node_status_grace_remaining_ms(raw)),
                            **_guard_fields(raw),
                        )
                    )
                finally:
                    lib.redlock_node_status_free(raw)
            return result
        finally:
            self._leave()

    def inspect(self, resource: str) -> Inspection:
        """Read ``resource`` on every node: what its key holds (a token, reentrant owners,
        another type, nothing), its remaining TTL and the fence counter, plus whether a quorum
        holds it and by which token (see :class:`Inspection`).

        Read-only. Waits for every node up to ``node_timeout_ms``; a node that is down, times
        out or answers with an error (a ``NOPERM`` of a tight ACL) is reported in its entry
        (:attr:`NodeInspection.error`) instead of failing the call. Each node is read at a
        slightly different moment. ``ValueError``/``TypeError`` for an empty or non-str
        resource or a closed client.
        """
        name = _c_string("resource", resource)
        handle = self._enter()
        try:
            return _inspect.inspect(handle, name)
        finally:
            self._leave()

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

        Waits for every node up to ``node_timeout_ms``; node failures are reported per node.
        Check :attr:`ForcedRelease.on_quorum`. ``ValueError``/``TypeError`` for an empty or
        non-str resource or token, or a closed client.
        """
        name = _c_string("resource", resource)
        only = None if token is None else _c_string("token", token)
        handle = self._enter()
        try:
            return _inspect.force_release(handle, name, only)
        finally:
            self._leave()

    def lock_fenced(
        self, resource: str, ttl_ms: int | None = None, *, ttl: Seconds | None = None
    ) -> Lock:
        """Like :meth:`lock`, with a fencing token in :attr:`Lock.fence`.

        The token is kept as a quorum register in ``redlock:fence:{resource}`` on each node
        (no TTL); acquiring costs one more round to the nodes than a plain lock. A fenced lock
        is a plain lock on ``resource``: the two exclude each other.
        """
        return self.acquire(_request.Request(resource, ttl, ttl_ms=ttl_ms, fenced=True))

    def try_lock_fenced(
        self, resource: str, ttl_ms: int | None = None, *, ttl: Seconds | None = None
    ) -> Lock:
        """Like :meth:`lock_fenced`, but a single attempt without retries."""
        return self.acquire(
            _request.Request(resource, ttl, ttl_ms=ttl_ms, fenced=True, retries=0)
        )

    def reentrant_lock(
        self,
        resource: str,
        owner: str,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
    ) -> Lock:
        """One hold of a reentrant lock on ``resource`` for ``owner``, retrying per the options.

        ``owner`` is any non-empty string (at most 1024 UTF-8 bytes) naming the holder, e.g.
        ``uuid.uuid4().hex`` per logical owner; it is not tied to a thread. While ``owner``
        holds the resource it can acquire it again at once; each hold is a :class:`Lock` to
        release, and others can take the resource after the last release (or expiry).
        Reentrant and plain locks on one resource exclude each other.
        """
        return self.acquire(_request.Request(resource, ttl, ttl_ms=ttl_ms, reentrant=owner))

    def try_reentrant_lock(
        self,
        resource: str,
        owner: str,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
    ) -> Lock:
        """Like :meth:`reentrant_lock`, but a single attempt without retries."""
        return self.acquire(
            _request.Request(resource, ttl, ttl_ms=ttl_ms, reentrant=owner, retries=0)
        )

    def lock_many(
        self, resources: Iterable[str], ttl_ms: int | None = None, *, ttl: Seconds | None = None
    ) -> Lock:
        """Acquire all ``resources`` at once or none of them, retrying per the options.

        One script per node sets every key (sorted) or none, so overlapping sets never
        deadlock. The lock's extend and release act on all of them. ``ValueError`` for an empty
        list, an empty name, a name given twice or more than 64 names.
        """
        return self.acquire(_request.Request(resources=resources, ttl=ttl, ttl_ms=ttl_ms))

    def try_lock_many(
        self, resources: Iterable[str], ttl_ms: int | None = None, *, ttl: Seconds | None = None
    ) -> Lock:
        """Like :meth:`lock_many`, but a single attempt without retries."""
        return self.acquire(
            _request.Request(resources=resources, ttl=ttl, ttl_ms=ttl_ms, retries=0)
        )

    def read_lock(
        self,
        resource: str,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
        auto_extend: bool = False,
        wait_timeout_ms: int | None = None,
        wait_timeout: Seconds | None = None,
        max_hold_ms: int | None = None,
        max_hold: Seconds | None = None,
        extend_fraction: float | None = None,
        notifications: bool = True,
        cancel: Cancel | None = None,
    ) -> Lock:
        """The read side of a read-write lock on ``resource``; keywords as for :meth:`lock`.

        Any number of readers hold the resource at once while no writer does; a writer is a
        :meth:`write_lock` and also any plain or fenced lock of the resource (of any Redlock
        client). Each reader has its own expiry; extension and release touch only it. Waiting
        readers all wake when a writer releases. Writers can starve under a steady stream of
        overlapping readers. A thread holding the write lock of ``resource`` gets
        ``ValueError`` instead of waiting for itself. No fencing token.
        """
        return self.acquire(
            _lock_request(
                resource,
                ttl_ms,
                ttl=ttl,
                auto_extend=auto_extend,
                wait_timeout_ms=wait_timeout_ms,
                wait_timeout=wait_timeout,
                max_hold_ms=max_hold_ms,
                max_hold=max_hold,
                extend_fraction=extend_fraction,
                notifications=notifications,
                cancel=cancel,
            ).replace(read=True)
        )

    def write_lock(
        self,
        resource: str,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
        auto_extend: bool = False,
        wait_timeout_ms: int | None = None,
        wait_timeout: Seconds | None = None,
        max_hold_ms: int | None = None,
        max_hold: Seconds | None = None,
        extend_fraction: float | None = None,
        notifications: bool = True,
        cancel: Cancel | None = None,
    ) -> Lock:
        """The write side of a read-write lock on ``resource``; keywords as for :meth:`lock`.

        Excludes readers and other writers. On the nodes it is exactly a plain lock; it adds a
        check that this thread holds no read or write lock of ``resource`` itself (there is no
        upgrade from read to write): ``ValueError`` instead of waiting for itself.
        """
        return self.acquire(
            _lock_request(
                resource,
                ttl_ms,
                ttl=ttl,
                auto_extend=auto_extend,
                wait_timeout_ms=wait_timeout_ms,
                wait_timeout=wait_timeout,
                max_hold_ms=max_hold_ms,
                max_hold=max_hold,
                extend_fraction=extend_fraction,
                notifications=notifications,
                cancel=cancel,
            ).replace(write=True)
        )

    def semaphore(
        self,
        resource: str,
        permits: int,
        ttl_ms: int | None = None,
        *,
        ttl: Seconds | None = None,
        auto_extend: bool = False,
        wait_timeout_ms: int | None = None,
        wait_timeout: Seconds | None = None,
        max_hold_ms: int | None = None,
        max_hold: Seconds | None = None,
        extend_fraction: float | None = None,
        notifications: bool = True,
        cancel: Cancel | None = None,
    ) -> Lock:
        """One of ``permits`` permits (1 to 1024) of a counting semaphore on ``resource``: at
        most ``permits`` holders at once. Keywords as for :meth:`lock`.

        Each permit is a slot, an ordinary Redlock mutex on its own key
        (``redlock:sem:{resource}:<i>``); :attr:`Lock.permit` says which. Every caller of one
        semaphore must pass the same ``permits``: the nodes store it, and another number raises
        ``ValueError`` (it can change once every permit is released and its TTL has run out).
        A waiter wakes when any slot is released. No fencing token.
        """
        return self.acquire(
            _lock_request(
                resource,
                ttl_ms,
                ttl=ttl,
                auto_extend=auto_extend,
                wait_timeout_ms=wait_timeout_ms,
                wait_timeout=wait_timeout,
                max_hold_ms=max_hold_ms,
                max_hold=max_hold,
                extend_fraction=extend_fraction,
                notifications=notifications,
                cancel=cancel,
            ).replace(permits=permits)
        )

    def _call(self, call: Callable[..., int]) -> Lock:
        handle = self._enter()
        out = _ffi.LockPtr()
        err = _ffi.ErrorPtr()
        try:
            status = call(handle, byref(out), byref(err))
        finally:
            self._leave()
        check(status, err)
        if not out:
            raise RedlockError("libredlock returned OK without a lock", Status.PANIC)
        return Lock(out, self)

    def _enter(self) -> Any:
        # Counting calls in flight lets close() from another thread defer the free until the
        # last of them returns, instead of freeing the client under a running C call.
        with self._mutex:
            if self._closed or not self._handle:
                raise ValueError("this Redlock client is closed")
            _check_process(self._pid, "Redlock client")
            self._in_flight += 1
            return self._handle

    def _leave(self) -> None:
        with self._mutex:
            self._in_flight -= 1
            handle = self._take_handle_if_idle()
        if handle:
            lib.redlock_client_free(handle)

    def _take_handle_if_idle(self) -> Any:
        if not self._closed or self._in_flight:
            return None
        handle, self._handle = self._handle, None
        return handle

    def close(self) -> None:
        """Close the client; calling it again is a no-op.

        Locks acquired through it stay usable (release, extend); the connections and worker
        threads go away once the client is closed and those locks are dropped too.
        """
        with self._mutex:
            self._closed = True
            handle = self._take_handle_if_idle()
        if handle:
            lib.redlock_client_free(handle)

    def __enter__(self) -> Redlock:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        # URLs may carry passwords, so they stay out of the repr.
        state = "closed" if self._closed else "open"
        return "<redlock_rs.Redlock {} nodes={}>".format(state, getattr(self, "_node_count", 0))

    def __del__(self) -> None:
        if getattr(self, "_mutex", None) is not None:
            self.close()


def _lock_request(
    resource: str,
    ttl_ms: int | None = None,
    *,
    ttl: Seconds | None = None,
    auto_extend: bool = False,
    wait_timeout_ms: int | None = None,
    wait_timeout: Seconds | None = None,
    max_hold_ms: int | None = None,
    max_hold: Seconds | None = None,
    extend_fraction: float | None = None,
    notifications: bool = True,
    cancel: Cancel | None = None,
) -> Request:
    """The :class:`Request` that :meth:`Redlock.lock`'s keyword arguments describe."""
    if not isinstance(auto_extend, bool):
        raise TypeError("auto_extend must be a bool")
    if auto_extend:
        extension: bool | AutoExtend = _request.AutoExtend(
            None if extend_fraction is None else _fraction(extend_fraction),
            max_hold=max_hold,
            max_hold_ms=max_hold_ms,
        )
    elif extend_fraction is not None or max_hold is not None or max_hold_ms is not None:
        raise ValueError("extend_fraction and max_hold apply only with auto_extend=True")
    else:
        extension = False
    return _request.Request(
        resource,
        ttl,
        ttl_ms=ttl_ms,
        wait_timeout=wait_timeout,
        wait_timeout_ms=wait_timeout_ms,
        notifications=notifications,
        auto_extend=extension,
        cancel=cancel,
    )


def _number(function: Callable[..., int], handle: Any) -> int | None:
    """A number a lock of the right kind has (fence, hold count); None for other kinds."""
    value = c_uint64()
    if function(handle, byref(value), None) != Status.OK:
        return None
    return int(value.value)


def _permit(handle: Any) -> int | None:
    """The slot a semaphore permit holds; None for other kinds."""
    value = c_uint32()
    if lib.redlock_lock_permit(handle, byref(value), None) != Status.OK:
        return None
    return int(value.value)


def _fraction(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"extend_fraction must be a float, not {type(value).__name__}")
    fraction = float(value)
    if not (math.isfinite(fraction) and 0.0 < fraction < 1.0):
        raise ValueError(f"extend_fraction must be in (0, 1), got {value!r}")
    return fraction


def _drift(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"drift_factor must be a float, not {type(value).__name__}")
    drift = float(value)
    if not (math.isfinite(drift) and 0.0 <= drift < 1.0):
        raise ValueError(f"drift_factor must be in [0, 1), got {value!r}")
    return drift


# At the end: these modules use the helpers above (and _blocking uses _request).
from . import _blocking, _inspect, _request  # noqa: E402
