"""``python -m example_project --check``: every page once, then an edit that must show."""

from __future__ import annotations

from django.core.cache import caches
from django.test import Client

from example_project.blog.models import Post

PAGES = ["/", "/blogs/cooking/", "/blogs/cooking/?page=2", "/calendar/", "/feed/"]


def check() -> int:
    """Return 0 when every page answers, hits after a miss, and follows an edit; else 1."""
    caches["default"].clear()
    client = Client(HTTP_USER_AGENT="Mozilla/5.0 (check)")
    problems: list[str] = []

    def expect(ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            problems.append(what)

    for path in PAGES:
        first, second = client.get(path), client.get(path)
        expect(first.status_code == second.status_code == 200, f"{path} answers 200")
        expect(second.get("X-Cache") == "HIT", f"{path} is a hit the second time")
    post = Post.objects.select_related("blog").filter(blog__slug="cooking").first()
    page = client.get(f"/posts/{post.pk}/")
    again = client.get(f"/posts/{post.pk}/")
    expect(page.status_code == 200 and post.title.encode() in page.content, "a post page answers")
    expect(b"1 views" in page.content and b"2 views" in again.content, "its view count moves")
    post.title = "Edited just now"
    post.save()
    for path in ("/", "/blogs/cooking/", "/feed/"):
        response = client.get(path)
        expect(b"Edited just now" in response.content, f"{path} shows the edit at once")
    expect(client.get("/calendar/").get("X-Cache") in ("MISS", "STALE"), "the calendar is rebuilt")
    print("all pages fine" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0
