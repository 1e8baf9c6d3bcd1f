"""The example's pages, each cached the way its data changes."""

from __future__ import annotations

from django.contrib.syndication.views import Feed
from django.core.paginator import Paginator
from django.db import connection
from django.db.models import Count
from django.db.models.functions import TruncDate
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render

from django_mcache.views import cached_view
from example_project.cache_footer import STYLESHEET

from .models import Blog, Post


@cached_view(ttl=300, stale_ttl=3600, depends_on=[Post])
def home(request):
    """The latest posts across blogs: stale as soon as any post changes."""
    posts = Post.objects.select_related("blog")[:10]
    return render(request, "blog/home.html", {"posts": posts})


@cached_view(ttl=300, stale_ttl=3600, tags=lambda request, slug: [f"blog:{slug}"])
def blog(request, slug):
    """A blog's paginated post list: every page goes stale when one of its posts changes."""
    the_blog = get_object_or_404(Blog, slug=slug)
    page = Paginator(the_blog.posts.all(), 10).get_page(request.GET.get("page"))
    return render(request, "blog/blog.html", {"blog": the_blog, "page": page})


def post(request, pk):
    """A post: its body is a cached block; the view count moves on every request."""
    the_post = get_object_or_404(Post.objects.select_related("blog"), pk=pk)
    return render(request, "blog/post.html", {"post": the_post})


@cached_view(ttl=600, stale_ttl=3600, tags=["calendar"], refresh="background")
def calendar(request):
    """Posts per day, with a deliberately heavy statistic: why this page is cached."""
    days = (
        Post.objects.annotate(day=TruncDate("published"))
        .values("day")
        .annotate(posts=Count("id"))
        .order_by("-day")
    )
    with connection.cursor() as cursor:  # every ordered quadruple of posts: ~1 s on the demo data
        cursor.execute(
            "SELECT count(*), sum(length(a.title) + length(d.title))"
            " FROM blog_post a, blog_post b, blog_post c, blog_post d"
            " WHERE a.id < b.id AND b.id < c.id AND c.id < d.id"
        )
        quadruples, _letters = cursor.fetchone()
    return render(request, "blog/calendar.html", {"days": days, "quadruples": quadruples})


class LatestPosts(Feed):
    """The RSS feed of the latest posts."""

    title = "mcache example blogs"
    link = "/"
    description = "The latest posts of every blog."

    def items(self):
        return Post.objects.select_related("blog")[:20]

    def item_title(self, item):
        return item.title

    def item_description(self, item):
        return item.body[:200]

    def item_link(self, item):
        return f"/posts/{item.pk}/"


feed = cached_view(ttl=600, tags=["feed"])(LatestPosts())


def stylesheet(request):
    """The site's one stylesheet (a file both example apps serve)."""
    response = HttpResponse(STYLESHEET.read_bytes(), content_type="text/css")
    response["Cache-Control"] = "max-age=3600"
    return response
