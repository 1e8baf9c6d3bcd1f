"""The pages of :mod:`tests.dj.purge_site`: a post's page, tagged with the post's row
(what a save of it bumps), and an about page with a tag of its own."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from django_mcache.views import cached_view
from tests.dj.blog.models import Post


@cached_view(300, tags=lambda request, pk: [f"obj:blog.post:{pk}"])
def post(request: HttpRequest, pk: int) -> HttpResponse:
    return HttpResponse(f"<h1>{Post.objects.get(pk=pk).title}</h1>")


@cached_view(300, tags=["about"])
def about(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"<p>{Post.objects.count()} posts</p>")


urlpatterns = [path("posts/<int:pk>/", post), path("about/", about)]
