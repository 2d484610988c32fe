"""The acquisition request (:class:`Request`, :class:`AutoExtend`) and the shorthands' keywords.

A :class:`Request` is an immutable description of one acquisition: its kind (plain, fenced,
reentrant, several resources, read, write, semaphore), its patience (the client's retries,
``retries=N``, or a wait up to ``wait_timeout``) and auto-extension. It validates its arguments
and builds its C ``redlock_request`` once, when it is made; each acquisition of it is then one C
call, ``redlock_request_acquire``, with that call's cancel handle and caller.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterable
from ctypes import byref, c_char_p
from datetime import timedelta
from typing import Any, TypedDict

from . import _bindings as c
from . import _convert as convert
from ._cancel import Cancel, CancelHandle
from ._convert import Seconds
from ._errors import RedlockError, Status, call, check
from ._ffi import lib
from ._lock import L
from ._managed import Managed

__all__ = ["AutoExtend", "Request", "LockKeywords"]

MAX_RESOURCES = 64
MAX_RESOURCE_NAME_BYTES = 4096
MAX_PERMITS = 1024
MAX_OWNER_BYTES = 1024


class AutoExtend:
    """How a lock keeps itself alive while held (``Request(..., auto_extend=AutoExtend(...))``).

    The client's extender thread extends the lock every ``fraction`` of its TTL (default 1/3),
    until it is released, ``max_hold`` seconds after acquisition, or after
    ``max_extensions`` extensions (default: the client's cap). ``auto_extend=True`` is
    ``AutoExtend()``.
    """

    __slots__ = ("_fraction", "_max_hold_ms", "_max_extensions")

    def __init__(
        self,
        fraction: float | None = None,
        *,
        max_hold: Seconds | None = None,
        max_extensions: int | None = None,
    ) -> None:
        self._fraction = (
            None if fraction is None else convert.fraction("fraction", fraction, 0, False)
        )
        self._max_hold_ms = convert.millis("max_hold", max_hold, 1, convert.MAX_TTL_MS)
        self._max_extensions = (
            None
            if max_extensions is None
            else convert.integer("max_extensions", max_extensions, 1, convert.UINT32_MAX)
        )

    @property
    def fraction(self) -> float | None:
        """Extend every this fraction of the TTL; None: the library's default (1/3)."""
        return self._fraction

    @property
    def max_hold(self) -> float | None:
        """Stop extending this many seconds after acquisition; None: never."""
        return None if self._max_hold_ms is None else self._max_hold_ms / 1000

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
        hold = "None" if self._max_hold_ms is None else convert.seconds_text(self._max_hold_ms)
        return (
            f"AutoExtend(fraction={self._fraction!r}, max_hold={hold}, "
            f"max_extensions={self._max_extensions!r})"
        )


def _exact(ms: int | None) -> timedelta | None:
    """``ms`` as the exact duration a constructor takes back."""
    return None if ms is None else timedelta(milliseconds=ms)


class Request(Managed):
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
    name twice); a name has 1 to 4096 bytes of UTF-8 (``ValueError`` otherwise);
    ``fenced=True`` adds a fencing token (:attr:`Lock.fence`); ``reentrant=owner``
    makes it one hold of a reentrant lock for ``owner`` (see :meth:`Redlock.new_owner`): any
    non-empty string (at most 1024 UTF-8 bytes) naming the holder, not tied to a thread; while
    ``owner`` holds the resource it can acquire it again at once, each hold a :class:`Lock` to
    release, and others can take it after the last release (or expiry).
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
    notifications the nodes publish (``notifications=False`` only polls). A waiter for a plain,
    fenced or write lock queues in arrival order with the waiters of every process, so that a
    release wakes only the next one; ``fair=False`` leaves the queue, and one waiter per client
    tries on each release, as every earlier version did (the queue only orders the tries:
    exclusion does not depend on it). ``retry_delay`` and ``retry_jitter`` override the client's
    delay between attempts for this request (they are given together). ``retries`` and
    ``wait_timeout`` exclude each other.

    ``auto_extend``: ``True`` or an :class:`AutoExtend`. ``cancel``: a :class:`Cancel` that ends
    its acquisitions early with :class:`~redquorum.Cancelled`.

    Every argument but the resource is a keyword. Durations (``ttl``, ``wait_timeout``,
    ``retry_delay``, ``retry_jitter``) take seconds: an int, a float or a
    :class:`datetime.timedelta`, rounded to whole milliseconds. Bad values raise
    ``ValueError``/``TypeError`` here, not at acquisition.

    A request is immutable and owns one C request, built here and used by every acquisition
    of it (from any number of threads at once); :meth:`replace` makes a changed copy. It is
    freed with the Request, or at once by :meth:`close` (or the end of a ``with`` block).
    """

    _what = "request"

    def __init__(
        self,
        resource: str | None = None,
        *,
        ttl: Seconds,
        resources: Iterable[str] | None = None,
        fenced: bool = False,
        reentrant: str | None = None,
        read: bool = False,
        write: bool = False,
        permits: int | None = None,
        retries: int | None = None,
        retry_delay: Seconds | None = None,
        retry_jitter: Seconds | None = None,
        wait_timeout: Seconds | None = None,
        notifications: bool = True,
        fair: bool = True,
        auto_extend: bool | AutoExtend = False,
        cancel: Cancel | None = None,
    ) -> None:
        if (resource is None) == (resources is None):
            raise TypeError("pass one resource (positional) or resources=[...], not both")
        if resource is not None:
            names: tuple[str, ...] = (resource,)
            encoded = [convert.c_string("resource", resource)]
        else:
            if isinstance(resources, (str, bytes)) or not isinstance(resources, Iterable):
                raise TypeError(
                    f"resources must be a list of names, not {type(resources).__name__}"
                )
            names = tuple(resources)
            encoded = [convert.c_string("resource", name) for name in names]
            if not names:
                raise ValueError("resources must name at least one resource")
            if len(set(names)) != len(names):
                raise ValueError("resources must not name a resource twice")
            if len(names) > MAX_RESOURCES:
                raise ValueError(f"resources names {len(names)}; at most {MAX_RESOURCES}")
        self._resources = names
        self._many = resource is None
        self._ttl_ms = convert.ttl_millis(ttl)
        for name, value in (
            ("fenced", fenced),
            ("read", read),
            ("write", write),
            ("notifications", notifications),
            ("fair", fair),
        ):
            convert.flag(name, value)
        owner = None
        if reentrant is not None:
            owner = convert.c_string("reentrant (the owner)", reentrant)
            if len(owner) > MAX_OWNER_BYTES:
                raise ValueError(
                    f"reentrant (the owner) must be at most {MAX_OWNER_BYTES} UTF-8 bytes"
                )
        if permits is not None:
            permits = convert.integer("permits", permits, 1, MAX_PERMITS)
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
        self._retries = (
            None if retries is None else convert.integer("retries", retries, 0, convert.UINT32_MAX)
        )
        self._wait_timeout_ms = convert.millis("wait_timeout", wait_timeout, 0, convert.MAX_TTL_MS)
        if self._retries is not None and self._wait_timeout_ms is not None:
            raise ValueError("retries and wait_timeout exclude each other: pick one patience")
        self._retry_delay_ms = convert.millis("retry_delay", retry_delay, 0, convert.MAX_TTL_MS)
        self._retry_jitter_ms = convert.millis("retry_jitter", retry_jitter, 0, convert.MAX_TTL_MS)
        if (self._retry_delay_ms is None) != (self._retry_jitter_ms is None):
            raise ValueError("retry_delay and retry_jitter go together")
        self._notifications = notifications
        self._fair = fair
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
            raise TypeError(f"cancel must be a redquorum.Cancel, not {type(cancel).__name__}")
        self._cancel = cancel
        # What the locks of this request are called (the C lock says the same).
        self._held = sorted(names)
        self._held_name = ",".join(self._held)
        super().__init__(self._build(encoded, owner))

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_request_free(pointer)

    def _build(self, names: list[bytes], owner: bytes | None) -> Any:
        """The C request: the constructor and one setter per setting that is not a default."""
        out = c.redlock_request_p()
        err = c.redlock_error_p()
        if self._many:
            array = (c_char_p * len(names))(*names)
            status = lib.redlock_request_new_many(
                array, len(names), self._ttl_ms, byref(out), byref(err)
            )
        else:
            status = lib.redlock_request_new(names[0], self._ttl_ms, byref(out), byref(err))
        check(status, err)
        try:
            if self._fenced:
                call(lib.redlock_request_set_fenced, out)
            if owner is not None:
                call(lib.redlock_request_set_reentrant, out, owner)
            if self._mode == "read":
                call(lib.redlock_request_set_read, out)
            elif self._mode == "write":
                call(lib.redlock_request_set_write, out)
            if self._permits is not None:
                call(lib.redlock_request_set_semaphore, out, self._permits)
            if self._retries is not None:
                call(lib.redlock_request_set_retries, out, self._retries)
            if self._retry_delay_ms is not None:
                call(
                    lib.redlock_request_set_retry_delay,
                    out,
                    self._retry_delay_ms,
                    self._retry_jitter_ms,
                )
            if self._wait_timeout_ms is not None:
                call(lib.redlock_request_set_wait, out, self._wait_timeout_ms)
            if not self._notifications:
                call(lib.redlock_request_set_notifications, out, False)
            if not self._fair:
                call(lib.redlock_request_set_fair, out, False)
            auto = self._auto_extend
            if auto is not None:
                call(
                    lib.redlock_request_set_auto_extend,
                    out,
                    auto.fraction or 0.0,
                    auto._max_hold_ms or 0,
                    auto.max_extensions or 0,
                )
        except BaseException:
            self._delete(out)
            raise
        return out

    def _acquire(
        self, client: Any, cancel: CancelHandle | None, caller: bytes | None, kind: type[L]
    ) -> L:
        """One acquisition on the C ``client``, a lock of type ``kind``: one C call, blocking
        until it ends."""
        out = c.redlock_lock_p()
        err = c.redlock_error_p()
        pointer = self._borrow()
        try:
            status = lib.redlock_request_acquire(
                pointer, client, None if cancel is None else cancel.pointer, caller, byref(out),
                byref(err),
            )
        finally:
            self._give_back()
        check(status, err)
        if not out:
            raise RedlockError("libredlock returned OK without a lock", Status.PANIC)
        return kind(out, self._held_name, self._held)

    @property
    def resource(self) -> str | None:
        """The one resource; None for a request of ``resources``."""
        return None if self._many else self._resources[0]

    @property
    def resources(self) -> list[str]:
        """The resources, in the order given."""
        return list(self._resources)

    @property
    def ttl(self) -> float:
        """The locks' time to live, in seconds."""
        return self._ttl_ms / 1000

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
    def wait_timeout(self) -> float | None:
        """How long an acquisition waits for a busy resource, in seconds; None: it retries."""
        return None if self._wait_timeout_ms is None else self._wait_timeout_ms / 1000

    @property
    def auto_extend(self) -> AutoExtend | None:
        return self._auto_extend

    @property
    def cancel(self) -> Cancel | None:
        return self._cancel

    def _arguments(self) -> dict[str, object]:
        """The constructor's arguments that make this request (durations exact)."""
        current: dict[str, object] = {
            "ttl": _exact(self._ttl_ms),
            "fenced": self._fenced,
            "reentrant": self._owner,
            "read": self._mode == "read",
            "write": self._mode == "write",
            "permits": self._permits,
            "retries": self._retries,
            "retry_delay": _exact(self._retry_delay_ms),
            "retry_jitter": _exact(self._retry_jitter_ms),
            "wait_timeout": _exact(self._wait_timeout_ms),
            "notifications": self._notifications,
            "fair": self._fair,
            "auto_extend": self._auto_extend or False,
            "cancel": self._cancel,
        }
        if self._many:
            current["resources"] = self._resources
        else:
            current["resource"] = self._resources[0]
        return current

    def replace(self, **changes: object) -> Request:
        """A copy with some constructor arguments changed, e.g. ``req.replace(cancel=c)``.

        ``retries`` replaces ``wait_timeout`` and the other way round.
        """
        current = self._arguments()
        if "resource" in changes or "resources" in changes:
            current.pop("resource", None)
            current.pop("resources", None)
        # One patience: a new one replaces the other.
        if "retries" in changes:
            current.pop("wait_timeout", None)
        if "wait_timeout" in changes:
            current.pop("retries", None)
        # One kind: a new one replaces the other.
        kinds = ("fenced", "reentrant", "read", "write", "permits")
        if any(name in changes for name in kinds):
            for name in kinds:
                if name not in changes:
                    current.pop(name, None)
        current.update(changes)
        return Request(**current)  # type: ignore[arg-type]

    # Immutable: a copy is the request itself; a pickle carries its arguments (a Cancel cannot
    # be pickled), and unpickling builds a C request of its own.
    def __copy__(self) -> Request:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> Request:
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self._arguments(),))

    def __repr__(self) -> str:
        parts = [
            f"resources={list(self._resources)!r}" if self._many else repr(self._resources[0])
        ]
        parts.append(f"ttl={convert.seconds_text(self._ttl_ms)}")
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
        if self._retry_delay_ms is not None and self._retry_jitter_ms is not None:
            parts.append(f"retry_delay={convert.seconds_text(self._retry_delay_ms)}")
            parts.append(f"retry_jitter={convert.seconds_text(self._retry_jitter_ms)}")
        if self._wait_timeout_ms is not None:
            parts.append(f"wait_timeout={convert.seconds_text(self._wait_timeout_ms)}")
        if not self._notifications:
            parts.append("notifications=False")
        if not self._fair:
            parts.append("fair=False")
        if self._auto_extend is not None:
            parts.append(f"auto_extend={self._auto_extend!r}")
        if self._cancel is not None:
            parts.append(f"cancel={self._cancel!r}")
        return "Request({})".format(", ".join(parts))


def _rebuild(arguments: dict[str, Any]) -> Request:
    return Request(**arguments)


class LockKeywords(TypedDict, total=False):
    """The keywords of :meth:`Redlock.lock`, :meth:`~Redlock.read_lock`,
    :meth:`~Redlock.write_lock` and :meth:`~Redlock.semaphore` (and of their asyncio twins),
    declared once: see :meth:`Redlock.lock` for what each does."""

    auto_extend: bool
    wait_timeout: Seconds | None
    max_hold: Seconds | None
    extend_fraction: float | None
    notifications: bool
    fair: bool
    cancel: Cancel | None


_KEYWORDS = frozenset(LockKeywords.__annotations__)


def shorthand(
    method: str, resource: str, ttl: Seconds, keywords: LockKeywords, **kind: Any
) -> Request:
    """The :class:`Request` a shorthand's arguments describe (``kind``: its fixed kind, e.g.
    ``read=True``), checked once, by the Request."""
    unknown = keywords.keys() - _KEYWORDS
    if unknown:
        raise TypeError(f"{method}() got an unexpected keyword argument {min(unknown)!r}")
    auto_extend = keywords.get("auto_extend", False)
    if not isinstance(auto_extend, bool):
        raise TypeError(f"auto_extend must be a bool, not {type(auto_extend).__name__}")
    extend_fraction = keywords.get("extend_fraction")
    max_hold = keywords.get("max_hold")
    extension: bool | AutoExtend = False
    if auto_extend:
        extension = AutoExtend(extend_fraction, max_hold=max_hold)
    elif extend_fraction is not None or max_hold is not None:
        raise ValueError("extend_fraction and max_hold apply only with auto_extend=True")
    return Request(
        resource,
        ttl=ttl,
        wait_timeout=keywords.get("wait_timeout"),
        notifications=keywords.get("notifications", True),
        fair=keywords.get("fair", True),
        auto_extend=extension,
        cancel=keywords.get("cancel"),
        **kind,
    )
