"""The Flask example in this process: every page, an edit and a new post, via the test client."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session

from example_project.flask_app import Base, Blog, Post, check, create_app


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
