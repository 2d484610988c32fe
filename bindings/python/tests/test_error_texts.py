"""The texts of the common errors, as a user reads them: the same words as in every language
(they come from the library), checked here through Python."""

from __future__ import annotations

import pytest
from redis_nodes import assert_on_nodes

import redquorum


def test_a_ttl_out_of_range_names_its_range_in_words(make_client, resource):
    rl = make_client()
    for ttl, got in [(0, "got 0 ms: below the minimum"), (0.002, "got 2 ms: below the minimum")]:
        with pytest.raises(ValueError) as raised:
            rl.try_lock(resource, ttl=ttl)
        text = str(raised.value)
        assert "ttl must be at least 3 ms (with drift_factor 0.01) and at most 10 years" in text
        assert got in text, text
        assert "..=" not in text


def test_a_bad_url_says_what_is_wrong_without_quoting_a_password():
    for url, why in [
        ("redis://host:notaport", "invalid port number"),
        ("localhost:6379", "it does not start with redis:// or rediss://"),
        ("redis://:secret@", "no host"),
    ]:
        with pytest.raises(ValueError) as raised:
            redquorum.Redlock([url])
        text = str(raised.value)
        assert f"not a usable Redis URL: {why}" in text, text
        assert "secret" not in text and "InvalidClientConfig" not in text, text


def test_a_held_lock_gives_the_tally_with_the_nodes_named(make_client, nodes, urls, resource):
    holder, other = make_client(), make_client()
    with holder.lock(resource, ttl=10) as held:
        # A lock call returns on a quorum: every node refuses another owner only once the
        # holder's SET has landed there too.
        assert_on_nodes(nodes, resource, held.token)
        with pytest.raises(redquorum.NotAcquired) as raised:
            other.try_lock(resource, ttl=10)
    text = str(raised.value)
    n = len(urls)
    assert (
        "not acquired after 1 attempt(s), held by another owner; the last attempt: 0 granted, "
        in text
    )
    assert f"of {n} nodes (quorum {n // 2 + 1}) [" in text and "refused: " in text, text
    for url in urls:
        address = url.removeprefix("redis://")
        assert text.count(address) == 1, (address, text)
