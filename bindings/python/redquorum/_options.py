"""The client's settings: :class:`Options`, over a C ``redlock_options``, and
:func:`default_options`."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref
from typing import Any, Callable

from . import _bindings as c
from . import _convert as convert
from ._errors import call, check
from ._ffi import lib
from ._managed import Managed

__all__ = ["Options", "default_options"]


def default_options() -> dict[str, int | float | bool | None]:
    """The library's default options, as the keyword arguments of :class:`Redlock` take them
    (durations in seconds)."""
    # The getters read NULL options as the defaults.
    return {
        "retry_count": lib.redlock_options_retry_count(None),
        "retry_delay": lib.redlock_options_retry_delay_ms(None) / 1000,
        "retry_jitter": lib.redlock_options_retry_jitter_ms(None) / 1000,
        "drift_factor": lib.redlock_options_drift_factor(None),
        "node_timeout": lib.redlock_options_node_timeout_ms(None) / 1000,
        "max_extensions": lib.redlock_options_max_extensions(None) or None,
        "restart_grace": (lib.redlock_options_restart_grace_ms(None) / 1000) or None,
        "clock_guard": bool(lib.redlock_options_clock_guard(None)),
        "clock_jump_threshold": lib.redlock_options_clock_jump_threshold_ms(None) / 1000,
        "clock_quarantine": lib.redlock_options_clock_quarantine_ms(None) / 1000,
        "strict_servers": bool(lib.redlock_options_strict_servers(None)),
        "min_replicas": lib.redlock_options_min_replicas(None) or None,
    }


class Options(Managed):
    """The C settings of one client, from :class:`Redlock`'s keyword arguments (``None``: the
    library's default; durations in seconds), each checked here; free it once the client is
    made."""

    _what = "options"

    def __init__(
        self,
        *,
        retry_count: int | None,
        retry_delay: convert.Seconds | None,
        retry_jitter: convert.Seconds | None,
        drift_factor: float | None,
        node_timeout: convert.Seconds | None,
        max_extensions: int | None,
        restart_grace: convert.Seconds | None,
        clock_guard: bool | None,
        clock_jump_threshold: convert.Seconds | None,
        clock_quarantine: convert.Seconds | None,
        strict_servers: bool | None,
        min_replicas: int | None,
        tls_ca_file: str | os.PathLike[str] | None,
        tls_client_cert_file: str | os.PathLike[str] | None,
        tls_client_key_file: str | os.PathLike[str] | None,
    ) -> None:
        if (tls_client_cert_file is None) != (tls_client_key_file is None):
            raise ValueError("tls_client_cert_file and tls_client_key_file go together")
        for name, flag in (("clock_guard", clock_guard), ("strict_servers", strict_servers)):
            if flag is not None:
                convert.flag(name, flag)
        if clock_guard is False and clock_jump_threshold is not None:
            raise ValueError("clock_jump_threshold has no effect with clock_guard=False")
        # C spells "no cap" as max_extensions 0 (and "off" as min_replicas 0); in Python that is
        # None, so 0 is refused.
        integers = (
            ("retry_count", retry_count, 0, convert.UINT32_MAX,
             lib.redlock_options_set_retry_count),
            ("max_extensions", max_extensions, 1, convert.UINT32_MAX,
             lib.redlock_options_set_max_extensions),
            ("min_replicas", min_replicas, 1, convert.UINT32_MAX,
             lib.redlock_options_set_min_replicas),
        )
        # Seconds for Python, milliseconds for C; bounds in milliseconds.
        durations = (
            ("retry_delay", retry_delay, 0, lib.redlock_options_set_retry_delay_ms),
            ("retry_jitter", retry_jitter, 0, lib.redlock_options_set_retry_jitter_ms),
            ("node_timeout", node_timeout, 1, lib.redlock_options_set_node_timeout_ms),
            ("restart_grace", restart_grace, 0, lib.redlock_options_set_restart_grace_ms),
            ("clock_jump_threshold", clock_jump_threshold, 0,
             lib.redlock_options_set_clock_jump_threshold_ms),
            ("clock_quarantine", clock_quarantine, 1, lib.redlock_options_set_clock_quarantine_ms),
        )
        # (setter, its arguments) for every setting given, all checked before any C call.
        settings: list[tuple[Callable[..., int], tuple[Any, ...]]] = [
            (setter, (convert.integer(name, value, low, high),))
            for name, value, low, high, setter in integers
            if value is not None
        ]
        settings += [
            (setter, (convert.millis(name, value, low, convert.MAX_TTL_MS),))
            for name, value, low, setter in durations
            if value is not None
        ]
        if drift_factor is not None:
            drift = convert.fraction("drift_factor", drift_factor, 0, True)
            settings.append((lib.redlock_options_set_drift_factor, (drift,)))
        if clock_guard is not None:
            settings.append((lib.redlock_options_set_clock_guard, (clock_guard,)))
        if strict_servers is not None:
            settings.append((lib.redlock_options_set_strict_servers, (strict_servers,)))
        if tls_ca_file is not None:
            ca = convert.path("tls_ca_file", tls_ca_file)
            settings.append((lib.redlock_options_set_tls_ca_file, (ca,)))
        if tls_client_cert_file is not None:
            certificate = convert.path("tls_client_cert_file", tls_client_cert_file)
            key = convert.path("tls_client_key_file", tls_client_key_file)
            settings.append((lib.redlock_options_set_tls_client_cert_file, (certificate, key)))
        out = c.redlock_options_p()
        err = c.redlock_error_p()
        check(lib.redlock_options_new(byref(out), byref(err)), err)
        super().__init__(out)
        try:
            for setter, args in settings:
                call(setter, out, *args)
        except BaseException:
            self.close()
            raise

    def _delete(self, pointer: Any, lib: ctypes.CDLL = lib) -> None:
        lib.redlock_options_free(pointer)
