"""Django under async: the backend's ``a*`` methods and ``@cached_view`` on ``async def`` views.

What is counted here is thread hops: Django's defaults run the sync method in
a thread (``sync_to_async``), which these replace. The whole request under
ASGI still passes Django's ``MiddlewareMixin`` middleware, which Django runs
through ``sync_to_async`` itself; what is held to "no hop" is mcache's part
(the backend call, the decorator on a hit).
"""

from __future__ import annotations

import asyncio
from typing import Any

import django
import pytest
from asgiref.sync import SyncToAsync, sync_to_async
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.models import User
from django.contrib.sessions.middleware import SessionMiddleware
from django.core.cache import caches
from django.http import HttpRequest, HttpResponse
from django.test import Client, RequestFactory, override_settings
from django.utils.decorators import method_decorator
from django.views import View

from django_mcache.views import cached_view

BACKEND = "django_mcache.backend.MCacheBackend"
renders: list[str] = []
needs_auser = pytest.mark.skipif(
    django.VERSION < (5, 0),
    reason="request.auser() is Django 5.0+: on 4.2 a hit's signed-in check takes a thread",
)


@pytest.fixture(params=["memory", "redis", "memcached"])
def location(request: pytest.FixtureRequest) -> str:
    if request.param == "memory":
        return "memory://"
    return request.getfixturevalue(f"{request.param}_url")


@pytest.fixture
def cache(location: str) -> Any:
    setting = {"default": {"BACKEND": BACKEND, "LOCATION": location, "KEY_PREFIX": "async"}}
    with override_settings(CACHES=setting):
        backend = caches["default"]
        backend.clear()
        renders.clear()
        yield backend


def forbid_hops(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record, and refuse, every thread hop: executors and ``sync_to_async`` alike."""
    hops: list[Any] = []

    def refuse_executor(loop: Any, executor: Any, function: Any, *args: Any) -> Any:
        hops.append(function)
        raise AssertionError(f"thread hop: {function!r}")

    async def refuse_sync_to_async(self: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(self.func)
        raise AssertionError(f"sync_to_async: {self.func!r}")

    monkeypatch.setattr(asyncio.BaseEventLoop, "run_in_executor", refuse_executor)
    monkeypatch.setattr(SyncToAsync, "__call__", refuse_sync_to_async)
    return hops


async def closed(cache: Any, result: Any) -> Any:
    """Return ``result`` once this loop's client of the store's twin is closed."""
    twin = cache.mcache.store.asynchronous()
    if twin is not None:
        await twin.close()
    return result


def test_the_backends_async_methods_make_no_thread_hop(
    cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    hops = forbid_hops(monkeypatch)

    async def calls() -> list[Any]:
        await cache.aset("k", "v")
        await cache.aset_many({"a": 1, "b": 2})
        return await closed(
            cache,
            [
                await cache.aget("k"),
                await cache.aget("missing", "default"),
                await cache.ahas_key("k"),
                await cache.aadd("k", "other"),
                await cache.aget_many(["a", "b", "missing"]),
                await cache.aincr("a", 10),
                await cache.adecr("a", 4),
                await cache.atouch("b", 30),
                await cache.adelete("b"),
                await cache.adelete_many(["a"]),
                await cache.aget_or_set("k", lambda: "not built: a hit"),
            ],
        )

    assert asyncio.run(calls()) == [
        "v", "default", True, False, {"a": 1, "b": 2}, 11, 7, True, True, None, "v",
    ]  # fmt: skip
    assert hops == []
    with pytest.raises(ValueError, match="not found"):
        asyncio.run(cache.aincr("missing"))


def test_aget_or_set_awaits_a_coroutine_and_counts_a_number(cache: Any) -> None:
    builds: list[int] = []

    async def build() -> int:
        builds.append(1)
        return 41

    async def calls() -> list[Any]:
        first = await cache.aget_or_set("n", build, 60)
        second = await cache.aget_or_set("n", build, 60)
        return await closed(cache, [first, second, await cache.aincr("n")])

    assert asyncio.run(calls()) == [41, 41, 42]
    assert builds == [1]


# -- @cached_view on async views -----------------------------------------------------------------


@cached_view(ttl=60, tags=["async-hit"])
async def anyones_page(request: HttpRequest) -> HttpResponse:
    renders.append("anyone")
    return HttpResponse(f"page {len(renders)}")


@cached_view(ttl=60, per_user=True)
async def own_page(request: HttpRequest) -> HttpResponse:
    if hasattr(request, "auser"):
        name = (await request.auser()).username
    else:  # Django 4.2
        name = await sync_to_async(lambda: request.user.username)()
    renders.append(name)
    return HttpResponse(f"page of {name}")


def prepared(request: HttpRequest) -> HttpRequest:
    """Give ``request`` the session and user that Django's middleware would have."""
    SessionMiddleware(lambda r: HttpResponse()).process_request(request)
    AuthenticationMiddleware(lambda r: HttpResponse()).process_request(request)
    return request


def miss_then_hit(
    cache: Any, view: Any, path: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[HttpResponse, HttpResponse, list[Any]]:
    """Request ``path`` twice, the second time refusing thread hops; return both and the hops."""
    factory = RequestFactory()
    first = asyncio.run(view(prepared(factory.get(path))))
    hops = forbid_hops(monkeypatch)

    async def again() -> HttpResponse:
        return await closed(cache, await view(prepared(factory.get(path))))

    return first, asyncio.run(again()), hops


@needs_auser
def test_an_async_views_hit_makes_no_thread_hop(
    cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second, hops = miss_then_hit(cache, anyones_page, "/anyone/", monkeypatch)
    assert (first["X-Cache"], second["X-Cache"]) == ("MISS", "HIT")
    assert second.content == first.content == b"page 1"
    assert hops == []
    factory = RequestFactory()
    head = asyncio.run(anyones_page(prepared(factory.head("/anyone/"))))
    assert head["X-Cache"] == "HIT"


@pytest.mark.django_db(transaction=True)
def test_an_async_per_user_page_is_each_users_own(cache: Any) -> None:
    factory = RequestFactory()
    cookies = {}
    for name in ("ann", "bob"):
        client = Client()
        client.force_login(User.objects.create_user(name))
        cookies[name] = client.cookies["sessionid"].value

    def visit(name: str | None) -> HttpResponse:
        request = factory.get("/own/")
        if name is not None:
            request.COOKIES["sessionid"] = cookies[name]
        return asyncio.run(own_page(prepared(request)))

    ann, bob, ann_again = visit("ann"), visit("bob"), visit("ann")
    assert ann.content == ann_again.content == b"page of ann"
    assert bob.content == b"page of bob"
    assert (ann["X-Cache"], bob["X-Cache"], ann_again["X-Cache"]) == ("MISS", "MISS", "HIT")
    assert "private" in ann_again["Cache-Control"]
    anonymous = visit(None)
    assert anonymous.content == b"page of " and anonymous["X-Cache"] == "MISS"
    assert renders == ["ann", "bob", ""]


@method_decorator(cached_view(ttl=60, tags=["async-cbv"]), name="get")
class AsyncClassBased(View):
    async def get(self, request: HttpRequest) -> HttpResponse:
        renders.append("class based")
        return HttpResponse(f"class based {len(renders)}")


@needs_auser
def test_an_async_class_based_view_is_cached(cache: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    first, second, hops = miss_then_hit(cache, AsyncClassBased.as_view(), "/cbv/", monkeypatch)
    assert (first["X-Cache"], second["X-Cache"]) == ("MISS", "HIT")
    assert second.content == first.content == b"class based 1"
    assert hops == []


# -- the online-visitors middleware under ASGI ---------------------------------------------------


def test_the_online_middleware_counts_async_requests_without_a_hop(
    cache: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_mcache.middleware import COOKIE, OnlineVisitorsMiddleware, online_counter

    async def view(request: HttpRequest) -> HttpResponse:
        return HttpResponse("hello")

    middleware = OnlineVisitorsMiddleware(view)
    assert asyncio.iscoroutinefunction(middleware), "Django gives it the async chain"
    factory = RequestFactory(HTTP_USER_AGENT="Mozilla/5.0")
    hops = forbid_hops(monkeypatch)

    async def visits() -> list[Any]:
        responses = []
        for address in ("10.0.0.1", "10.0.0.2", "10.0.0.1", "10.0.0.3"):
            responses.append(await middleware(factory.get("/", REMOTE_ADDR=address)))
        robot = factory.get("/", REMOTE_ADDR="10.0.0.9", HTTP_USER_AGENT="Googlebot/2.1")
        responses.append(await middleware(robot))
        return await closed(cache, responses)

    responses = asyncio.run(visits())
    assert hops == []
    assert [r.content for r in responses] == [b"hello"] * 5
    assert [COOKIE in r.cookies for r in responses] == [True, True, True, True, False]
    counter = online_counter("site")
    core = cache.mcache
    monkeypatch.setattr(core.clock, "time", lambda real=core.clock.time: real() + counter.slot_len)
    assert counter.count() == 3, "three visitors, one of them twice, and no robot"


def test_the_online_middleware_stays_sync_for_a_sync_chain(cache: Any) -> None:
    from django_mcache.middleware import OnlineVisitorsMiddleware

    middleware = OnlineVisitorsMiddleware(lambda request: HttpResponse("hello"))
    assert not asyncio.iscoroutinefunction(middleware)
    request = RequestFactory(HTTP_USER_AGENT="Mozilla/5.0").get("/", REMOTE_ADDR="10.0.0.1")
    assert middleware(request).content == b"hello"
