"""``python -m example_project --check``: every page once, then an edit that must show."""

from __future__ import annotations

import re

from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from example_project.blog.models import Post
from example_project.checklist import Checklist

PAGES = {  # path: what it must show
    "/": "Latest posts",
    "/blogs/cooking/": "Cooking at home",
    "/blogs/cooking/?page=2": "Page 2 of",
    "/calendar/": "ordered quadruples of posts",
    "/feed/": "<rss",
}


def check() -> int:
    """Return 0 when every page answers, hits after a miss, and follows edits; else 1.

    Run under a cache namespace of its own (see ``__main__``), so it starts cold
    and never empties a server; the database is left as it was found.
    """
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (check)")
    checks = Checklist()
    expect = checks.expect
    for path, shown in PAGES.items():
        first, second = client.get(path), client.get(path)
        expect(first.status_code == second.status_code == 200, f"{path} answers 200")
        expect(shown.encode() in first.content, f"{path} shows {shown!r}")
        expect(second.get("X-Cache") == "HIT", f"{path} is a hit the second time")
    admin = client.get("/admin/", follow=True)
    expect(admin.status_code == 200 and b"Log in" in admin.content, "/admin/ offers a login")
    post = Post.objects.select_related("blog").filter(blog__slug="cooking").first()
    title = post.title
    page = client.get(f"/posts/{post.pk}/")
    again = client.get(f"/posts/{post.pk}/")
    shown = escape(title).encode() in page.content
    expect(page.status_code == 200 and shown, "a post page answers")
    expect(b"1 views" in page.content and b"2 views" in again.content, "its view count moves")
    expect(re.search(rb"\d+ online", again.content) is not None, "it shows the online count")
    added = None
    try:
        post.title = "Edited just now"
        post.save()
        for path in ("/", "/blogs/cooking/", "/feed/"):
            response = client.get(path)
            expect(b"Edited just now" in response.content, f"{path} shows the edit at once")
        second_page = client.get("/blogs/cooking/?page=2").content
        added = Post.objects.create(
            blog=post.blog, title="Added just now", body="new", published=timezone.now()
        )
        expect(b"Added just now" in client.get("/blogs/cooking/").content, "a new post is listed")
        moved = client.get("/blogs/cooking/?page=2").content
        expect(moved != second_page, "and every page of the list moves with it (page 2 changed)")
        rebuilt = client.get("/calendar/").get("X-Cache")
        expect(rebuilt in ("MISS", "STALE"), "the calendar is rebuilt")
    finally:  # leave the demo data as it was
        post.title = title
        post.save()
        if added is not None:
            added.delete()
    return checks.verdict()
