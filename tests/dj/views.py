"""Views the cached_view tests request through Django's test client."""

from __future__ import annotations

import time

from django.contrib import messages
from django.http import HttpResponse, JsonResponse, StreamingHttpResponse
from django.template import RequestContext, Template
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.utils.decorators import method_decorator
from django.views import View
from django.views.decorators.cache import cache_control

from django_mcache.views import cached_view
from tests.dj.blog.models import Label, Post

renders: list[str] = []  # every real render, so tests can count them


def _titles() -> str:
    return ",".join(p.title for p in Post.objects.order_by("pk"))


@cached_view(ttl=60, tags=["posts"])
def post_list(request):
    renders.append("post_list")
    return HttpResponse(f"posts: {_titles()} q={request.GET.urlencode()}")


@cached_view(ttl=60, tags=lambda request, pk: [f"post:{pk}"], depends_on=[Post])
def post_detail(request, pk):
    renders.append("post_detail")
    return HttpResponse(f"post {Post.objects.get(pk=pk).title}")


@cached_view(ttl=60, vary_on_headers=["Accept-Language"])
def by_language(request):
    renders.append("by_language")
    response = HttpResponse(f"lang={request.headers.get('Accept-Language')}")
    patch_vary_headers(response, ["Accept-Language"])
    return response


@cached_view(ttl=60)
def undeclared_vary(request):
    renders.append("undeclared_vary")
    response = HttpResponse(f"ua={request.headers.get('User-Agent')}")
    patch_vary_headers(response, ["User-Agent"])
    return response


@cached_view(ttl=60)
def vary_star(request):
    renders.append("vary_star")
    response = HttpResponse("anything")
    response["Vary"] = "*"
    return response


@cached_view(ttl=60)
def sets_cookie(request):
    renders.append("sets_cookie")
    response = HttpResponse(f"hello {request.GET.get('who')}")
    response.set_cookie("visitor", request.GET.get("who", ""))
    return response


@cached_view(ttl=60)
@cache_control(private=True)
def private_page(request):
    renders.append("private_page")
    return HttpResponse(f"private {request.GET.get('who')}")


@cached_view(ttl=60)
@cache_control(no_store=True)
def no_store(request):
    renders.append("no_store")
    return HttpResponse("no store")


@cached_view(ttl=60, tags=lambda request, pk: [f"obj:blog.blog:{pk}"])
def blog_page(request, pk):
    renders.append("blog_page")
    titles = ",".join(p.title for p in Post.objects.filter(blog_id=pk).order_by("pk"))
    return HttpResponse(f"blog {pk}: {titles}")


@cached_view(ttl=60, depends_on=[Label])
def label_cloud(request):
    renders.append("label_cloud")
    names = ",".join(sorted(f"{x.name}:{x.post_set.count()}" for x in Label.objects.all()))
    return HttpResponse(f"labels {names}")


@cached_view(ttl=60, tags=["feed"])
def feed(request):
    renders.append("feed")
    return HttpResponse(f"feed {Post.objects.count()}")


@cached_view(ttl=60)
@cache_control(no_cache=True)
def no_cache(request):
    renders.append("no_cache")
    return HttpResponse("no cache")


@cached_view(ttl=60, header="X-Page-Cache")
def renamed_header(request):
    renders.append("renamed_header")
    return HttpResponse("renamed")


@cached_view(ttl=60, header=None)
def no_header(request):
    renders.append("no_header")
    return HttpResponse("quiet")


@cached_view(ttl=60)
@cache_control(max_age=0)
def max_age_zero(request):
    renders.append("max_age_zero")
    return HttpResponse("max-age 0")


@cached_view(ttl=60)
def not_found(request):
    renders.append("not_found")
    return HttpResponse("gone", status=404)


@cached_view(ttl=60)
def streaming(request):
    renders.append("streaming")
    return StreamingHttpResponse(iter([b"a", b"b"]))


@cached_view(ttl=60)
def whoami(request):
    renders.append("whoami")
    user = request.user
    return HttpResponse(f"user={user.username if user.is_authenticated else 'anonymous'}")


@cached_view(ttl=60, per_user=True)
def my_page(request):
    renders.append("my_page")
    user = request.user
    return HttpResponse(f"mine={user.username if user.is_authenticated else 'anonymous'}")


@cached_view(ttl=60)
def csrf_form(request):
    renders.append("csrf_form")
    form = Template("<form>{% csrf_token %}</form>")
    return HttpResponse(form.render(RequestContext(request)))


@cached_view(ttl=60)
def cart(request):
    renders.append("cart")
    return HttpResponse(f"cart={request.session.get('cart', 0)}")


@cached_view(ttl=60)
def remembers(request):
    renders.append("remembers")
    request.session["seen"] = True
    return HttpResponse("noted")


@cached_view(ttl=60)
def flash(request):
    renders.append("flash")
    if "say" in request.GET:
        messages.info(request, request.GET["say"])
    return HttpResponse("messages: " + ",".join(str(m) for m in messages.get_messages(request)))


@cached_view(ttl=60, per_user=True)
def theme(request):
    renders.append("theme")
    response = HttpResponse(f"theme={request.COOKIES.get('theme')}")
    patch_vary_headers(response, ["Cookie"])
    return response


@cached_view(ttl=60, stale_ttl=600, tags=["language"], refresh="background")
def language(request):
    renders.append("language")
    return HttpResponse(f"language={translation.get_language()} render={len(renders)}")


@cached_view(ttl=60, stale_ttl=600, tags=["async-bg"], refresh="background")
async def async_background(request):
    renders.append("async_background")
    return HttpResponse(f"async render={len(renders)}")


@cached_view(ttl=60, stale_ttl=600, tags=["slow"])
def slow(request):
    renders.append("slow")
    time.sleep(0.3)
    return HttpResponse(f"slow {len(renders)}")


@cached_view(ttl=60, tags=["async"])
async def async_page(request):
    renders.append("async_page")
    return HttpResponse("async page")


@method_decorator(cached_view(ttl=60, tags=["cbv"]), name="get")
class ClassBased(View):
    def get(self, request):
        renders.append("class_based")
        return JsonResponse({"view": "class based"})

    def post(self, request):
        renders.append("class_based_post")
        return JsonResponse({"posted": True})


CATALOG = Template(
    "{% load mcache %}"
    '{% cachedblock 60 "titles" depends_on=posts %}'
    "titles:{% for post in posts %}{{ post.title }};{% endfor %}"
    "{% endcachedblock %}|"
    '{% cachedblock 60 "categories" tags="categories" %}categories:{{ categories }}'
    "{% endcachedblock %}"
)
catalog_data = {"categories": "c1"}  # what the categories fragment shows (no model behind it)


@cached_view(ttl=60, depends_on=[Post], refresh="background")
def catalog(request):
    """The README's recommended page: background refresh, holding cached fragments."""
    renders.append("catalog")
    context = {"posts": Post.objects.order_by("pk"), "categories": catalog_data["categories"]}
    return HttpResponse(CATALOG.render(RequestContext(request, context)))


@cached_view(ttl=60, stale_ttl=600, tags=["patient"], stale_wait=5)
def patient(request):
    """A slow page whose readers wait for its rebuild rather than take it stale."""
    renders.append("patient")
    time.sleep(0.3)
    return HttpResponse(f"patient {views_rendered('patient')}")


def views_rendered(name: str) -> int:
    return renders.count(name)
