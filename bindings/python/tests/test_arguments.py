"""Bad arguments are refused with ValueError or TypeError, in Python or by the library."""

from __future__ import annotations

import math

import pytest
from redis_nodes import PATIENT, assert_on_nodes

import redquorum
from redquorum._client import MAX_NODE_URL_BYTES
from redquorum._request import MAX_RESOURCE_NAME_BYTES

TEN_YEARS = 315_360_000  # seconds: the longest TTL


@pytest.mark.parametrize(
    "nodes, error",
    [
        ("redis://127.0.0.1:6379", TypeError),  # a str is iterable, but not a list of URLs
        (b"redis://127.0.0.1:6379", TypeError),
        (None, TypeError),
        (6379, TypeError),
        ([], ValueError),
        ([6379], TypeError),
        ([b"redis://127.0.0.1:6379"], TypeError),
        ([""], ValueError),
        (["redis://127.0.0.1:6379\0"], ValueError),
        (["not a url"], ValueError),
        (["redis://"], ValueError),
        (["redis://127.0.0.1:notaport"], ValueError),
        (["http://127.0.0.1:6379"], ValueError),
    ],
    ids=repr,
)
def test_bad_nodes(nodes, error):
    with pytest.raises(error) as refused:
        redquorum.Redlock(nodes)
    assert str(refused.value)


def test_bad_url_among_good_ones(urls):
    with pytest.raises(ValueError, match=r"\S"):
        redquorum.Redlock(urls[:2] + ["not a url"])


BAD_OPTIONS = [
    ("retry_count", True, TypeError),
    ("retry_count", 1.5, TypeError),
    ("retry_count", "3", TypeError),
    ("retry_count", -1, ValueError),
    ("retry_count", 2**32, ValueError),
    ("retry_delay", -0.001, ValueError),
    ("retry_delay", 2**64, ValueError),
    ("retry_delay", False, TypeError),
    ("retry_delay", "0.2", TypeError),
    ("retry_jitter", -1, ValueError),
    ("retry_jitter", math.inf, ValueError),
    ("drift_factor", math.nan, ValueError),
    ("drift_factor", math.inf, ValueError),
    ("drift_factor", -0.1, ValueError),
    ("drift_factor", 1.0, ValueError),
    ("drift_factor", True, TypeError),
    ("drift_factor", "0.01", TypeError),
    ("node_timeout", 0, ValueError),
    ("node_timeout", 0.0004, ValueError),  # rounds to 0 ms
    ("node_timeout", -5, ValueError),
    ("node_timeout", math.nan, ValueError),
    ("node_timeout", True, TypeError),
    ("max_extensions", 0, ValueError),  # "no cap" is None, not 0
    ("max_extensions", -1, ValueError),
    ("max_extensions", 2**32, ValueError),
    ("max_extensions", True, TypeError),
    ("restart_grace", -1, ValueError),
    ("restart_grace", TEN_YEARS + 0.001, ValueError),
    ("restart_grace", True, TypeError),
    ("restart_grace", b"1", TypeError),
]


@pytest.mark.parametrize("name, value, error", BAD_OPTIONS, ids=repr)
def test_bad_options(urls, name, value, error):
    with pytest.raises(error, match=name):
        redquorum.Redlock(urls, **{name: value})


def test_options_are_keyword_only(urls):
    with pytest.raises(TypeError):
        redquorum.Redlock(urls, 3)  # type: ignore[misc]
    with pytest.raises(TypeError):
        redquorum.Redlock(urls, retries=3)  # type: ignore[call-arg]


@pytest.mark.parametrize(
    "name",
    [
        "retry_delay_ms",
        "retry_jitter_ms",
        "node_timeout_ms",
        "restart_grace_ms",
        "clock_jump_threshold_ms",
        "clock_quarantine_ms",
    ],
)
def test_options_take_seconds_only(urls, name):
    # Every duration is in seconds: a millisecond name is an unknown keyword, never a second
    # spelling of the same option.
    with pytest.raises(TypeError, match=name):
        redquorum.Redlock(urls, **{name: 100})
    with redquorum.Redlock(urls, **{name.removesuffix("_ms"): 0.1}) as rl:
        assert not rl.closed


BAD_RESOURCES = [
    ("", ValueError),
    ("a\0b", ValueError),
    ("\ud800", ValueError),  # a lone surrogate has no UTF-8 form
    (None, TypeError),
    (b"orders:42", TypeError),
    (42, TypeError),
]

BAD_TTLS = [
    (0, ValueError),
    (0.0004, ValueError),  # rounds to 0 ms
    (-1, ValueError),
    (TEN_YEARS + 0.001, ValueError),
    (2**64, ValueError),
    (math.nan, ValueError),
    (math.inf, ValueError),
    (True, TypeError),
    ("10", TypeError),
    (None, TypeError),
]


@pytest.fixture(scope="module")
def client(cluster):
    with redquorum.Redlock([node.url for node in cluster], node_timeout=PATIENT) as rl:
        yield rl


@pytest.mark.parametrize("method", ["lock", "try_lock"])
@pytest.mark.parametrize("resource, error", BAD_RESOURCES, ids=repr)
def test_bad_resource(client, method, resource, error):
    with pytest.raises(error, match="resource"):
        getattr(client, method)(resource, ttl=10)


@pytest.mark.parametrize("method", ["lock", "try_lock"])
@pytest.mark.parametrize("ttl, error", BAD_TTLS, ids=repr)
def test_bad_ttl(client, resource, method, ttl, error):
    with pytest.raises(error, match="ttl"):
        getattr(client, method)(resource, ttl=ttl)


@pytest.mark.parametrize("ttl", [0.001, 0.002])
def test_ttl_too_small_for_any_validity(client, resource, ttl):
    # Passes the Python checks; the library refuses it with its own message.
    with pytest.raises(ValueError, match=r"\S"):
        client.try_lock(resource, ttl=ttl)


def test_longest_ttl_is_accepted(client, resource):
    client.try_lock(resource, ttl=TEN_YEARS).release()


@pytest.mark.parametrize("ttl, error", BAD_TTLS, ids=repr)
def test_bad_extend(client, resource, ttl, error):
    with client.try_lock(resource, ttl=10) as lock:
        with pytest.raises(error, match="ttl"):
            lock.extend(ttl=ttl)
        assert lock.validity > 0  # a refused extend leaves the lock alone


def test_unicode_resource_round_trips(nodes, client, resource):
    name = resource + ":zamówienie:注文"
    with client.try_lock(name, ttl=10) as lock:
        assert lock.resource == name
        assert_on_nodes(nodes, name, lock.token)


def urls_with_secrets() -> list[str]:
    """Node URLs with each character that ends a part of a URL or changes its meaning, and a
    space, in the user, the password and ``sentinel_password``; the secrets are ``L3FT`` and
    ``R1GHT``. The text before a character in the user names this machine, should a URL parse
    with it as the host."""
    urls = []
    for c in "#/?&@:%+ ":
        for scheme, path in (("redis", ""), ("redis+sentinel", "/m"), ("redis+cluster", "")):
            urls.append(f"{scheme}://localhost{c}x:L3FT-R1GHT@127.0.0.1:1{path}")
            urls.append(f"{scheme}://u:L3FT{c}R1GHT@127.0.0.1:1{path}")
        urls.append(
            f"redis+sentinel://127.0.0.1:1/m?sentinel_user=u&sentinel_password=L3FT{c}R1GHT"
        )
        urls.append(
            f"redis+sentinel://127.0.0.1:1/m?sentinel_password=L3FT{c}R1GHT&sentinel=127.0.0.1:2"
        )
    return urls


def test_no_secret_shows_whatever_characters_it_holds():
    refused, leaks = 0, []
    for url in urls_with_secrets():
        try:
            rl = redquorum.Redlock([url])
        except ValueError as e:
            refused += 1
            shown = str(e)
        else:
            with rl:
                shown = " ".join(repr(status) for status in rl.node_status())
        if "L3FT" in shown or "R1GHT" in shown:
            leaks.append(f"{url}: shows {shown}")
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks)
    assert refused > 20


def test_resource_names_and_urls_are_capped_in_bytes(client):
    most = MAX_RESOURCE_NAME_BYTES
    at_cap = "é" * (most // 2)  # two bytes each in UTF-8
    redquorum.Request(at_cap, ttl=10).close()
    over = at_cap + "r"
    for attempt in (
        lambda: redquorum.Request(over, ttl=10),
        lambda: redquorum.Request(resources=["r", over], ttl=10),
        lambda: client.try_lock(over, ttl=10),
        lambda: client.inspect(over),
        lambda: client.force_release(over),
    ):
        with pytest.raises(ValueError, match=f"{most + 1} bytes.*{most}") as refused:
            attempt()
        assert "éé" not in str(refused.value)
    huge = "redis://" + "h" * (1 << 20) + ":1"  # a host of 1 MiB
    with pytest.raises(ValueError, match=f"{len(huge)} bytes.*{MAX_NODE_URL_BYTES}") as refused:
        redquorum.Redlock([huge])
    assert len(str(refused.value)) < 300
