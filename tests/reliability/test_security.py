"""Security: private pages stay private, signed values resist tampering, sites stay apart.

Two visitors, each with their own client, ask for the same URL; whatever makes
a page private (a signed-in user, ``Set-Cookie``, ``Authorization``,
``Cache-Control: private/no-store``, ``Vary: Cookie``), the second never gets
the first one's page, in Django or in Flask. A page shared with signed-in
visitors through holes fills each visitor's hole for them alone, and one whose
per-visitor part was left outside a hole is bypassed, never shared.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.cache import caches
from django.test import Client, override_settings
from pymemcache.client.base import Client as RawClient

from mcache import Cache, Codec
from tests.reliability import site
from tests.reliability.test_corrupt_entries import stored_keys
from tests.reliability.test_server_faults import django_settings

KINDS = ["set_cookie", "authorization", "cc_private", "cc_no_store", "vary_cookie", "signed_in"]
HOLE_KINDS = ["in_hole", "outside_hole"]
"""Pages shared with signed-in visitors, the name in a hole or (forgotten) outside one."""


def headers_for(kind: str, user: str) -> dict[str, str]:
    headers = {"X-User": user}
    if kind == "authorization":
        headers["Authorization"] = f"Bearer token-of-{user}"
    return headers


@pytest.mark.django_db
@pytest.mark.parametrize("kind", KINDS)
def test_django_never_serves_one_visitors_private_page_to_another(
    kind: str, memcached_url: str
) -> None:
    with override_settings(**django_settings(memcached_url, prefix=f"sec{kind}")):
        visitors = {name: Client() for name in ("alice", "bob", "carol")}
        if kind == "signed_in":
            for name in ("alice", "bob"):
                visitors[name].force_login(User.objects.create(username=name))
        if kind == "vary_cookie":
            for name, client in visitors.items():
                client.cookies["sessionid"] = f"session-of-{name}"
        for name in ("alice", "bob", "alice", "bob"):
            django_headers = {
                f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers_for(kind, name).items()
            }
            page = visitors[name].get(f"/private/{kind}/", **django_headers)
            assert page.content == f"page of {name}".encode(), kind
        anonymous = visitors["carol"].get(f"/private/{kind}/")
        assert b"alice" not in anonymous.content and b"bob" not in anonymous.content


@pytest.mark.parametrize("kind", KINDS)
def test_flask_never_serves_one_visitors_private_page_to_another(
    kind: str, memcached_url: str
) -> None:
    app = site.flask_app(memcached_url, namespace=f"sec{kind}")
    visitors = {name: app.test_client() for name in ("alice", "bob", "carol")}
    for name, client in visitors.items():
        if kind == "signed_in" and name != "carol":
            with client.session_transaction() as session:
                session["user"] = name
        if kind == "vary_cookie":  # not Flask's session cookie: the Vary rule must catch it
            client.set_cookie("theme", f"theme-of-{name}")
    for name in ("alice", "bob", "alice", "bob"):
        page = visitors[name].get(f"/private/{kind}/", headers=headers_for(kind, name))
        assert page.data == f"page of {name}".encode(), kind
    anonymous = visitors["carol"].get(f"/private/{kind}/")
    assert b"alice" not in anonymous.data and b"bob" not in anonymous.data


@pytest.mark.django_db
@pytest.mark.parametrize("kind", HOLE_KINDS)
def test_django_never_fills_one_visitors_hole_into_anothers_page(
    kind: str, memcached_url: str
) -> None:
    with override_settings(**django_settings(memcached_url, prefix=f"sec{kind}")):
        visitors = {name: Client() for name in ("alice", "bob", "carol")}
        for name in ("alice", "bob"):
            visitors[name].force_login(User.objects.create(username=name))
        seen = [visitors["carol"].get(f"/holes/{kind}/")]
        for name in ("alice", "bob", "alice", "bob"):
            page = visitors[name].get(f"/holes/{kind}/")
            assert page.content == f"page of {name}".encode(), kind
            seen.append(page)
        anonymous = visitors["carol"].get(f"/holes/{kind}/")
        assert anonymous.content == b"page of ", kind
    states = [page["X-Cache"] for page in seen]
    expected = ["MISS"] + (["HIT"] * 4 if kind == "in_hole" else ["BYPASS"] * 4)
    assert states == expected, "a forgotten hole costs hits, never a leak"


@pytest.mark.parametrize("kind", HOLE_KINDS)
def test_flask_never_fills_one_visitors_hole_into_anothers_page(
    kind: str, memcached_url: str
) -> None:
    app = site.flask_app(memcached_url, namespace=f"sec{kind}")
    visitors = {name: app.test_client() for name in ("alice", "bob", "carol")}
    for name in ("alice", "bob"):
        with visitors[name].session_transaction() as session:
            session["user"] = name
    seen = [visitors["carol"].get(f"/holes/{kind}/")]
    for name in ("alice", "bob", "alice", "bob"):
        page = visitors[name].get(f"/holes/{kind}/")
        assert page.data == f"page of {name}".encode(), kind
        seen.append(page)
    assert visitors["carol"].get(f"/holes/{kind}/").data == b"page of ", kind
    states = [page.headers["X-Cache"] for page in seen]
    expected = ["MISS"] + (["HIT"] * 4 if kind == "in_hole" else ["BYPASS"] * 4)
    assert states == expected, "a forgotten hole costs hits, never a leak"


@pytest.mark.django_db
def test_the_control_an_ordinary_page_is_shared_so_the_cases_above_can_fail(
    memcached_url: str,
) -> None:
    """The key ignores X-User: without a private marker, bob gets alice's page."""
    with override_settings(**django_settings(memcached_url, prefix="secpublic")):
        assert Client().get("/private/public/", HTTP_X_USER="alice").content == b"page of alice"
        shared = Client().get("/private/public/", HTTP_X_USER="bob")
        assert (shared.content, shared["X-Cache"]) == (b"page of alice", "HIT")
    app = site.flask_app(memcached_url, namespace="secpublic")
    assert app.test_client().get("/private/public/", headers={"X-User": "alice"}).data == (
        b"page of alice"
    )
    shared = app.test_client().get("/private/public/", headers={"X-User": "bob"})
    assert (shared.data, shared.headers["X-Cache"]) == (b"page of alice", "HIT")


# -- signed values -----------------------------------------------------------------------------


def raw_client(memcached_url: str) -> RawClient:
    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    return RawClient((host, int(port)), default_noreply=False)


@pytest.mark.django_db
def test_a_signed_entry_modified_or_swapped_in_the_store_is_a_logged_miss(
    memcached_url: str, caplog
) -> None:
    settings = django_settings(memcached_url, prefix="signed", signing_key="s3cret")
    raw = raw_client(memcached_url)
    with override_settings(**settings), caplog.at_level(logging.WARNING, logger="mcache"):
        cache = caches["default"]
        cache.set("price", {"amount": 10}, 60)
        cache.set("discount", {"amount": 99}, 60)
        core = cache.mcache
        keys = {name: core.key(cache.make_key(name)) for name in ("price", "discount")}
        assert set(keys.values()) <= set(stored_keys(memcached_url.removeprefix("memcached://")))
        price, discount = raw.get(keys["price"]), raw.get(keys["discount"])
        tampered = price[:-1] + bytes([price[-1] ^ 1])
        raw.set(keys["price"], tampered, 60)
        assert cache.get("price") is None, "a flipped bit is rejected"
        raw.set(keys["price"], discount, 60)
        assert cache.get("price") is None, "another key's signed value is rejected"
        assert caplog.text.count("bad signature") >= 1, caplog.text
        assert cache.get("discount") == {"amount": 99}, "an untouched value still reads"


class TouchesAFile:
    """A pickle that runs code when loaded: it creates the file it names."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (self.path,))


def test_pickle_from_the_cache_runs_code_unless_signed_or_not_pickle(
    memcached_url: str, tmp_path: Path
) -> None:
    evidence = tmp_path / "code-ran"
    attacker = Codec("pickle")  # what anyone who can write to memcached can produce
    payload = attacker.dumps(TouchesAFile(evidence), "k")
    for name, codec in {
        "signed pickle": Codec("pickle", signing_key="s3cret"),
        "json": Codec("json"),
        "msgpack": Codec("msgpack"),
    }.items():
        cache = Cache(memcached_url, namespace=name.replace(" ", ""), codec=codec)
        raw_client(memcached_url).set(cache.key("k"), payload, 60)
        assert cache.get("k", "a miss") == "a miss", f"{name}: the attacker's value was read"
        assert not evidence.exists(), f"{name}: the attacker's pickle ran"
    plain = Cache(memcached_url, namespace="plain")
    raw_client(memcached_url).set(plain.key("k"), payload, 60)
    plain.get("k")
    assert evidence.exists(), "the default pickle codec runs what the cache holds (README)"


# -- isolation -----------------------------------------------------------------------------------


def test_two_sites_on_one_pool_never_see_each_others_entries_tags_or_counters(
    memcached_cluster_url: str,
) -> None:
    shop, blog = (
        Cache(memcached_cluster_url, namespace="shop"),
        Cache(memcached_cluster_url, namespace="blog"),
    )
    for cache, value in ((shop, "shop home"), (blog, "blog home")):
        cache.set("home", value)
        cache.get_or_build("page", lambda v=value: v, tags=["posts"])
        cache.counter("visits").incr(5 if cache is shop else 1)
    assert (shop.get("home"), blog.get("home")) == ("shop home", "blog home")
    shop.invalidate("posts")
    assert shop.get_or_build("page", lambda: "rebuilt", tags=["posts"]) == "rebuilt"
    assert blog.get_or_build("page", lambda: "rebuilt", tags=["posts"]) == "blog home"
    assert (shop.counter("visits").value(), blog.counter("visits").value()) == (5, 1)
    with shop.lock("nightly", timeout=5), blog.lock("nightly", timeout=5, wait=0):
        pass  # the same lock name in two sites: two locks
    blog.delete("home")
    assert shop.get("home") == "shop home"
