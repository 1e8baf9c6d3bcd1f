"""Replica-lag routing with SQLAlchemy: ``FreshReadSession`` in a Flask app.

Two real SQLite files: the primary, and a replica the test copies the primary
into only when it says so (SQLite's backup API), so a read that went to the
replica shows the old data. A label is renamed on the primary without a tag
bump; a rebuild set off by a tag then shows which database it read.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import NamedTuple

import pytest
from flask import Flask
from sqlalchemy import String, create_engine, select, update
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

import mcache
from flask_mcache import MCache
from flask_mcache.sqlalchemy import FreshReadSession
from mcache.errors import ConfigError

LAG = 1.0


class Base(DeclarativeBase):
    pass


class Shelf(Base):
    __tablename__ = "shelves"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(50))


class Book(Base):
    __tablename__ = "books"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(50))


class Shop(NamedTuple):
    app: Flask
    mcache: MCache
    sessions: sessionmaker
    replicate: object
    primary: Path


def settle() -> None:
    """Let every tag created or bumped so far grow older than the lag."""
    time.sleep(LAG + 0.1)


@pytest.fixture
def shop(memcached_url: str, tmp_path: Path) -> Shop:
    primary, replica = tmp_path / "primary.db", tmp_path / "replica.db"
    engine = create_engine(f"sqlite:///{primary}")
    Base.metadata.create_all(engine)
    sessions = sessionmaker(engine, class_=FreshReadSession)

    def replicate() -> None:
        with sqlite3.connect(primary) as source, sqlite3.connect(replica) as target:
            source.backup(target)

    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        MCACHE_URL=memcached_url,
        MCACHE_NAMESPACE=f"frs{time.monotonic_ns()}",
        MCACHE_REPLICA_BIND=f"sqlite:///{replica}",
        MCACHE_REPLICATION_LAG=LAG,
        TESTING=True,
    )
    extension = MCache(app)
    extension.watch_sqlalchemy(sessions, app)
    with app.app_context():
        with sessions.begin() as db:  # bumps the models' tags: they are not older than this
            db.add_all([Shelf(id=1, label="old"), Book(id=1, title="hello")])
        replicate()
        yield Shop(app, extension, sessions, replicate, primary)


def shelf_label(shop: Shop) -> str:
    with shop.sessions() as db:
        return db.scalars(select(Shelf.label)).one()


def rename_on_the_primary(shop: Shop, label: str) -> None:
    """A change the replica has not replayed yet, and that bumps no tag."""
    with sqlite3.connect(shop.primary) as db:
        db.execute("UPDATE shelves SET label = ?", (label,))


def test_a_rebuild_set_off_by_a_rows_commit_reads_the_primary(shop: Shop) -> None:
    with shop.sessions() as db:
        book = db.get(Book, 1)

    @shop.mcache.cached(60, depends_on=[book])
    def page() -> str:
        with shop.sessions() as db:
            return f"{db.get(Book, 1).title} [{shelf_label(shop)}]"

    assert page() == "hello [old]"
    settle()
    rename_on_the_primary(shop, "new")
    with shop.sessions.begin() as db:
        db.get(Book, 1).title = "hello again"  # the commit bumps the book's tags
    assert page() == "hello again [new]", "the shelf was read from the primary"


def test_a_rebuild_set_off_by_invalidate_reads_the_primary(shop: Shop) -> None:
    labels = shop.mcache.cached(60, tags=["shelves"])(lambda: shelf_label(shop))
    assert labels() == "old"
    settle()
    rename_on_the_primary(shop, "new")
    shop.mcache.cache.invalidate("shelves")
    assert labels() == "new"


def test_a_rebuild_set_off_by_a_nested_entrys_tag_reads_the_primary(shop: Shop) -> None:
    sidebar = shop.mcache.cached(60, tags=["sidebar"])(lambda: "sidebar")
    page = shop.mcache.cached(60)(lambda: f"{sidebar()} + {shelf_label(shop)}")
    assert page() == "sidebar + old"
    settle()
    rename_on_the_primary(shop, "new")
    shop.mcache.cache.invalidate("sidebar")
    assert page() == "sidebar + new"


def test_after_the_lag_the_rebuild_reads_the_replica(shop: Shop) -> None:
    labels = shop.mcache.cached(60, tags=["shelves"])(lambda: shelf_label(shop))
    assert labels() == "old"
    settle()
    rename_on_the_primary(shop, "new")
    shop.mcache.cache.invalidate("shelves")
    settle()
    assert labels() == "old", "read from the replica"
    shop.replicate()
    shop.mcache.cache.invalidate("shelves")
    assert labels() == "new"


def test_a_build_with_no_recent_tag_reads_the_replica(shop: Shop) -> None:
    seen = []

    def labels() -> str:
        seen.append(mcache.read_primary())
        return shelf_label(shop)

    shop.mcache.cached(60, tags=["shelves"], key_prefix="warm")(lambda: None)()
    settle()
    rename_on_the_primary(shop, "new")
    assert shop.mcache.cached(60, tags=["shelves"], key_prefix="cold")(labels)() == "old"
    assert seen == [False]


def test_writes_and_reads_after_them_go_to_the_primary(shop: Shop) -> None:
    settle()
    rename_on_the_primary(shop, "new")
    assert shelf_label(shop) == "old", "a plain read: the replica"
    with shop.sessions.begin() as db:
        db.execute(update(Book).values(title="written"))  # a write: the primary
        db.add(Book(id=2, title="two"))
        db.flush()
        assert db.scalars(select(Shelf.label)).one() == "new", "after its own write: the primary"
    with shop.sessions() as db:
        assert db.get(Book, 2).title == "two", "books changed within the lag: the primary"
        assert db.scalars(select(Shelf.label)).one() == "old", "shelves did not: the replica"


def test_a_replica_bind_that_is_no_url_fails_at_init_app(memcached_url: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_REPLICA_BIND="replica")
    with pytest.raises(ConfigError, match="MCACHE_REPLICA_BIND 'replica' is not a database URL"):
        MCache(app)
    app.config.update(MCACHE_REPLICA_BIND=None, MCACHE_REPLICATION_LAG="2s")
    with pytest.raises(ConfigError, match="MCACHE_REPLICATION_LAG must be an int or float"):
        MCache(app)
