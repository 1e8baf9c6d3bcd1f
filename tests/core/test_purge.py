"""Purging the caches in front by the tags mcache invalidates: surrogate keys, the
requests each target takes (Fastly and Cloudflare: format tests against local checkers
of their published APIs, never the live services), a real Varnish with the xkey module
running the VCL the docs ship, and a purge endpoint that is down."""

from __future__ import annotations

import gc
import http.client
import logging
import os
import shutil
import socket
import time
import urllib.request
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mcache import Cache
from mcache.errors import ConfigError
from mcache.purge.sender import Purger, retry_after
from mcache.purge.surrogate import HEADERS, KeysTooLong, surrogate_header, surrogate_key
from mcache.purge.targets import Cloudflare, PurgeRequest, Varnish, batches
from tests.conftest import REQUIRE_SERVERS
from tests.purge_checkers import checker, origin, redirecting
from tests.servers import free_port, varnish_process

VCL = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "varnish.vcl"


@pytest.fixture
def purging() -> Iterator[Callable[[object], Cache]]:
    """Make caches that purge where they are told; their purgers stop after the test."""
    made: list[Cache] = []

    def make(purge: object) -> Cache:
        made.append(Cache("memory://", purge=purge))
        return made[-1]

    yield make
    for cache in made:
        cache.purger.close()  # type: ignore[union-attr]


# -- surrogate keys ----------------------------------------------------------------------------


def test_a_plain_tag_is_its_own_key_and_any_other_a_stable_digest() -> None:
    assert surrogate_key("post:7") == "post:7"
    odd = ["two words", "a,b", "é", "x" * 300, 'quote"d']
    keys = [surrogate_key(tag) for tag in odd]
    assert all(key.startswith("mcache-") and len(key) == 31 for key in keys)
    assert len(set(keys)) == len(odd)
    assert keys == [surrogate_key(tag) for tag in odd]  # the purge side derives the same


def test_each_header_kind_names_every_tag_once_with_its_own_separator() -> None:
    tags = ["post:7", "posts", "post:7", "two words"]
    assert surrogate_header(HEADERS["xkey"], tags) == (
        "xkey",
        f"post:7 posts {surrogate_key('two words')}",
    )
    assert surrogate_header(HEADERS["cache-tag"], tags)[1].count(",") == 2
    assert surrogate_header(HEADERS["surrogate-key"], tags)[0] == "Surrogate-Key"
    assert surrogate_header(HEADERS["xkey"], []) is None


def test_keys_that_do_not_fit_in_one_header_are_refused_not_cut() -> None:
    with pytest.raises(KeysTooLong, match="xkey"):
        surrogate_header(HEADERS["xkey"], [f"tag-{n:05d}" for n in range(1000)])


def test_batches_hold_a_target_s_count_and_bytes() -> None:
    keys = [f"k{n}" for n in range(10)]
    assert [len(run) for run in batches(keys, 4, 1000)] == [4, 4, 2]
    assert all(len(" ".join(run)) <= 8 for run in batches(keys, 100, 8))
    assert [key for run in batches(keys, 3, 8) for key in run] == keys


# -- Fastly and Cloudflare: format tests against local checkers --------------------------------


def test_fastly_purge_request_format_against_a_local_checker(
    monkeypatch: pytest.MonkeyPatch, purging: Callable[[object], Cache]
) -> None:
    monkeypatch.setenv("FASTLY_TEST_TOKEN", "secret-token")
    with checker("fastly") as api:
        url = f"fastly://{api.ident}?token=env:FASTLY_TEST_TOKEN&soft=1&api={api.api}"
        cache = purging(url)
        cache.invalidate("post:7", "posts", "two words")
        assert cache.purger.flush(5)
    assert api.refused == []
    [request] = api.accepted
    odd = surrogate_key(cache.tags.label("two words"))  # the key a page names it by too
    assert request["body"] == {"surrogate_keys": ["post:7", "posts", odd]}
    assert request["headers"]["fastly-soft-purge"] == "1"


def test_cloudflare_purge_request_format_against_a_local_checker_in_batches_of_100(
    purging: Callable[[object], Cache],
) -> None:
    with checker("cloudflare", ident="ZONE9") as api:
        cache = purging(f"cloudflare://ZONE9?token=secret-token&api={api.api}")
        tags = [f"post:{n}" for n in range(250)]
        cache.invalidate(*tags)
        assert cache.purger.flush(5)
    assert api.refused == []
    assert [len(request["body"]["tags"]) for request in api.accepted] == [100, 100, 50]
    assert [tag for request in api.accepted for tag in request["body"]["tags"]] == tags


def test_a_malformed_request_is_refused_by_the_checker(
    purging: Callable[[object], Cache],
) -> None:
    with checker("fastly") as api:
        cache = purging(f"fastly://{api.ident}?token=wrong&api={api.api}")
        cache.invalidate("post:7")
        assert not cache.purger.flush(1)  # refused: kept, tried again later
    assert api.refused and api.refused[0] == "Fastly-Key"


# -- a purge endpoint that is down -------------------------------------------------------------


def test_a_down_endpoint_never_slows_or_fails_invalidate_and_is_caught_up(
    caplog: pytest.LogCaptureFixture, purging: Callable[[object], Cache]
) -> None:
    with checker("cloudflare", ident="Z") as api:
        api.down_for = 3
        purger = Purger(Cloudflare("Z", "secret-token", api=api.api), delay=0.01)
        cache = purging(purger)
        with caplog.at_level(logging.WARNING, logger="mcache"):
            started = time.monotonic()
            for n in range(20):
                assert cache.invalidate(f"post:{n}")  # the store's bump answered
            assert time.monotonic() - started < 0.5
            assert purger.flush(10)  # tried again after the back-off, then sent
        failures = [r for r in caplog.records if "purge failed" in r.getMessage()]
        assert len(failures) == 1  # once per interval, not once per attempt
        sent = [tag for request in api.accepted for tag in request["body"]["tags"]]
        assert sorted(sent) == sorted(f"post:{n}" for n in range(20))


def test_a_rate_limited_api_is_asked_again_no_sooner_than_its_retry_after(
    purging: Callable[[object], Cache],
) -> None:
    """A 429's ``Retry-After`` (2 s) is longer than the first back-off (0.5 s): the
    sender waits what the API asked, then sends the same tags."""
    with checker("cloudflare", ident="Z") as api:
        api.limited_for, api.retry_after = 1, "2"
        purger = Purger(Cloudflare("Z", "secret-token", api=api.api), delay=0.01, repeat_after=0)
        purging(purger).invalidate("post:1")
        assert purger.flush(10)
        assert [r["body"]["tags"] for r in api.accepted] == [["post:1"]]
        assert len(api.arrivals) == 2
        assert api.arrivals[1] - api.arrivals[0] >= 1.9


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, 0.0),
        ("", 0.0),
        ("7", 7.0),
        (" 7 ", 7.0),
        ("-3", 0.0),
        ("soon", 0.0),
        ("86400", 300.0),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
        ("Wed, 21 Oct 2015 07:27:50 GMT", 0.0),
    ],
)
def test_retry_after_is_read_as_seconds_or_a_date_and_bounded(
    header: str | None, seconds: float
) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert retry_after(header, now) == seconds


def test_a_closed_port_keeps_the_keys_pending(purging: Callable[[object], Cache]) -> None:
    port = free_port()  # nothing listens there
    purger = Purger(Varnish([f"http://127.0.0.1:{port}/"]), delay=0.01, timeout=1)
    purging(purger).invalidate("post:1")
    assert not purger.flush(0.5)
    assert purger.sent == 0


def test_each_key_is_purged_once_more_after_repeat_after(
    purging: Callable[[object], Cache],
) -> None:
    """A page built from the old rows while the first purge went out is caught by the second."""
    with checker("cloudflare", ident="Z") as api:
        purger = Purger(Cloudflare("Z", "secret-token", api=api.api), delay=0.01, repeat_after=0.3)
        purging(purger).invalidate("post:1")
        assert purger.flush(5)
        assert [r["body"]["tags"] for r in api.accepted] == [["post:1"]]
        deadline = time.monotonic() + 5
        while len(api.accepted) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.5)  # and not a third time
    assert [r["body"]["tags"] for r in api.accepted] == [["post:1"], ["post:1"]]


def test_an_unexpected_error_does_not_stop_the_sender(
    purging: Callable[[object], Cache],
) -> None:
    calls: list[str] = []

    def flaky(request: PurgeRequest, timeout: float) -> None:
        calls.append(request.headers["xkey-purge"])
        if len(calls) == 1:
            raise http.client.IncompleteRead(b"short")  # not a PurgeFailed

    purger = Purger(Varnish("http://127.0.0.1:9/"), delay=0.01, repeat_after=0, sender=flaky)
    cache = purging(purger)
    cache.invalidate("post:1")
    assert purger.flush(5)  # the failed batch was kept and sent after the back-off
    cache.invalidate("post:2")
    assert purger.flush(5)
    assert calls == ["post:1", "post:1", "post:2"]


def test_a_purge_api_that_redirects_is_not_followed(purging: Callable[[object], Cache]) -> None:
    """A redirect would carry the API token to another host: it is a failure instead."""
    with checker("cloudflare", ident="Z") as elsewhere, redirecting(elsewhere.api) as api:
        purger = Purger(Cloudflare("Z", "secret-token", api=api), delay=0.01, repeat_after=0)
        purging(purger).invalidate("post:1")
        assert not purger.flush(1)
    assert elsewhere.accepted == [] and elsewhere.refused == []


def test_a_forked_child_purges_on_a_thread_of_its_own(purging: Callable[[object], Cache]) -> None:
    with checker("cloudflare", ident="Z") as api:
        purger = Purger(Cloudflare("Z", "secret-token", api=api.api), delay=0.01, repeat_after=0)
        cache = purging(purger)
        cache.invalidate("parent")
        assert purger.flush(5)
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report over the pipe, leave without pytest's teardown
            try:
                cache.invalidate("child")
                os.write(writer, b"ok" if purger.flush(5) else b"stuck")
            finally:
                os._exit(0)
        os.close(writer)
        os.waitpid(pid, 0)
        assert os.read(reader, 8) == b"ok"
    assert [r["body"]["tags"] for r in api.accepted] == [["parent"], ["child"]]


def test_errors_never_show_a_token() -> None:
    for url in ("fastlly://svc?token=SECRET-1", "cloudflare://z?token=SECRET-1&soft=1"):
        with pytest.raises(ConfigError) as caught:
            Cache("memory://", purge=url)
        assert "SECRET-1" not in str(caught.value)
    request = Cloudflare("z", "SECRET-1").requests(["a"])[0]
    assert "SECRET-1" not in repr(request)


# -- settings ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("memcached://x", "unknown purge target"),
        ("fastly://SVC", "needs its API token"),
        ("fastly://SVC?token=env:MCACHE_NO_SUCH_VARIABLE", "MCACHE_NO_SUCH_VARIABLE"),
        ("cloudflare://Z?token=t&soft=1", "no soft purge"),
        ("varnish://", "names no Varnish"),
        (42, "must be a purge URL"),
    ],
)
def test_a_bad_purge_setting_fails_at_start_up_naming_it(value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        Cache("memory://", purge=value)
    assert "purge" in str(caught.value)


# -- a real Varnish with the xkey module, running the shipped VCL ------------------------------


def _fetch(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
        assert "xkey" not in response.headers  # the VCL keeps the keys from visitors
        return response.read().decode()


@pytest.fixture
def varnish_in_front():
    if shutil.which("varnishd") is None and not Path("/usr/sbin/varnishd").exists():
        message = "varnishd is not installed (apt-get install varnish varnish-modules)"
        if REQUIRE_SERVERS:
            pytest.fail(f"MCACHE_REQUIRE_SERVERS=1 but {message}", pytrace=False)
        pytest.skip(message)
    pages = {"post-7": "post:7 posts", "post-8": "post:8 posts", "about": "about"}
    with origin(pages) as site:
        varnish = varnish_process(VCL.read_text(), site.port).start(timeout=30)
        try:
            yield site, varnish
        finally:
            varnish.kill()


def test_varnish_purges_exactly_the_pages_of_an_invalidated_tag(
    varnish_in_front, purging: Callable[[object], Cache]
) -> None:
    _site, varnish = varnish_in_front
    for page in ("post-7", "post-8", "about"):
        assert _fetch(varnish.port, f"/{page}") == f"{page} #1"
        assert _fetch(varnish.port, f"/{page}") == f"{page} #1"  # Varnish's copy
    cache = purging(f"varnish://{varnish.purge_address}")
    cache.invalidate("post:7")
    assert cache.purger.flush(5)
    assert _fetch(varnish.port, "/post-7") == "post-7 #2"  # purged: fetched anew
    assert _fetch(varnish.port, "/post-8") == "post-8 #1"  # another tag: still kept
    cache.invalidate("posts")
    assert cache.purger.flush(5)
    assert _fetch(varnish.port, "/post-7") == "post-7 #3"
    assert _fetch(varnish.port, "/post-8") == "post-8 #2"
    assert _fetch(varnish.port, "/about") == "about #1"


def _purge_status(address: str) -> bytes:
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as conn:
        conn.sendall(b"PURGE / HTTP/1.1\r\nHost: x\r\nxkey-purge: posts\r\n\r\n")
        return conn.recv(100).split(b"\r\n", 1)[0]


def test_varnish_takes_purges_only_on_their_own_address_from_its_acl(varnish_in_front) -> None:
    site, varnish = varnish_in_front
    assert _purge_status(varnish.purge_address) == b"HTTP/1.1 200 Purged 0"
    assert _purge_status(varnish.address) == b"HTTP/1.1 403 Forbidden"  # the visitors' address
    text = VCL.read_text().replace('"127.0.0.1";', '"10.9.9.9";')
    outside = varnish_process(text, site.port).start(timeout=30)
    try:
        assert _purge_status(outside.purge_address) == b"HTTP/1.1 403 Forbidden"  # not in the ACL
    finally:
        outside.kill()


def test_the_docs_show_the_vcl_the_tests_run() -> None:
    page = (VCL.parent / "edge-purge.md").read_text(encoding="utf-8")
    assert f'```vcl title="varnish.vcl"\n{VCL.read_text(encoding="utf-8")}```' in page


def test_a_purger_that_never_sent_is_not_kept_alive_by_the_fork_hook() -> None:
    """A cache made to check a setting at start-up (then dropped) leaves nothing behind."""
    purger = Purger(Varnish(["http://127.0.0.1:9/"]))
    gone = weakref.ref(purger)
    del purger
    gc.collect()
    assert gone() is None
