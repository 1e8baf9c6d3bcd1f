"""{% load mcache %}: cached blocks with tags, view and online counters, on a real request."""

from __future__ import annotations

import pytest
from django.core.cache import caches
from django.template import Context, Template, TemplateSyntaxError
from django.test import RequestFactory, override_settings

from mcache import FakeClock
from tests.dj.blog.models import Post
from tests.renders import Renders

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache():
    caches["default"].clear()


def render(source: str, **context) -> str:
    return Template("{% load mcache %}" + source).render(Context(context)).strip()


def test_cachedblock_renders_once_then_invalidates_by_tag() -> None:
    renders = Renders()
    block = '{% cachedblock 60 "sidebar" tags="posts,users" %}n={{ renders }}{% endcachedblock %}'
    assert render(block, renders=renders) == "n=1"
    assert render(block, renders=renders) == "n=1"
    caches["default"].invalidate("users")
    assert render(block, renders=renders) == "n=2"
    assert renders.count == 2


def test_cachedblock_vary_values_separate_fragments() -> None:
    renders = Renders()
    block = (
        '{% cachedblock 60 "menu" user_id section %}{{ user_id }}/{{ renders }}{% endcachedblock %}'
    )
    assert render(block, renders=renders, user_id=1, section="a") == "1/1"
    assert render(block, renders=renders, user_id=2, section="a") == "2/2"
    assert render(block, renders=renders, user_id=1, section="a") == "1/1"
    assert render(block, renders=renders, user_id="1", section="a") == "1/3", "1 is not '1'"


def test_cachedblock_depends_on_a_model() -> None:
    post = Post.objects.create(title="first")
    block = (
        '{% cachedblock 60 "post" post.pk depends_on=post %}{{ post.title }}{% endcachedblock %}'
    )
    assert render(block, post=post) == "first"
    post.title = "edited"
    assert render(block, post=post) == "first"
    post.save()  # the ORM signal bumps obj:blog.post:<pk>
    assert render(block, post=post) == "edited"


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("{% cachedblock 60 %}x{% endcachedblock %}", "needs a ttl and a name"),
        ('{% cachedblock "soon" "x" %}x{% endcachedblock %}', "number of seconds"),
        ('{% cachedblock 60 "x" colour="red" %}x{% endcachedblock %}', "unknown option"),
    ],
)
def test_cachedblock_mistakes_say_what_to_fix(source: str, message: str) -> None:
    with pytest.raises(TemplateSyntaxError, match=message):
        render(source)


def test_count_view_counts_once_per_request_from_the_database_count() -> None:
    post = Post.objects.create(title="p", views=41)
    request = RequestFactory().get("/")
    page = "{% count_view post %} {% count_view post %} {% view_count post %}"
    assert render(page, post=post, request=request) == "42 42 42"
    assert render(page, post=post, request=RequestFactory().get("/")) == "43 43 43"
    assert render("{% view_count post %}", post=post) == "43"


def test_online_count_reads_the_window(monkeypatch) -> None:
    core = caches["default"].mcache
    clock = FakeClock(core.clock.time())
    monkeypatch.setattr(core, "clock", clock)
    site = caches["default"].online_counter("site")
    site.hit("visitor-1")
    site.hit("visitor-2")
    site.hit("visitor-1")
    caches["default"].online_counter("forum").hit("visitor-3")
    clock.advance(site.slot_len)  # the count covers the slots before the one filling now
    assert render("{% online_count %}") == "2"
    assert render('{% online_count "forum" %}') == "1"


def test_online_count_counts_the_visitor_looking_when_asked(monkeypatch) -> None:
    core = caches["default"].mcache
    monkeypatch.setattr(core, "clock", FakeClock(core.clock.time()))
    caches["default"].online_counter("site").hit("the visitor looking")
    assert render("{% online_count %}") == "0", "the filling slot is left out by default"
    assert render("{% online_count current=True %}") == "1"


def test_online_count_reads_the_counter_the_middleware_counts_into(monkeypatch) -> None:
    from django.http import HttpResponse

    from django_mcache.middleware import OnlineVisitorsMiddleware

    core = caches["default"].mcache
    clock = FakeClock(core.clock.time())
    monkeypatch.setattr(core, "clock", clock)
    middleware = OnlineVisitorsMiddleware(lambda request: HttpResponse())
    with override_settings(MCACHE_ONLINE_WINDOW=60, MCACHE_ONLINE_SLOTS=3):
        for visitor in ("a", "b", "c"):
            middleware(RequestFactory().get("/", HTTP_USER_AGENT=f"Mozilla/5.0 ({visitor})"))
        clock.advance(30)  # a 30 s slot later (60 s over two complete slots): theirs is complete
        assert render("{% online_count %}") == "3"


def test_bare_block_names_are_literal_as_in_djangos_cache_tag() -> None:
    page = (
        "{% cachedblock 60 sidebar %}SIDEBAR{% endcachedblock %}"
        "|{% cachedblock 60 header %}HEADER{% endcachedblock %}"
    )
    assert render(page) == "SIDEBAR|HEADER"
    assert render(page) == "SIDEBAR|HEADER"


def test_ttl_none_keeps_and_zero_does_not_cache() -> None:
    renders = Renders()
    forever = '{% cachedblock none "f" %}{{ renders }}{% endcachedblock %}'
    never = '{% cachedblock 0 "n" %}{{ renders }}{% endcachedblock %}'
    assert render(forever, renders=renders, none=None) == "1"
    assert render(forever, renders=renders, none=None) == "1"
    assert render(never, renders=renders) == "2"
    assert render(never, renders=renders) == "3"


def test_vary_on_values_without_a_key_form_uses_their_text() -> None:
    from django.contrib.auth.models import AnonymousUser

    block = '{% cachedblock 60 "nav" user %}{{ user }}{% endcachedblock %}'
    assert render(block, user=AnonymousUser()) == "AnonymousUser"


def test_count_view_shows_one_number_per_request() -> None:
    post = Post.objects.create(title="p", views=0)
    request = RequestFactory().get("/")
    assert render("{% count_view post %}", post=post, request=request) == "1"
    caches["default"].view_counter("views:blog.post").incr(post, 10)  # others view meanwhile
    assert render("{% count_view post %}", post=post, request=request) == "1"
