"""Signed by default: with the tutorials' settings, a value someone else wrote is never unpickled.

The attacker is anyone who can write to memcached: they replace every entry of the site,
its cached pages included, with a pickle that creates a file when loaded, with one signed
under another site's key, or with the site's own values, tampered with. With no
signing setting (the tutorials' settings), Django and Flask both sign with a key derived
from ``SECRET_KEY``: every replaced entry is a miss, the pages are rebuilt, and the file
never appears. A value signed under ``SECRET_KEY_FALLBACKS`` is read during a rotation and
re-signed with the current key when next written; one under no known key is a miss.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from pathlib import Path

import pytest
from django.core.cache import caches
from django.test import Client, override_settings
from flask import Flask

from flask_mcache import MCache
from mcache import Codec
from mcache.contract.store import NO_VALUE
from mcache.errors import ConfigError
from mcache.model.signing import derived_key
from tests.reliability import site
from tests.reliability.test_corrupt_entries import stored_keys
from tests.reliability.test_security import TouchesAFile, raw_client
from tests.reliability.test_server_faults import django_settings

_NAMESPACES = count()


def fresh_namespace(framework: str) -> str:
    return f"sbd-{framework}-{next(_NAMESPACES)}"


Attack = Callable[[bytes], bytes]
"""What the attacker writes in place of an entry, given the entry's bytes."""


def overwrite_the_sites_entries(memcached_url: str, namespace: str, attack: Attack) -> int:
    """Replace every entry under ``namespace`` with what ``attack`` makes of it; return
    how many."""
    raw = raw_client(memcached_url)
    keys = [k for k in stored_keys(memcached_url.removeprefix("memcached://")) if namespace in k]
    for key in keys:
        raw.set(key, attack(raw.get(key) or b"\0"), 60)
    return len(keys)


def flip_the_last_bit(stored: bytes) -> bytes:
    return stored[:-1] + bytes([stored[-1] ^ 1])


def attacks(tmp_path: Path) -> tuple[Path, tuple[Attack, ...]]:
    """A file the attack would create, and the attacks: an unsigned pickle, a pickle signed
    under another site's SECRET_KEY (a foreign value), and the site's own values tampered."""
    evidence = tmp_path / "code-ran"
    payload = Codec("pickle").dumps(TouchesAFile(evidence), "k")
    foreign = Codec(signing_key=derived_key("another site's secret")).dumps(TouchesAFile(evidence))
    return evidence, (lambda _: payload, lambda _: foreign, flip_the_last_bit)


def replace_and_read(
    memcached_url: str,
    namespace: str,
    site_attacks: tuple[Attack, ...],
    get: Callable[[str, object], object],
    page: Callable[[], bytes],
) -> None:
    """Replace every entry of the site with each attack in turn: the value ``price`` reads
    as a miss, and the cached page is rebuilt (one more render), never read."""
    page()
    renders = len(site.renders)
    assert page().startswith(b"catalog") and len(site.renders) == renders, "a hit"
    for attack in site_attacks:
        assert overwrite_the_sites_entries(memcached_url, namespace, attack) >= 2
        assert get("price", None) is None
        assert page().startswith(b"catalog")
        assert len(site.renders) == renders + 1, "rebuilt, not read from the attacker"
        renders += 1


@pytest.mark.django_db
def test_django_never_unpickles_what_it_did_not_sign_with_the_tutorials_settings(
    memcached_url: str, tmp_path: Path
) -> None:
    evidence, site_attacks = attacks(tmp_path)
    namespace = fresh_namespace("dj")
    with override_settings(**django_settings(memcached_url, prefix=namespace)):
        cache, client = caches["default"], Client()
        cache.set("price", {"amount": 10}, 60)
        page = lambda: client.get("/catalog-long/").content  # noqa: E731
        replace_and_read(memcached_url, namespace, site_attacks, cache.get, page)
        assert not evidence.exists(), "an unsigned or foreign pickle ran"


@pytest.mark.django_db
def test_django_counters_stay_plain_integers_the_server_can_increment(
    memcached_url: str,
) -> None:
    namespace = fresh_namespace("dj")
    with override_settings(**django_settings(memcached_url, prefix=namespace)):
        cache = caches["default"]
        cache.set("hits", 5, 60)
        assert raw_client(memcached_url).get(cache.mcache.key(cache.make_key("hits"))) == b"5"
        assert cache.incr("hits") == 6


def django_rotation_settings(url: str, namespace: str, secret: str, fallbacks=()) -> dict:
    settings = django_settings(url, prefix=namespace)
    return {**settings, "SECRET_KEY": secret, "SECRET_KEY_FALLBACKS": list(fallbacks)}


@pytest.mark.django_db
def test_django_rotating_secret_key_keeps_the_cache_warm(memcached_url: str, caplog) -> None:
    namespace = fresh_namespace("dj")
    with override_settings(**django_rotation_settings(memcached_url, namespace, "old")):
        caches["default"].set("price", {"amount": 10}, 60)
        stored_key = caches["default"].mcache.key(caches["default"].make_key("price"))
    rotating = django_rotation_settings(memcached_url, namespace, "new", ["old"])
    with override_settings(**rotating):
        cache = caches["default"]
        assert cache.get("price") == {"amount": 10}, "a fallback key's value is served"
        cache.set("price", {"amount": 11}, 60)  # the next write signs with the current key
    rewritten = raw_client(memcached_url).get(stored_key)
    assert Codec(signing_key=derived_key("new")).loads(rewritten, stored_key) == {"amount": 11}
    assert Codec(signing_key=derived_key("old")).loads(rewritten, stored_key) is NO_VALUE
    with override_settings(**django_rotation_settings(memcached_url, namespace, "newer")):
        assert caches["default"].get("price") is None, "no known key signed it: a miss"
    assert "bad signature" in caplog.text


def flask_tutorial_app(url: str, namespace: str, **config: object) -> Flask:
    """The Flask tutorial's settings (its SECRET_KEY, no signing setting) on ``url``."""
    tutorial = {"SECRET_KEY": "dev", "MCACHE_STALE_TTL": 600}
    return site.flask_app(url, namespace, **{**tutorial, **config})


def test_flask_never_unpickles_what_it_did_not_sign_with_the_tutorials_settings(
    memcached_url: str, tmp_path: Path
) -> None:
    evidence, site_attacks = attacks(tmp_path)
    namespace = fresh_namespace("fl")
    app = flask_tutorial_app(memcached_url, namespace)
    cache, client = app.extensions["mcache"], app.test_client()
    cache.set("price", {"amount": 10})
    page = lambda: client.get("/catalog-long/").data  # noqa: E731
    replace_and_read(memcached_url, namespace, site_attacks, cache.get, page)
    assert not evidence.exists(), "an unsigned or foreign pickle ran"


def test_flask_rotating_secret_key_keeps_the_cache_warm(memcached_url: str) -> None:
    namespace = fresh_namespace("fl")
    old = flask_tutorial_app(memcached_url, namespace, SECRET_KEY="old").extensions["mcache"]
    old.set("price", {"amount": 10})
    rotating = flask_tutorial_app(
        memcached_url, namespace, SECRET_KEY="new", SECRET_KEY_FALLBACKS=["old"]
    ).extensions["mcache"]
    assert rotating.get("price", None) == {"amount": 10}, "a fallback key's value is served"
    rotating.set("price", {"amount": 11})
    assert old.get("price", None) is None, "the next write signed it with the current key"
    later = flask_tutorial_app(memcached_url, namespace, SECRET_KEY="newer").extensions["mcache"]
    assert later.get("price", None) is None, "no known key signed it: a miss"


def test_flask_without_a_secret_refuses_a_shared_store_naming_the_settings(
    memcached_url: str,
) -> None:
    app = Flask(__name__)
    app.config.update(MCACHE_URL=memcached_url, MCACHE_NAMESPACE=fresh_namespace("fl"))
    with pytest.raises(ConfigError) as refused:
        MCache(app)
    for setting in ("SECRET_KEY", "MCACHE_SIGNING_KEY", "MCACHE_TRUST_UNSIGNED_PICKLE"):
        assert setting in str(refused.value)
    for allowed in ({"MCACHE_URL": "memory://"}, {"MCACHE_SERIALIZER": "json"}):
        app = Flask(__name__)
        app.config.update({"MCACHE_URL": memcached_url, "MCACHE_NAMESPACE": "fl-ok", **allowed})
        MCache(app)  # an in-process store, or a serializer that runs no code: nothing to sign


def test_flask_trusting_unsigned_pickle_does_what_its_name_says(
    memcached_url: str, tmp_path: Path
) -> None:
    evidence, (unsigned, *_) = attacks(tmp_path)
    namespace = fresh_namespace("fl")
    app = flask_tutorial_app(memcached_url, namespace, MCACHE_TRUST_UNSIGNED_PICKLE=True)
    cache = app.extensions["mcache"]
    cache.set("price", {"amount": 10})
    overwrite_the_sites_entries(memcached_url, namespace, unsigned)
    cache.get("price")
    assert evidence.exists(), "the opt-out reads unsigned pickles, as its name says"
