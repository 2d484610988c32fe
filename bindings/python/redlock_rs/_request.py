"""The acquisition request (:class:`Request`, :class:`AutoExtend`) and the :class:`Cancel` handle.

A :class:`Request` is an immutable description of one acquisition: its kind (plain, fenced,
reentrant, several resources), its patience (the client's retries, ``retries=N``, or a wait up to
``wait_timeout``), auto-extension and a cancel handle. :meth:`Redlock.acquire` turns it into a C
``redlock_request`` for each call, so one request serves any number of acquisitions, from any
number of threads.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from ctypes import byref, c_char_p
from typing import Any

from . import _ffi
from ._client import Seconds, _c_string, _int, _millis, _ttl_of
from ._errors import check
from ._ffi import lib

__all__ = ["AutoExtend", "Cancel", "Request"]

MAX_RESOURCES = 64
MAX_PERMITS = 1024


class _CancelHandle:
    """A C ``redlock_cancel`` without a finaliser: the per-call handles of ``_blocking`` and
    ``aio``, freed explicitly with :meth:`_free`. A ``__del__`` would run in whatever thread
    drops the last reference, and a signal handler that raises while it runs in the main thread
    has its exception printed and dropped ("Exception ignored in ...") instead of raised.
    """

    def __init__(self) -> None:
        out = _ffi.CancelPtr()
        err = _ffi.ErrorPtr()
        check(lib.redlock_cancel_new(byref(out), byref(err)), err)
        self._handle: Any = out
        # Per-call handles of acquisitions that run on a helper thread (signals, asyncio): they
        # carry their own handle, fired by this one too. A set mutated only by single C-level
        # operations (add, discard, list(...)), so no lock is needed, not even in a signal
        # handler that interrupts one of them.
        self._children: set[_CancelHandle] = set()

    def cancel(self) -> None:
        """Fire the handle. Idempotent; never blocks."""
        _ffi.gil_lib.redlock_cancel_trigger(self._handle)
        for child in list(self._children):
            child.cancel()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return bool(_ffi.gil_lib.redlock_cancel_is_triggered(self._handle))

    def _link(self, child: _CancelHandle) -> None:
        # Add first, then look: a cancel() in between fires the child either way.
        self._children.add(child)
        if self.cancelled:
            child.cancel()

    def _unlink(self, child: _CancelHandle) -> None:
        self._children.discard(child)

    def _free(self) -> None:
        # Once nothing uses the handle any more. Firing a freed handle does nothing; a thread
        # firing it meanwhile holds the GIL through the C call (see _ffi.gil_lib), and the
        # reference is cleared before the handle is freed.
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            lib.redlock_cancel_free(handle)


class Cancel(_CancelHandle):
    """A cancel handle: :meth:`cancel` ends every pending acquisition whose request names it.

    A cancelled acquisition raises :class:`~redlock_rs.Cancelled` at once, after undoing what it
    had taken on the nodes; one that already got its lock is not affected (release that as
    usual). A handle fires once and for good: use a new one for the next acquisitions.
    :meth:`cancel` may be called from any thread and from a signal handler.
    """

    def __repr__(self) -> str:
        return f"<redlock_rs.Cancel cancelled={self.cancelled}>"

    def __del__(self) -> None:
        self._free()


class AutoExtend:
    """How a lock keeps itself alive while held (``Request(..., auto_extend=AutoExtend(...))``).

    The client's extender thread extends the lock every ``fraction`` of its TTL (default 1/3),
    until it is released, ``max_hold`` seconds (or ``max_hold_ms``) after acquisition, or after
    ``max_extensions`` extensions (default: the client's cap). ``auto_extend=True`` is
    ``AutoExtend()``.
    """

    __slots__ = ("_fraction", "_max_hold_ms", "_max_extensions")

    def __init__(
        self,
        fraction: float | None = None,
        *,
        max_hold: Seconds | None = None,
        max_hold_ms: int | None = None,
        max_extensions: int | None = None,
    ) -> None:
        if fraction is not None:
            if isinstance(fraction, bool) or not isinstance(fraction, (int, float)):
                raise TypeError(f"fraction must be a float, not {type(fraction).__name__}")
            if not (math.isfinite(fraction) and 0.0 < fraction < 1.0):
                raise ValueError(f"fraction must be in (0, 1), got {fraction!r}")
            fraction = float(fraction)
        self._fraction = fraction
        self._max_hold_ms = _millis(
            "max_hold", max_hold, "max_hold_ms", max_hold_ms, 1, _ffi.MAX_TTL_MS
        )
        self._max_extensions = (
            None
            if max_extensions is None
            else _int("max_extensions", max_extensions, 1, _ffi.UINT32_MAX)
        )

    @property
    def fraction(self) -> float | None:
        """Extend every this fraction of the TTL; None: the library's default (1/3)."""
        return self._fraction

    @property
    def max_hold_ms(self) -> int | None:
        """Stop extending this many ms after acquisition; None: never."""
        return self._max_hold_ms

    @property
    def max_extensions(self) -> int | None:
        """Stop after this many extensions; None: the client's ``max_extensions``."""
        return self._max_extensions

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AutoExtend):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[float | None, int | None, int | None]:
        return (self._fraction, self._max_hold_ms, self._max_extensions)

    def __repr__(self) -> str:
        return "AutoExtend(fraction={!r}, max_hold_ms={!r}, max_extensions={!r})".format(
            *self._key()
        )


class Request:
    """One acquisition, for :meth:`Redlock.acquire`: every kind, patience and option combines.

    ::

        Request("orders:42", ttl=10)                          # plain; the client's retries
        Request("orders:42", ttl=10, fenced=True, wait_timeout=30, auto_extend=True)
        Request("orders:42", ttl=10, reentrant=owner, retries=0)
        Request(resources=["a", "b"], ttl=10, auto_extend=AutoExtend(max_hold=60),
                cancel=cancel)
        Request("report", ttl=10, read=True, wait_timeout=30)    # one of many readers
        Request("pool", ttl=10, permits=3, auto_extend=True)      # one of 3 permits

    Kind: one ``resource`` (positional) or ``resources`` (all at once or none; at most 64, no
    name twice); ``fenced=True`` adds a fencing token (:attr:`Lock.fence`); ``reentrant=owner``
    makes it one hold of a reentrant lock for ``owner`` (see :meth:`Redlock.new_owner`).
    ``read=True`` and ``write=True`` are the two sides of a read-write lock: readers share the
    resource, a writer excludes readers and writers (a writer is a plain lock on the nodes, so
    plain and fenced locks exclude readers too; a thread holding the read lock that asks for
    the write lock, or the other way round, gets ``ValueError`` instead of waiting for itself).
    ``permits=L`` makes it one of L permits (1 to 1024) of a counting semaphore
    (:attr:`Lock.permit` says which); every caller of one semaphore passes the same L, else
    ``ValueError`` at acquisition. Fenced, reentrant, read, write and permits take a single
    resource and exclude each other.

    Patience: by default the client's ``retry_count``; ``retries=N`` retries up to N times
    (0: a single attempt); ``wait_timeout`` waits up to that long, woken by the release
    notifications the nodes publish (``notifications=False`` only polls). ``retry_delay`` and
    ``retry_jitter`` override the client's delay between attempts for this request (they are
    given together). ``retries`` and ``wait_timeout`` exclude each other.

    ``auto_extend``: ``True`` or an :class:`AutoExtend`. ``cancel``: a :class:`Cancel` that ends
    the acquisition early with :class:`~redlock_rs.Cancelled`.

    Durations take seconds (int, float, :class:`datetime.timedelta`) or, under their ``_ms``
    names, an int of milliseconds; one form each. Bad values raise ``ValueError``/``TypeError``
    here, not at acquisition. A request is immutable; :meth:`replace` makes a changed copy.
    """

    __slots__ = (
        "_resources",
        "_many",
        "_ttl_ms",
        "_fenced",
        "_owner",
        "_mode",
        "_permits",
        "_retries",
        "_retry_delay_ms",
        "_retry_jitter_ms",
        "_wait_timeout_ms",
        "_notifications",
        "_auto_extend",
        "_cancel",
    )

    def __init__(
        self,
        resource: str | None = None,
        ttl: Seconds | None = None,
        *,
        ttl_ms: int | None = None,
        resources: Iterable[str] | None = None,
        fenced: bool = False,
        reentrant: str | None = None,
        read: bool = False,
        write: bool = False,
        permits: int | None = None,
        retries: int | None = None,
        retry_delay: Seconds | None = None,
        retry_delay_ms: int | None = None,
        retry_jitter: Seconds | None = None,
        retry_jitter_ms: int | None = None,
        wait_timeout: Seconds | None = None,
        wait_timeout_ms: int | None = None,
        notifications: bool = True,
        auto_extend: bool | AutoExtend = False,
        cancel: Cancel | None = None,
    ) -> None:
        if (resource is None) == (resources is None):
            raise TypeError("pass one resource (positional) or resources=[...], not both")
        if resource is not None:
            _c_string("resource", resource)
            self._resources: tuple[str, ...] = (resource,)
            self._many = False
        else:
            if isinstance(resources, (str, bytes)) or not isinstance(resources, Iterable):
                raise TypeError(
                    f"resources must be a list of names, not {type(resources).__name__}"
                )
            names = tuple(resources)
            for name in names:
                _c_string("resource", name)
            if not names:
                raise ValueError("resources must name at least one resource")
            if len(set(names)) != len(names):
                raise ValueError("resources must not name a resource twice")
            if len(names) > MAX_RESOURCES:
                raise ValueError(f"resources names {len(names)}; at most {MAX_RESOURCES}")
            self._resources = names
            self._many = True
        self._ttl_ms = _ttl_of(ttl_ms, ttl)
        for name, flag in (
            ("fenced", fenced),
            ("read", read),
            ("write", write),
            ("notifications", notifications),
        ):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, not {type(flag).__name__}")
        if reentrant is not None:
            _c_string("reentrant (the owner)", reentrant)
            if len(reentrant.encode("utf-8")) > 1024:
                raise ValueError("reentrant (the owner) must be at most 1024 UTF-8 bytes")
        if permits is not None:
            permits = _int("permits", permits, 1, MAX_PERMITS)
        kinds = [
            name
            for name, on in (
                ("fenced", fenced),
                ("reentrant", reentrant is not None),
                ("read", read),
                ("write", write),
                ("permits", permits is not None),
            )
            if on
        ]
        if kinds and self._many:
            raise ValueError(
                f"a {kinds[0]} lock takes one resource, not resources=[...]"
                if kinds[0] != "permits"
                else "a semaphore takes one resource, not resources=[...]"
            )
        if len(kinds) > 1:
            raise ValueError(
                f"{kinds[0]} and {kinds[1]} exclude each other: a lock has one kind, not both"
            )
        self._fenced = fenced
        self._owner = reentrant
        self._mode = "read" if read else "write" if write else None
        self._permits = permits
        self._retries = None if retries is None else _int("retries", retries, 0, _ffi.UINT32_MAX)
        self._wait_timeout_ms = _millis(
            "wait_timeout", wait_timeout, "wait_timeout_ms", wait_timeout_ms, 0, _ffi.MAX_TTL_MS
        )
        if self._retries is not None and self._wait_timeout_ms is not None:
            raise ValueError("retries and wait_timeout exclude each other: pick one patience")
        self._retry_delay_ms = _millis(
            "retry_delay", retry_delay, "retry_delay_ms", retry_delay_ms, 0, _ffi.MAX_TTL_MS
        )
        self._retry_jitter_ms = _millis(
            "retry_jitter", retry_jitter, "retry_jitter_ms", retry_jitter_ms, 0, _ffi.MAX_TTL_MS
        )
        if (self._retry_delay_ms is None) != (self._retry_jitter_ms is None):
            raise ValueError("retry_delay and retry_jitter go together")
        self._notifications = notifications
        if auto_extend is True:
            self._auto_extend: AutoExtend | None = AutoExtend()
        elif auto_extend is False:
            self._auto_extend = None
        elif isinstance(auto_extend, AutoExtend):
            self._auto_extend = auto_extend
        else:
            raise TypeError(
                f"auto_extend must be a bool or an AutoExtend, not {type(auto_extend).__name__}"
            )
        if cancel is not None and not isinstance(cancel, Cancel):
            raise TypeError(f"cancel must be a redlock_rs.Cancel, not {type(cancel).__name__}")
        self._cancel = cancel

    @property
    def resource(self) -> str | None:
        """The one resource; None for a request of ``resources``."""
        return None if self._many else self._resources[0]

    @property
    def resources(self) -> list[str]:
        """The resources, in the order given."""
        return list(self._resources)

    @property
    def ttl_ms(self) -> int:
        return self._ttl_ms

    @property
    def fenced(self) -> bool:
        return self._fenced

    @property
    def reentrant(self) -> str | None:
        """The owner of a reentrant request; None for other kinds."""
        return self._owner

    @property
    def read(self) -> bool:
        """True for the read side of a read-write lock."""
        return self._mode == "read"

    @property
    def write(self) -> bool:
        """True for the write side of a read-write lock."""
        return self._mode == "write"

    @property
    def permits(self) -> int | None:
        """The number of permits of a semaphore request; None for other kinds."""
        return self._permits

    @property
    def retries(self) -> int | None:
        return self._retries

    @property
    def wait_timeout_ms(self) -> int | None:
        return self._wait_timeout_ms

    @property
    def auto_extend(self) -> AutoExtend | None:
        return self._auto_extend

    @property
    def cancel(self) -> Cancel | None:
        return self._cancel

    def replace(self, **changes: object) -> Request:
        """A copy with some constructor arguments changed, e.g. ``req.replace(cancel=c)``.

        A duration given in one form replaces both forms of it; ``retries`` replaces
        ``wait_timeout`` and the other way round.
        """
        current: dict[str, object] = {
            "ttl_ms": self._ttl_ms,
            "fenced": self._fenced,
            "reentrant": self._owner,
            "read": self._mode == "read",
            "write": self._mode == "write",
            "permits": self._permits,
            "retries": self._retries,
            "retry_delay_ms": self._retry_delay_ms,
            "retry_jitter_ms": self._retry_jitter_ms,
            "wait_timeout_ms": self._wait_timeout_ms,
            "notifications": self._notifications,
            "auto_extend": self._auto_extend or False,
            "cancel": self._cancel,
        }
        if self._many:
            current["resources"] = self._resources
        else:
            current["resource"] = self._resources[0]
        if "resource" in changes or "resources" in changes:
            current.pop("resource", None)
            current.pop("resources", None)
        for name in list(changes):
            base = name[:-3] if name.endswith("_ms") else name
            current.pop(base, None)
            current.pop(base + "_ms", None)
            # One patience: a new one replaces the other.
            if base == "retries":
                current.pop("wait_timeout_ms", None)
            elif base == "wait_timeout":
                current.pop("retries", None)
        # One kind: a new one replaces the other.
        kinds = ("fenced", "reentrant", "read", "write", "permits")
        if any(name in changes for name in kinds):
            for name in kinds:
                if name not in changes:
                    current.pop(name, None)
        current.update(changes)
        return Request(**current)  # type: ignore[arg-type]

    def _build(self, cancel: _CancelHandle | None) -> _RequestHandle:
        """A C request for one acquisition, naming ``cancel`` (or no handle)."""
        out = _ffi.RequestPtr()
        err = _ffi.ErrorPtr()
        if self._many:
            encoded = [name.encode("utf-8") for name in self._resources]
            array = (c_char_p * len(encoded))(*encoded)
            status = lib.redlock_request_new_many(
                array, len(encoded), self._ttl_ms, byref(out), byref(err)
            )
        else:
            status = lib.redlock_request_new(
                self._resources[0].encode("utf-8"), self._ttl_ms, byref(out), byref(err)
            )
        check(status, err)
        handle = _RequestHandle(out)
        req = handle.pointer
        try:

            def setter(status: int) -> None:
                check(status, err)

            if self._fenced:
                setter(lib.redlock_request_set_fenced(req, byref(err)))
            if self._owner is not None:
                setter(lib.redlock_request_set_reentrant(req, self._owner.encode("utf-8"), byref(err)))
            if self._mode == "read":
                setter(lib.redlock_request_set_read(req, byref(err)))
            elif self._mode == "write":
                setter(lib.redlock_request_set_write(req, byref(err)))
            if self._permits is not None:
                setter(lib.redlock_request_set_semaphore(req, self._permits, byref(err)))
            if self._retries is not None:
                setter(lib.redlock_request_set_retries(req, self._retries, byref(err)))
            if self._retry_delay_ms is not None and self._retry_jitter_ms is not None:
                setter(
                    lib.redlock_request_set_retry_delay(
                        req, self._retry_delay_ms, self._retry_jitter_ms, byref(err)
                    )
                )
            if self._wait_timeout_ms is not None:
                setter(lib.redlock_request_set_wait(req, self._wait_timeout_ms, byref(err)))
            if not self._notifications:
                setter(lib.redlock_request_set_notifications(req, False, byref(err)))
            auto = self._auto_extend
            if auto is not None:
                setter(
                    lib.redlock_request_set_auto_extend(
                        req,
                        auto.fraction or 0.0,
                        auto.max_hold_ms or 0,
                        auto.max_extensions or 0,
                        byref(err),
                    )
                )
            if cancel is not None:
                setter(lib.redlock_request_set_cancel(req, cancel._handle, byref(err)))
        except BaseException:
            handle.free()
            raise
        return handle

    def __repr__(self) -> str:
        parts = [repr(self._resources[0]) if not self._many else f"resources={list(self._resources)!r}"]
        parts.append(f"ttl_ms={self._ttl_ms}")
        if self._fenced:
            parts.append("fenced=True")
        if self._owner is not None:
            parts.append(f"reentrant={self._owner!r}")
        if self._mode is not None:
            parts.append(f"{self._mode}=True")
        if self._permits is not None:
            parts.append(f"permits={self._permits}")
        if self._retries is not None:
            parts.append(f"retries={self._retries}")
        if self._retry_delay_ms is not None:
            parts.append(f"retry_delay_ms={self._retry_delay_ms}")
            parts.append(f"retry_jitter_ms={self._retry_jitter_ms}")
        if self._wait_timeout_ms is not None:
            parts.append(f"wait_timeout_ms={self._wait_timeout_ms}")
        if not self._notifications:
            parts.append("notifications=False")
        if self._auto_extend is not None:
            parts.append(f"auto_extend={self._auto_extend!r}")
        if self._cancel is not None:
            parts.append(f"cancel={self._cancel!r}")
        return "Request({})".format(", ".join(parts))


class _RequestHandle:
    """Owns one C request until :meth:`free`. No ``__del__``: it would run wherever the last
    reference goes, also in the main thread from a dropped traceback, where a signal handler's
    exception would be printed and dropped (see ``_CancelHandle``)."""

    __slots__ = ("pointer",)

    def __init__(self, pointer: Any) -> None:
        self.pointer = pointer

    def free(self) -> None:
        pointer, self.pointer = self.pointer, None
        if pointer:
            lib.redlock_request_free(pointer)

