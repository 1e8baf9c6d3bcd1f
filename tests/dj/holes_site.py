"""Views and URLs of the holes, cookies and CDN-header tests (tests/dj/test_page_holes.py).

The templates are in tests/dj/blog/templates/holes/; the tests add the ``auth`` and
``django_mcache.holes.holes`` context processors to the test settings' engine.
"""

from __future__ import annotations

import functools
import threading
import time

from django.http import HttpResponse
from django.shortcuts import render
from django.template import RequestContext, Template
from django.urls import path
from django.utils.cache import patch_vary_headers

from django_mcache.views import cached_view

renders: list[str] = []


def _cart(request) -> int:
    if request.COOKIES.get("fail"):
        raise RuntimeError("this visitor's cart could not be read")
    return int(request.COOKIES.get("cart", 0))


@cached_view(ttl=60)
def comment_form(request):
    if request.method == "POST":
        return HttpResponse(f"posted {request.POST['text']}")
    renders.append("comment_form")
    return render(request, "holes/form.html", {"title": "a post"})


@cached_view(ttl=60, hole_context={})
def greeting(request):
    renders.append("greeting")
    return render(request, "holes/greeting.html", {"specials": "soup"})


@cached_view(ttl=60, hole_context={})
async def async_greeting(request):
    renders.append("async_greeting")
    return render(request, "holes/greeting.html", {"specials": "tea"})


@cached_view(ttl=60, stale_ttl=600, tags=["form"], refresh="background")
def refreshed_form(request):
    renders.append("refreshed_form")
    return render(
        request, "holes/form.html", {"title": f"render {renders.count('refreshed_form')}"}
    )


late_render_may_go_on = threading.Event()
"""Holds ``late_form``'s re-render until a response's holes are being filled."""


def _let_the_late_render_go_on(request) -> str:
    """A hole after the CSRF token: the token has marked the request by now, and the CSRF
    middleware has not yet cleared the mark; let the re-render run its checks meanwhile."""
    late_render_may_go_on.set()
    time.sleep(0.3)
    return ""


@cached_view(
    ttl=60,
    stale_ttl=600,
    tags=["late-form"],
    refresh="background",
    hole_context={"go_on": _let_the_late_render_go_on},
)
def late_form(request):
    renders.append("late_form")
    if renders.count("late_form") > 1:
        late_render_may_go_on.wait(10)
    title = f"render {renders.count('late_form')}"
    return render(request, "holes/late_form.html", {"title": title})


@cached_view(ttl=60, hole_context={})
def leaky(request):
    renders.append("leaky")
    return render(request, "holes/leaky.html")


@cached_view(ttl=60, hole_context={})
def reads_session(request):
    renders.append("reads_session")
    return HttpResponse(f"visits={request.session.get('visits', 0)}")


@cached_view(ttl=60, hole_context={"cart": _cart})
def shop(request):
    renders.append("shop")
    return render(request, "holes/cart.html")


@cached_view(ttl=60)
def mangled(request):
    renders.append("mangled")
    return render(request, "holes/mangled.html")


@functools.cache
def _inline_template() -> Template:
    return Template(
        "{% load mcache %}inline {% nocache %}{{ request.COOKIES.who }}{% endnocache %}"
    )


@cached_view(ttl=60)
def inline(request):
    renders.append("inline")
    return HttpResponse(_inline_template().render(RequestContext(request)))


@cached_view(ttl=60, cookies=["theme"])
def themed(request):
    renders.append("themed")
    response = HttpResponse(f"theme={request.COOKIES.get('theme')}")
    patch_vary_headers(response, ["Cookie"])
    return response


@cached_view(ttl=60)
def site_themed(request):
    renders.append("site_themed")
    response = HttpResponse(f"theme={request.COOKIES.get('theme')}")
    patch_vary_headers(response, ["Cookie"])
    return response


@cached_view(ttl=60, stale_ttl=600, cdn=True, tags=["cdn"], refresh="background")
def edge_page(request):
    renders.append("edge_page")
    return HttpResponse("at the edge")


@cached_view(ttl=60, cdn=True, per_user=True)
def edge_mine(request):
    return HttpResponse("mine")


@cached_view(ttl=30)
def site_edge(request):
    return HttpResponse("site-wide windows")


urlpatterns = [
    path("form/", comment_form),
    path("greeting/", greeting),
    path("async-greeting/", async_greeting),
    path("refreshed-form/", refreshed_form),
    path("late-form/", late_form),
    path("leaky/", leaky),
    path("reads-session/", reads_session),
    path("shop/", shop),
    path("mangled/", mangled),
    path("inline/", inline),
    path("themed/", themed),
    path("site-themed/", site_themed),
    path("edge/", edge_page),
    path("edge-mine/", edge_mine),
    path("site-edge/", site_edge),
]
