"""Mistakes a Django user makes, each answered with a message that says what to write."""

from __future__ import annotations

import pickle
import threading

import pytest
from django.core.cache import caches
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.http import HttpResponse
from django.template import Context, Template, TemplateSyntaxError
from django.test import RequestFactory, override_settings

from django_mcache.config import cache_from_settings
from django_mcache.tags import Dependencies
from django_mcache.views import cached_view
from mcache.errors import ConfigError, Unserializable
from tests.dj.blog.models import Blog, Post

pytestmark = pytest.mark.django_db
BACKEND = "django_mcache.backend.MCacheBackend"


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()


def test_a_bare_cached_view_caches_with_the_defaults() -> None:
    calls = []

    @cached_view
    def page(request):
        calls.append(1)
        return HttpResponse("hello")

    first = page(RequestFactory().get("/bare/"))
    second = page(RequestFactory().get("/bare/"))
    assert (first["X-Cache"], second["X-Cache"]) == ("MISS", "HIT")
    assert second.content == b"hello" and len(calls) == 1
    assert page.__name__ == "page"


def test_a_ttl_of_the_wrong_kind_says_how_to_write_one() -> None:
    written = r"got '300'; write @cached_view\(300\) or @cached_view\(\)"
    with pytest.raises(TypeError, match=written):
        cached_view("300")


@pytest.mark.parametrize(
    "depends_on",
    [Post, [Post], (Post, Blog), "blog.Post", ["blog.Post"], Post.objects, Post.objects.all()],
    ids=["model", "list", "tuple", "label", "labels", "manager", "queryset"],
)
def test_depends_on_takes_a_model_a_list_a_label_or_a_queryset(client, depends_on) -> None:
    @cached_view(60, depends_on=depends_on)
    def page(request):
        return HttpResponse(",".join(p.title for p in Post.objects.all()))

    assert page(RequestFactory().get("/d/")).content == b""
    assert page(RequestFactory().get("/d/"))["X-Cache"] == "HIT"
    Post.objects.create(title="new")  # the save bumps model:blog.post
    again = page(RequestFactory().get("/d/"))
    assert (again["X-Cache"], again.content) == ("MISS", b"new")


def test_depends_on_an_instance_follows_that_row_alone() -> None:
    first, other = Post.objects.create(title="a"), Post.objects.create(title="b")

    @cached_view(60, depends_on=first)
    def page(request):
        return HttpResponse(Post.objects.get(pk=first.pk).title)

    assert page(RequestFactory().get("/row/")).content == b"a"
    other.title = "b2"
    other.save()
    assert page(RequestFactory().get("/row/"))["X-Cache"] == "HIT"
    first.title = "a2"
    first.save()
    assert page(RequestFactory().get("/row/")).content == b"a2"


@pytest.mark.parametrize(
    ("depends_on", "message"),
    [
        ("catalog.Product", r"depends_on='catalog.Product': No installed app with label 'catalog'"),
        ("blog.Nope", r"depends_on='blog.Nope': App 'blog' doesn't have a 'Nope' model"),
        ("Post", r"depends_on='Post' is not an 'app_label.Model' string; write e.g."),
        (42, r"depends_on takes a model \(Product\), an instance .* got int 42"),
        ([Post, object], r"got type <class 'object'>"),
    ],
)
def test_depends_on_names_what_it_got_when_it_is_no_model(depends_on, message) -> None:
    with pytest.raises(TypeError, match=message):
        cached_view(60, depends_on=depends_on)


def test_depends_on_an_unsaved_row_is_refused() -> None:
    with pytest.raises(TypeError, match=r"unsaved Post .*pass the model instead"):
        Dependencies(Post(title="draft"), "cached_view")


def test_an_unknown_cache_alias_fails_when_the_view_is_decorated() -> None:
    named = r"no cache 'nope' in settings.CACHES .*'default'"
    with pytest.raises(ImproperlyConfigured, match=named):
        cached_view(60, cache="nope")


@override_settings(
    CACHES={
        "default": {"BACKEND": BACKEND, "LOCATION": "memory://"},
        "plain": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    }
)
def test_a_cache_alias_of_another_backend_fails_when_the_view_is_decorated() -> None:
    with pytest.raises(ImproperlyConfigured, match=r"CACHES\['plain'\] is .*LocMemCache.*BACKEND"):
        cached_view(60, cache="plain")


def test_a_fragment_naming_an_unknown_cache_fails_when_the_template_is_compiled() -> None:
    with pytest.raises(TemplateSyntaxError, match=r"no cache 'nope' in settings\.CACHES"):
        Template('{% load mcache %}{% cachedblock 60 "x" using="nope" %}x{% endcachedblock %}')


def test_a_fragment_depending_on_no_model_names_what_it_got() -> None:
    template = Template(
        '{% load mcache %}{% cachedblock 60 "x" depends_on=thing %}x{% endcachedblock %}'
    )
    with pytest.raises(TemplateSyntaxError, match="cachedblock: depends_on takes a model"):
        template.render(Context({"thing": 3.5}))
    rendered = template.render(Context({"thing": "blog.Post"}))
    assert rendered == "x"


@override_settings(MCACHE_CACHE="pages")
def test_an_mcache_cache_setting_naming_no_cache_fails_the_system_checks() -> None:
    with pytest.raises(SystemCheckError, match=r"django_mcache.E002.*MCACHE_CACHE: there is no"):
        call_command("check")


def test_every_problem_of_a_caches_entry_is_reported_at_once() -> None:
    params = {
        "TIMEOUT": "soon",
        "OPTIONS": {"stale_tll": 60, "refresh": "later", "jitter": 4, "serializer": "yaml"},
    }
    with pytest.raises(ConfigError) as raised:
        cache_from_settings("memory://", params)
    message = str(raised.value)
    assert message.startswith("5 problems, fix them all:")
    for expected in (
        "unknown OPTIONS 'stale_tll' (did you mean 'stale_ttl'?)",
        "TIMEOUT must be a number of seconds or None, got 'soon'",
        "OPTIONS['refresh']: refresh must be 'sync' or 'background', got 'later'",
        "OPTIONS['jitter']: jitter must be a fraction in [0, 1) (fresh times shortened",
        "OPTIONS['serializer']: unknown serializer 'yaml'",
    ):
        assert expected in message


@override_settings(
    CACHES={
        "default": {
            "BACKEND": BACKEND,
            "LOCATION": "memcached://127.0.0.1:99999",
            "OPTIONS": {"wait": -1},
        }
    }
)
def test_the_system_check_lists_a_bad_location_and_a_bad_option_together() -> None:
    with pytest.raises(SystemCheckError) as raised:
        call_command("check")
    message = str(raised.value)
    assert "2 problems" in message and "bad port 99999" in message
    assert "OPTIONS['wait']: wait must be a number of seconds >= 0" in message


def test_an_unpicklable_value_gets_the_same_error_on_every_path() -> None:
    cache = caches["default"]
    lock = threading.Lock()
    writes = {
        "set": lambda: cache.set("k", lock),
        "add": lambda: cache.add("k2", lock),
        "set_many": lambda: cache.set_many({"k3": lock}),
        "get_or_set": lambda: cache.get_or_set("k4", lock),
        "get_or_set callable": lambda: cache.get_or_set("k5", lambda: lock),
        "get_or_build": lambda: cache.mcache.get_or_build("k6", lambda: lock),
        "cached": lambda: cache.mcache.cached(60)(lambda: lock)(),
    }
    for path, write in writes.items():
        with pytest.raises(Unserializable) as raised:
            write()
        message = str(raised.value)
        expected = "cannot cache a _thread.lock value: the 'pickle' serializer cannot encode it"
        assert message.startswith(expected), path
        assert message.endswith("(OPTIONS['serializer'])."), path  # Django's setting, named
        assert isinstance(raised.value, pickle.PicklingError), path  # what Django's own raise
        assert cache.get("k") is None
    assert cache.get_or_set("k6", lambda: "fine") == "fine"  # no lock left behind
