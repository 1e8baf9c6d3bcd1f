"""The Flask example in this process: every page, an edit and a new post, via the test client."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from example_project.flask_app import Base, Blog, Post, check, create_app
from tests.example_pages import footer_disagrees, footer_status, online_shown
from tests.servers import free_port


@pytest.fixture
def database(tmp_path: Path) -> str:
    """A SQLite file with the example's tables (as Django's migrations make them) and a blog."""
    path = tmp_path / "example.sqlite3"
    engine = create_engine(f"sqlite:///{path}")
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        cooking = Blog(name="Cooking at home", slug="cooking")
        session.add(cooking)
        session.flush()
        start = datetime(2026, 11, 1, 12)
        session.add_all(
            Post(
                blog_id=cooking.id,
                title=f"Note {i}",
                body="salt " * 20,
                published=start - timedelta(hours=7 * i),
                views=0,
            )
            for i in range(12)
        )
    engine.dispose()
    return str(path)


def test_every_page_answers_hits_and_follows_edits(
    database: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = check(create_app(database))
    printed = capsys.readouterr().out
    assert status == 0, printed
    assert "FAIL" not in printed and printed.count("ok   ") == 15, printed


VISITOR = {"User-Agent": "Mozilla/5.0 (example)"}


def test_the_header_count_is_a_hole_filled_on_every_hit(database: str, monkeypatch) -> None:
    """The Django page's count is a ``{% nocache %}`` hole; the Flask twin's is too, and it
    counts the visitor looking (the minute filling now included)."""
    monkeypatch.setenv("MCACHE_URL", "memory://")
    client = create_app(database).test_client()
    pages = [
        client.get("/", headers=VISITOR, environ_base={"REMOTE_ADDR": f"10.0.0.{n}"})
        for n in (1, 2, 3)
    ]
    assert [page.headers["X-Cache"] for page in pages] == ["MISS", "HIT", "HIT"]
    shown = [online_shown(page.get_data(as_text=True)) for page in pages]
    assert shown == [1, 2, 3], "each visitor is online at once, on hits too"


@pytest.mark.parametrize("store", ["memory", "down"])
def test_the_footer_says_what_the_headers_say(database: str, monkeypatch, store: str) -> None:
    url = "memory://" if store == "memory" else f"memcached://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MCACHE_URL", url)
    client = create_app(database).test_client()
    reasons = set()
    for path in ("/", "/blogs/cooking/", "/posts/1/", "/calendar/"):
        for _ in range(2):
            page = client.get(path, headers=VISITOR)
            state, reason = page.headers.get("X-Cache"), page.headers.get("X-Cache-Reason")
            reasons.add(reason)
            html = page.get_data(as_text=True)
            assert not footer_disagrees(html, state, reason), (path, footer_status(html))
    assert ("store-down" in reasons) == (store == "down")


@pytest.mark.parametrize("url", ["memory://", "memcached"])
def test_the_home_page_says_whether_a_django_edit_shows_here(
    database: str, monkeypatch, url: str, request: pytest.FixtureRequest
) -> None:
    url = request.getfixturevalue("memcached_url") if url == "memcached" else url
    monkeypatch.setenv("MCACHE_URL", url)
    home = create_app(database).test_client().get("/").get_data(as_text=True)
    if url == "memory://":
        assert "each process has a cache of its own" in home
        assert "Start memcached" in home
    else:
        assert f"this app's\npages follow at once, both apps sharing {url}" in home
