"""``python -m example_project --check``: every page once, then an edit that must show."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db.models import Max
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from example_project.blog.models import Blog, Post
from example_project.checklist import CHECK_POSTS, Checklist, check_slug, view_count_moved


def check() -> int:
    """Return 0 when every page answers, hits after a miss, and follows edits; else 1.

    Run under a cache namespace of its own (see ``__main__``), so it starts cold
    and never empties a server. It walks a blog it creates for itself and deletes
    after, so whatever an admin did to the demo data, the check holds and leaves
    the data as it found it.
    """
    slug = check_slug()
    blog = Blog.objects.create(name=f"Check {slug}", slug=slug)
    newest = Post.objects.aggregate(newest=Max("published"))["newest"]
    now = max(timezone.now(), newest or timezone.now()) + timedelta(minutes=1)  # on top
    Post.objects.bulk_create(
        Post(blog=blog, title=f"Check post {i}", body="check", published=now - timedelta(hours=i))
        for i in range(CHECK_POSTS)
    )
    try:
        return _walk(blog)
    finally:  # leave the data as it was: the blog's posts go with it
        blog.delete()


def _walk(blog: Blog) -> int:
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (check)")
    checks = Checklist()
    expect = checks.expect
    pages = {  # path: what it must show
        "/": "Latest posts",
        f"/blogs/{blog.slug}/": blog.name,
        f"/blogs/{blog.slug}/?page=2": "Page 2 of",
        "/calendar/": "ordered quadruples of posts",
        "/feed/": "<rss",
    }
    for path, shown in pages.items():
        first, second = client.get(path), client.get(path)
        expect(first.status_code == second.status_code == 200, f"{path} answers 200")
        expect(shown.encode() in first.content, f"{path} shows {shown!r}")
        expect(second.get("X-Cache") == "HIT", f"{path} is a hit the second time")
    admin = client.get("/admin/", follow=True)
    expect(admin.status_code == 200 and b"Log in" in admin.content, "/admin/ offers a login")
    post = blog.posts.first()  # the newest: on the home page, the feed and page 1
    page = client.get(f"/posts/{post.pk}/")
    again = client.get(f"/posts/{post.pk}/")
    shown = escape(post.title).encode() in page.content
    expect(page.status_code == 200 and shown, "a post page answers")
    expect(view_count_moved(page.content, again.content), "its view count moves")
    expect(re.search(rb"\d+ online", again.content) is not None, "it shows the online count")
    post.title = "Edited just now"
    post.save()
    for path in ("/", f"/blogs/{blog.slug}/", "/feed/"):
        response = client.get(path)
        expect(b"Edited just now" in response.content, f"{path} shows the edit at once")
    second_page = client.get(f"/blogs/{blog.slug}/?page=2").content
    Post.objects.create(blog=blog, title="Added just now", body="new", published=post.published)
    expect(b"Added just now" in client.get(f"/blogs/{blog.slug}/").content, "a new post is listed")
    moved = client.get(f"/blogs/{blog.slug}/?page=2").content
    expect(moved != second_page, "and every page of the list moves with it (page 2 changed)")
    rebuilt = client.get("/calendar/").get("X-Cache")
    expect(rebuilt in ("MISS", "STALE"), "the calendar is rebuilt")
    return checks.verdict()
