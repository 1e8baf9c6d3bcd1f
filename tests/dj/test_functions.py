"""``django_mcache.functions.cached``: a function memoized on a Django cache, following the ORM."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_mcache.functions import cached
from tests.dj.blog.models import Post

pytestmark = pytest.mark.django_db
BACKEND = "django_mcache.backend.MCacheBackend"


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()


def test_a_cached_function_follows_saves_of_the_models_it_depends_on() -> None:
    calls = []

    @cached(60, depends_on="blog.Post")
    def titles() -> list[str]:
        calls.append(1)
        return [p.title for p in Post.objects.order_by("pk")]

    assert titles() == titles() == [] and len(calls) == 1
    Post.objects.create(title="first")
    assert titles() == ["first"] and len(calls) == 2
    titles.invalidate()
    assert titles() == ["first"] and len(calls) == 3


def test_a_row_dependency_and_tags_of_the_arguments_together() -> None:
    post = Post.objects.create(title="a")
    calls = []

    @cached(60, depends_on=post, tags=lambda n: [f"n:{n}"])
    def shout(n: int) -> str:
        calls.append(n)
        return Post.objects.get(pk=post.pk).title * n

    assert shout(2) == shout(2) == "aa" and calls == [2]
    caches["default"].mcache.invalidate("n:3")
    assert shout(2) == "aa" and calls == [2]
    post.title = "b"
    post.save()
    assert shout(2) == "bb" and calls == [2, 2]


def test_bare_cached_uses_the_default_cache() -> None:
    calls = []

    @cached
    def square(n: int) -> int:
        calls.append(n)
        return n * n

    assert square(3) == square(n=3) == 9 and calls == [3]


def test_the_cache_is_found_at_each_call_so_new_settings_apply() -> None:
    @cached(60)
    def where() -> str:
        return str(caches["default"].mcache.store)

    first = where()
    setting = {"default": {"BACKEND": BACKEND, "LOCATION": "memory://", "KEY_PREFIX": "other"}}
    with override_settings(CACHES=setting):
        assert where.for_cache().cache is caches["default"].mcache
    assert where() == first


def test_mistakes_fail_where_the_decorator_is_written() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"cached\(cache=\.\.\.\): there is no cache"):
        cached(60, cache="nope")
    with pytest.raises(TypeError, match=r"cached: depends_on takes a model .* got float 1\.5"):
        cached(60, depends_on=1.5)
    with pytest.raises(TypeError, match=r"cached: depends_on='blog\.Nope'"):
        cached(60, depends_on="blog.Nope")


def test_the_invalidate_command_bumps_tags_and_model_tags() -> None:
    from io import StringIO

    from django.core.management import CommandError, call_command

    calls = []

    @cached(60, depends_on=Post, tags=["sidebar"])
    def latest() -> int:
        calls.append(1)
        return len(calls)

    assert latest() == latest() == 1
    out = StringIO()
    call_command("mcache_invalidate", "sidebar", stdout=out)
    assert out.getvalue().startswith("sidebar ") and latest() == 2
    call_command("mcache_invalidate", "--model", "blog.Post", stdout=StringIO())
    assert latest() == 3
    with pytest.raises(CommandError, match="name at least one tag"):
        call_command("mcache_invalidate")
    with pytest.raises(CommandError, match=r"--model: depends_on='blog\.Nope'"):
        call_command("mcache_invalidate", "--model", "blog.Nope")
    with pytest.raises(CommandError, match="there is no cache 'nope'"):
        call_command("mcache_invalidate", "x", "--cache", "nope")


def test_a_memoized_view_returning_a_response_fails_naming_cached_view() -> None:
    from django.http import HttpResponse

    from mcache.errors import NotMemoizable

    @cached(60)
    def greeting(request, name: str) -> HttpResponse:
        response = HttpResponse(f"hello {name}")
        response.set_cookie("visitor", name)
        return response

    for _ in range(2):  # refused each time: the response was never kept for a later caller
        with pytest.raises(NotMemoizable, match=r"HttpResponse.*django_mcache\.views\.cached_view"):
            greeting("alice-request", "alice")
    key = greeting.for_cache().key("alice-request", "alice")
    assert caches["default"].mcache.get(key, None) is None
