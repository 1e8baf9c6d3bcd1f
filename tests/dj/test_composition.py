"""The new user's page: cached_view + cachedblock + background refresh, after a save.

The page and its fragments depend on the same model; the cache's OPTIONS ask
for background refreshes, as the README recommends. After ``Post.save()`` the
page may be served stale while it is rebuilt, but once rebuilt it holds the
new fragment and is a HIT, and no response after the save ever carries the
old fragment as fresh. Real memcached and Redis, a real refresher thread.
"""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.test import Client, override_settings

from tests.dj import views
from tests.dj.blog.models import Post

pytestmark = pytest.mark.django_db(transaction=True)  # the refresher thread reads committed rows


@pytest.fixture(params=["memcached", "redis"])
def site(request: pytest.FixtureRequest):
    url = request.getfixturevalue(f"{request.param}_url")
    cache = {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": url,
        "KEY_PREFIX": "newuser",
        "OPTIONS": {"refresh": "background"},  # blocks inherit it too
    }
    views.catalog_data["categories"] = "c1"
    views.renders.clear()
    with override_settings(CACHES={"default": cache}):
        yield Client()


def follow(client: Client, changed: str, old: str) -> list[tuple[str, str]]:
    """Request the page until it is a HIT again; return every (X-Cache, body) seen."""
    refresher = caches["default"].mcache.refresher
    seen: list[tuple[str, str]] = []
    for _ in range(6):
        response = client.get("/catalog/")
        seen.append((response["X-Cache"], response.content.decode()))
        if response["X-Cache"] == "HIT":
            break
        assert refresher.wait_idle(10), "the background rebuild never finished"
    fresh_with_old = [body for state, body in seen if state != "STALE" and old in body]
    assert not fresh_with_old, f"the old fragment served as fresh: {seen}"
    assert seen[-1][0] == "HIT" and changed in seen[-1][1], seen
    for _ in range(3):
        again = client.get("/catalog/")
        assert again["X-Cache"] == "HIT" and changed in again.content.decode()
    return seen


def test_a_save_reaches_the_fragment_inside_the_page(site: Client) -> None:
    post = Post.objects.create(title="a")
    assert site.get("/catalog/")["X-Cache"] == "MISS"
    assert site.get("/catalog/").content.decode() == "titles:a;|categories:c1"
    post.title = "b"
    post.save()
    seen = follow(site, changed="titles:b;", old="titles:a;")
    assert len(seen) <= 3, "stale once, then the rebuilt page"


def test_invalidating_a_tag_only_the_fragment_declares_reaches_the_page(site: Client) -> None:
    Post.objects.create(title="a")
    site.get("/catalog/")
    assert site.get("/catalog/")["X-Cache"] == "HIT"
    views.catalog_data["categories"] = "c2"
    caches["default"].invalidate("categories")  # the page itself never names this tag
    follow(site, changed="categories:c2", old="categories:c1")


def readers_during_a_rebuild(client: Client, path: str, tag: str) -> tuple[str, str]:
    """Make ``path`` stale, start its rebuild in a thread, then read it; return (state, body)."""
    import threading
    import time

    client.get(path)
    caches["default"].invalidate(tag)
    rebuild = threading.Thread(target=lambda: Client().get(path))
    rebuild.start()
    time.sleep(0.1)  # the rebuild (0.3 s) is under way
    response = client.get(path)
    rebuild.join(10)
    return response["X-Cache"], response.content.decode()


def test_cached_view_stale_wait_serves_the_rebuilt_page(site: Client) -> None:
    state, body = readers_during_a_rebuild(site, "/patient/", "patient")
    assert (state, body) == ("HIT", "patient 2"), "it waited for the new page"


@pytest.mark.parametrize(
    ("stale_wait", "expected"), [(0, ("STALE", "slow 1")), (5, ("HIT", "slow 2"))]
)
def test_the_caches_stale_wait_option(memcached_url: str, stale_wait: float, expected) -> None:
    views.renders.clear()
    cache = {
        "BACKEND": "django_mcache.backend.MCacheBackend",
        "LOCATION": memcached_url,
        "KEY_PREFIX": f"wait{stale_wait}",
        "OPTIONS": {"stale_wait": stale_wait},
    }
    with override_settings(CACHES={"default": cache}):
        assert readers_during_a_rebuild(Client(), "/slow/", "slow") == expected
