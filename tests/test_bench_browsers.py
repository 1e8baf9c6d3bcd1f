"""The real-traffic benchmark's browsers keep pages as a browser's HTTP cache does:
its hit ratios depend on which page views reach the server at all."""

from __future__ import annotations

from tests.benchmarks.real_site.browsers import Mix, Visitor


def test_a_browser_keeps_a_page_for_its_max_age_and_only_with_the_cookies_it_varies_on() -> None:
    visitor = Visitor({"_ga": "1"})
    visitor.remember("/a/", visitor.cookie_header(), {"cache-control": "max-age=60, private"})
    visitor.remember("/b/", "_ga=1", {"cache-control": "max-age=60", "vary": "Accept, Cookie"})
    visitor.remember("/c/", "_ga=1", {"cache-control": "no-store, max-age=60"})
    visitor.remember("/d/", "_ga=1", {"cache-control": "no-cache"})
    visitor.remember("/e/", "_ga=1", {})
    visitor.remember("/f/", "_ga=1", {"cache-control": "max-age=0"})
    assert [visitor.holds(p) for p in ("/a/", "/b/", "/c/", "/d/", "/e/", "/f/")] == [
        True, True, False, False, False, False,
    ]  # fmt: skip
    visitor.keep("csrftoken=x; Path=/")
    assert visitor.holds("/a/"), "no Vary: Cookie: the page stays whatever the cookies"
    assert not visitor.holds("/b/"), "it varies on cookies, and they changed"


def test_the_mix_sends_no_request_for_a_view_the_browser_answers() -> None:
    mix = Mix(0, visitors=1, views=1000, sessions=["s"])
    visitor, path = mix.next()
    visitor.remember(path, visitor.cookie_header(), {"cache-control": "max-age=60"})
    for _ in range(60):  # 51 pages in all: by then one is held
        asked_by, asked = mix.next()
        assert asked_by is visitor and asked != path
        asked_by.remember(asked, asked_by.cookie_header(), {"cache-control": "max-age=60"})
        if mix.from_browser:
            break
    assert mix.from_browser > 0
