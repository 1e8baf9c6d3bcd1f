"""Varnish and CDNs purged by the same tags, in Django: each shared page names its tags
(and those of what its build read) in the surrogate header the site chose, and a save
purges them. The whole loop runs for real: a site under gunicorn on memcached, a real
Varnish with the xkey module in front running the VCL the docs ship, and a save in
another process (as a management command or the admin would make)."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.cache import caches
from django.core.checks import run_checks
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory, override_settings

from django_mcache.views import cached_view
from mcache.purge.surrogate import surrogate_key
from tests.benchmarks.common import answering
from tests.conftest import REQUIRE_SERVERS
from tests.dj.test_backend import mcache_caches
from tests.servers import ServerProcess, free_port, varnish_process

ROOT = Path(__file__).resolve().parents[2]
VCL = ROOT / "docs" / "how-to" / "varnish.vcl"


_PREFIXES = itertools.count()


def _caches(**options: object) -> dict:
    """A memory cache with ``options`` under a prefix of its own: no page from another test."""
    return mcache_caches("memory://", KEY_PREFIX=f"edge{next(_PREFIXES)}", OPTIONS=options)


@cached_view(60, tags=["posts"])
def _listing(request: HttpRequest) -> HttpResponse:
    core = caches["default"].mcache
    authors = core.get_or_build("authors", lambda: "ann, bo", tags=["authors"])
    return HttpResponse(f"posts by {authors}")


@cached_view(60, tags=["posts"], per_user=True)
def _mine(request: HttpRequest) -> HttpResponse:
    return HttpResponse("yours")


@cached_view(60, tags=lambda request: [f"tag-{n:04d}-{'x' * 40}" for n in range(400)])
def _crowded(request: HttpRequest) -> HttpResponse:
    return HttpResponse("many tags")


@cached_view(60, tags=["themed"], cookies=["theme"])
def _themed(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"theme {request.COOKIES.get('theme', 'light')}")


@cached_view(60, tags=["visits"])
def _reads_session(request: HttpRequest) -> HttpResponse:
    return HttpResponse(f"seen {request.session.get('seen', 0)}")


def _with_session(path: str, cookie: str = "") -> HttpRequest:
    from django.contrib.sessions.backends.signed_cookies import SessionStore

    request = RequestFactory().get(path, HTTP_COOKIE=cookie)
    request.session = SessionStore()
    return request


def test_a_shared_page_names_its_tags_and_what_its_build_read() -> None:
    with override_settings(CACHES=_caches(page_surrogate="xkey")):
        first = _listing(RequestFactory().get("/list/"))
        again = _listing(RequestFactory().get("/list/"))
    assert first["X-Cache"] == "MISS" and again["X-Cache"] == "HIT"
    assert first["xkey"] == again["xkey"] == "posts authors"


def test_cloudflare_cache_tags_are_comma_separated() -> None:
    with override_settings(CACHES=_caches(page_surrogate="cache-tag")):
        response = _listing(RequestFactory().get("/list/"))
    assert response["Cache-Tag"] == "posts,authors"


def test_pages_are_unnamed_without_the_setting_or_when_not_shared() -> None:
    with override_settings(CACHES=_caches()):
        assert not _listing(RequestFactory().get("/list/")).has_header("xkey")
    with override_settings(CACHES=_caches(page_surrogate="xkey")):
        assert not _mine(RequestFactory().get("/mine/")).has_header("xkey")


def test_a_page_with_more_keys_than_a_header_holds_is_sent_private() -> None:
    with override_settings(CACHES=_caches(page_surrogate="xkey")):
        response = _crowded(RequestFactory().get("/crowded/"))
        hit = _crowded(RequestFactory().get("/crowded/"))
    assert not response.has_header("xkey")
    assert "private" in response["Cache-Control"] and "private" in hit["Cache-Control"]


def test_pages_a_cache_in_front_may_keep_name_their_keys_and_vary_as_they_must() -> None:
    """A page keyed by a declared cookie says Vary: Cookie (a CDN must not mix themes); one
    that read the session is kept in front for visitors without cookies: both name keys."""
    with override_settings(CACHES=_caches(page_surrogate="xkey")):
        dark = _themed(RequestFactory().get("/themed/", HTTP_COOKIE="theme=dark"))
        session_page = _reads_session(_with_session("/visits/"))
    assert dark["xkey"] == "themed" and "Cookie" in dark["Vary"]
    assert "private" not in dark.get("Cache-Control", "")
    assert session_page["xkey"] == "visits" and "Cookie" in session_page["Vary"]


def test_a_page_too_crowded_to_name_gets_no_cdn_windows() -> None:
    with override_settings(CACHES=_caches(page_surrogate="cache-tag", page_cdn=True)):
        for response in (
            _crowded(RequestFactory().get("/c/")),
            _crowded(RequestFactory().get("/c/")),
        ):
            assert "private" in response["Cache-Control"]
            assert "s-maxage" not in response["Cache-Control"]
            assert not response.has_header("CDN-Cache-Control")


def test_a_bad_page_surrogate_is_a_check_error_naming_it() -> None:
    with override_settings(CACHES=_caches(page_surrogate="Surrogate-Keys")):
        errors = [e for e in run_checks() if e.id == "django_mcache.E001"]
    assert "OPTIONS['page_surrogate'] must be one of 'xkey', 'surrogate-key', 'cache-tag'" in (
        errors[0].msg
    )


# -- the whole loop: gunicorn, memcached, a real Varnish, a save in another process -----------


SEED = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", run_syncdb=True, verbosity=0)
from tests.dj.blog.models import Post
Post.objects.bulk_create([Post(title="First"), Post(title="Second")])
"""
EDIT = """
import django
django.setup()
from tests.dj.blog.models import Post
post = Post.objects.get(pk=1)
post.title = "First, edited"
post.save()
"""


def _run(code: str, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def _through(varnish: ServerProcess, path: str) -> tuple[str, bool]:
    """Return a page fetched through Varnish, and whether Varnish answered it itself."""
    with urllib.request.urlopen(f"http://{varnish.address}{path}", timeout=5) as response:
        assert "xkey" not in response.headers  # kept from visitors by the VCL
        return response.read().decode(), len(response.headers["X-Varnish"].split()) == 2


@pytest.fixture
def site_behind_varnish(
    tmp_path: Path, memcached_url: str
) -> Iterator[tuple[ServerProcess, dict[str, str]]]:
    if shutil.which("varnishd") is None and not Path("/usr/sbin/varnishd").exists():
        message = "varnishd is not installed (apt-get install varnish varnish-modules)"
        if REQUIRE_SERVERS:
            pytest.fail(f"MCACHE_REQUIRE_SERVERS=1 but {message}", pytrace=False)
        pytest.skip(message)
    site_port = free_port()
    varnish = varnish_process(VCL.read_text(), site_port)
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        DJANGO_SETTINGS_MODULE="tests.dj.purge_site",
        MCACHE_PURGE_SITE_DB=str(tmp_path / "site.sqlite3"),
        MCACHE_PURGE_SITE_MEMCACHED=memcached_url.removeprefix("memcached://"),
        MCACHE_PURGE_SITE_VARNISH=varnish.purge_address,
    )
    _run(SEED, env)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "django.core.wsgi:get_wsgi_application()",
         "-w", "2", "-b", f"127.0.0.1:{site_port}", "--log-level", "warning"],
        env=env, cwd=ROOT,
    )  # fmt: skip
    try:
        answering(server, site_port, ("/about/",), "gunicorn serving tests.dj.purge_site")
        varnish.start(timeout=30)
        yield varnish, env
    finally:
        varnish.kill()
        server.terminate()
        server.wait(10)


def test_a_save_purges_exactly_its_pages_from_varnish_within_a_second(
    site_behind_varnish: tuple[ServerProcess, dict[str, str]],
) -> None:
    varnish, env = site_behind_varnish
    for path in ("/posts/1/", "/posts/2/", "/about/"):
        _through(varnish, path)
        assert _through(varnish, path)[1], f"{path}: Varnish keeps the page"
    _run(EDIT, env)  # another process: its purge goes out before it exits
    deadline = time.monotonic() + 1.0
    while "First, edited" not in _through(varnish, "/posts/1/")[0]:
        assert time.monotonic() < deadline, "the edit did not reach Varnish within 1 s"
        time.sleep(0.05)
    assert _through(varnish, "/posts/2/") == ("<h1>Second</h1>", True)  # another row: kept
    assert _through(varnish, "/about/")[1]  # untouched tag: kept


def test_surrogate_keys_of_an_odd_tag_match_on_both_sides() -> None:
    """A tag no header could carry as it is is named by one digest, page and purge alike."""
    with override_settings(CACHES=_caches(page_surrogate="xkey")):
        core = caches["default"].mcache

        @cached_view(60, tags=["two words"])
        def odd(request: HttpRequest) -> HttpResponse:
            return HttpResponse("odd")

        response = odd(RequestFactory().get("/odd/"))
        assert response["xkey"] == surrogate_key(core.tags.label("two words"))
