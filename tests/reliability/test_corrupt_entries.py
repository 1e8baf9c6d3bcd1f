"""Bytes mcache did not write, under its keys: read as misses, logged, overwritten.

Garbage, a truncated entry, another client's values (a Django ``PyMemcacheCache``
pickle, a bare counter) are written straight into memcached under the keys a
Django page, a Flask page and a ``get_or_set`` value live at. The next request
renders the page (never a 500), logs once, and stores a good entry again. A
value over memcached's item limit is served and simply not cached.
"""

from __future__ import annotations

import logging
import pickle
import secrets
import socket
import time
import urllib.parse

import pytest
from django.core.cache import caches
from django.test import Client, override_settings
from pymemcache.client.base import Client as RawClient

from tests.reliability import site
from tests.reliability.test_server_faults import django_settings

FOREIGN = {
    "garbage": lambda good: b"\x00\xff not an mcache entry \x13",
    "truncated": lambda good: good[: len(good) // 2],
    "django pickle": lambda good: pickle.dumps({"page": "someone else's"}),
    "a counter": lambda good: b"12345",
    "empty": lambda good: b"",
}


def stored_keys(address: str) -> list[str]:
    """Every key memcached holds, from ``lru_crawler metadump all``."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(b"lru_crawler metadump all\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    return [
        urllib.parse.unquote(line.split()[0].removeprefix(b"key=").decode())
        for line in data.splitlines()
        if line.startswith(b"key=")
    ]


def entry_keys(address: str, namespace: str) -> list[str]:
    """The cache entries of ``namespace`` (not its tags, locks or statistics)."""
    return [
        k
        for k in stored_keys(address)
        if k.startswith(f"{namespace}:")
        and not k.startswith((f"{namespace}:t:", f"{namespace}:s:"))
    ]


@pytest.mark.django_db
@pytest.mark.parametrize("kind", list(FOREIGN))
def test_foreign_bytes_under_a_page_key_are_a_logged_miss_then_overwritten(
    kind: str, memcached_url: str, caplog
) -> None:
    address = memcached_url.removeprefix("memcached://")
    host, port = address.rsplit(":", 1)
    raw = RawClient((host, int(port)), default_noreply=False)
    mine = "".join(c for c in kind if c.isalpha())  # fresh caches: their logs are not rate-limited
    app = site.flask_app(memcached_url, namespace=f"fl{mine}")
    with override_settings(**django_settings(memcached_url, prefix=f"dj{mine}")):
        pages = {
            f"dj{mine}": lambda: Client().get("/catalog-long/"),
            f"fl{mine}": lambda: app.test_client().get("/catalog-long/"),
        }
        value = caches["default"].get_or_set("value", lambda: {"answer": 42}, 60)
        for fetch in pages.values():
            assert fetch().status_code == 200
        for namespace in pages:
            keys = entry_keys(address, namespace)
            assert any(":view." in k for k in keys), f"no page of {namespace} found"
            for key in keys:
                raw.set(key, FOREIGN[kind](raw.get(key) or b""), 60)
        renders = len(site.renders)
        with caplog.at_level(logging.WARNING, logger="mcache"):
            for namespace, fetch in pages.items():
                response = fetch()
                body = response.content if hasattr(response, "content") else response.data
                assert (response.status_code, body) == (200, b"catalog v1"), namespace
                assert response.headers["X-Cache"] == "MISS", "the damaged page was not used"
            again = caches["default"].get_or_set("value", lambda: {"answer": 42}, 60)
        assert len(site.renders) == renders + 2, "both pages rendered anew"
        if kind == "a counter":  # a decimal is an int to mcache (incr needs that): not foreign
            assert again == 12345
        else:
            assert again == value
        logged = caplog.text.count("as a miss") + caplog.text.count("held no page")
        if kind == "empty":  # what memcached's own lease placeholder holds: a miss, unlogged
            assert logged == 0, caplog.text
        elif kind != "a counter":  # a plain int reads as a value set without tags: rebuilt
            assert logged >= 2, caplog.text
        renders = len(site.renders)
        for fetch in pages.values():
            assert fetch().status_code == 200
        assert len(site.renders) == renders, "the next request is a hit: the entry was rewritten"


@pytest.mark.django_db
@pytest.mark.parametrize("serializer", ["pickle", "msgpack", "json"])
def test_pages_are_hits_whatever_the_serializer(serializer: str, memcached_url: str) -> None:
    app = site.flask_app(memcached_url, namespace=f"fl{serializer}", MCACHE_SERIALIZER=serializer)
    settings = django_settings(memcached_url, prefix=f"dj{serializer}", serializer=serializer)
    with override_settings(**settings):
        assert [Client().get("/catalog/")["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]
        client = app.test_client()
        assert [client.get("/catalog/").headers["X-Cache"] for _ in range(2)] == ["MISS", "HIT"]
        url = "/echo/" + urllib.parse.quote("ключ €")  # non-ASCII bytes in the body
        pages = [Client().get(url) for _ in range(2)]
        assert [p["X-Cache"] for p in pages] == ["MISS", "HIT"]
        assert pages[0].content == pages[1].content and "ключ €".encode() in pages[1].content
        pages = [client.get(url) for _ in range(2)]
        assert pages[0].data == pages[1].data and "ключ €".encode() in pages[1].data


@pytest.mark.django_db
@pytest.mark.parametrize("protocol", ["meta", "text"])
def test_a_page_over_the_item_limit_is_served_and_not_cached(
    protocol: str, memcached_url: str, caplog
) -> None:
    """Too large is too large: the page is served, answered BYPASS with the reason
    too-large (never store-down: the server is up), counted as too large and not as a
    store error, and logged once per interval, every interval it happens."""
    url = f"{memcached_url}?protocol={protocol}"
    site.CATALOG["size"] = 3 * 1024 * 1024  # random hex: still over 1 MiB compressed
    app = site.flask_app(url, namespace=f"flbig{protocol}")
    settings = django_settings(url, prefix=f"djbig{protocol}")
    with override_settings(**settings), caplog.at_level(logging.WARNING):
        django, flask = Client(), app.test_client()
        for fetch in (lambda: django.get("/catalog/"), lambda: flask.get("/catalog/")):
            first, second = fetch(), fetch()
            assert len(first.content if hasattr(first, "content") else first.data) > 3 * 2**20
            for page in (first, second):
                headers = page.headers
                assert (headers["X-Cache"], headers["X-Cache-Reason"]) == ("BYPASS", "too-large")
                assert headers["Cache-Status"] == "mcache; fwd=bypass; detail=too-large"
        counted = caches["default"].mcache.stats()["cache"]
        assert counted["too_large"] == 2 and counted["store_errors"] == 0, counted
    assert len(site.renders) == 4, "rendered every time: never cached"
    too_large = [r for r in caplog.records if "not cached" in r.getMessage()]
    assert len(too_large) == 2, "logged once in each cache"


def test_a_value_too_large_is_logged_again_each_interval(memcached_url: str, caplog) -> None:
    from mcache import Cache
    from mcache.logs import FailureLog

    cache = Cache(memcached_url, failure_log=FailureLog(interval=1.5))
    huge = lambda: secrets.token_bytes(2 * 2**20)  # noqa: E731 - incompressible
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            cache.get_or_build("big", huge, ttl=60)  # within one interval: logged once
        time.sleep(1.6)
        cache.get_or_build("big", huge, ttl=60)  # the next interval: logged again
        cache.set("big", huge(), 60)  # a plain set too, within that interval
    logged = [r for r in caplog.records if "not cached" in r.getMessage()]
    assert len(logged) == 2, caplog.text
    assert "2 more like it" in logged[1].getMessage()
    assert cache.stats()["cache"]["too_large"] == 5
