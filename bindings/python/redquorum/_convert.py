"""Python values to C arguments and back: the checks every wrapper shares.

Each converter raises ``TypeError`` for a value of the wrong type and ``ValueError`` for one out
of range, naming the argument as the caller spelled it, so that a bad value is refused before any
C call, with a message about the Python API rather than the C one.
"""

from __future__ import annotations

import math
import os
from datetime import timedelta
from typing import Union

from ._errors import RedlockError, Status

Seconds = Union[int, float, timedelta]
"""A duration in seconds (``10``, ``2.5``) or a :class:`datetime.timedelta`."""

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
# The TTL range is part of the contract in docs/c-abi.md (3 ms to 10 years). The lower end also
# depends on the client's drift factor, so only the upper end is checked here; C reports the rest.
MAX_TTL_MS = 315_360_000_000


def integer(name: str, value: object, minimum: int, maximum: int) -> int:
    # bool is an int subclass, but True as a TTL or retry count is always a mistake.
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise ValueError(f"{name} must be between {minimum} and {maximum}, got {value}")
    return value


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def fraction(name: str, value: object, minimum: float, inclusive: bool) -> float:
    """A float in ``[minimum, 1)`` (``inclusive``) or ``(minimum, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a float, not {type(value).__name__}")
    number = float(value)
    above = number >= minimum if inclusive else number > minimum
    if not (math.isfinite(number) and above and number < 1.0):
        low = f"at least {minimum:g}" if inclusive else f"above {minimum:g}"
        raise ValueError(f"{name} must be {low} and below 1, got {value!r}")
    return number


def c_string(name: str, value: object) -> bytes:
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


def path(name: str, value: object) -> bytes:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{name} must be a path (str or os.PathLike), not {type(value).__name__}")
    text = os.fspath(value)
    if isinstance(text, bytes):
        raise TypeError(f"{name} must be a str path, not bytes")
    return c_string(name, text)


def millis(name: str, seconds: object, minimum: int, maximum: int) -> int | None:
    """The duration ``name``, given in seconds (an int or a float) or as a
    :class:`datetime.timedelta`, in whole milliseconds for C; ``None`` when it is ``None``.

    ``minimum`` and ``maximum`` bound the result, in milliseconds.
    """
    if seconds is None:
        return None
    if isinstance(seconds, timedelta):
        # Exact integer arithmetic: a timedelta is days, seconds and microseconds.
        micros = (seconds.days * 86_400 + seconds.seconds) * 1_000_000 + seconds.microseconds
        result = (micros + 500) // 1000
    elif isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise TypeError(
            f"{name} must be seconds (int or float) or a datetime.timedelta, "
            f"not {type(seconds).__name__}"
        )
    elif isinstance(seconds, int):
        result = seconds * 1000
    else:
        if not math.isfinite(seconds):
            raise ValueError(f"{name} must be a finite number of seconds, got {seconds!r}")
        result = round(seconds * 1000)
    if not minimum <= result <= maximum:
        low = f"at least {_seconds(minimum)} and " if minimum else ""
        raise ValueError(
            f"{name} must be {low}at most {_seconds(maximum)} (whole milliseconds), "
            f"got {seconds!r}"
        )
    return result


def _seconds(ms: int) -> str:
    if ms == MAX_TTL_MS:
        return "10 years"
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:g} s"


def seconds_text(ms: int) -> str:
    """``ms`` as Python source of the seconds it is (``10``, ``0.25``), for a ``repr``."""
    return str(ms // 1000) if ms % 1000 == 0 else repr(ms / 1000)


def ttl_millis(seconds: object) -> int:
    """A lock's time to live, which every acquisition and extension needs. Its lower end
    depends on the client's drift factor: the library checks it, in the same words as in every
    language."""
    result = millis("ttl", seconds, 0, MAX_TTL_MS)
    if result is None:
        raise TypeError(
            "missing the lock's time to live: pass ttl (seconds or a datetime.timedelta)"
        )
    return result


def check_process(created_in: int, what: str) -> None:
    # The library's worker threads do not survive fork(); without this check a child's calls
    # would wait out node_timeout and report NoQuorum, which hides the real cause.
    if os.getpid() != created_in:
        raise ValueError(
            f"this {what} was created in process {created_in} and cannot be used after fork(): "
            "create a new Redlock in the child process"
        )


def text(raw: bytes | None) -> str | None:
    """A C string the library may leave NULL."""
    return None if raw is None else raw.decode("utf-8", "replace")


def required_text(raw: bytes | None) -> str:
    """A C string the library always sets for a live handle."""
    if raw is None:
        raise RedlockError("libredlock returned NULL for a live handle", Status.PANIC)
    return raw.decode("utf-8", "replace")
