"""SQLAlchemy sessions bump model and row tags: at flush, again at commit, never stored mid-way."""

from __future__ import annotations

import pytest
from flask import Flask
from sqlalchemy import ForeignKey, String, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from flask_mcache import MCache


class Base(DeclarativeBase):
    pass


class Blog(Base):
    __tablename__ = "blogs"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(50))


class Post(Base):
    __tablename__ = "posts"
    id: Mapped[int] = mapped_column(primary_key=True)
    title: Mapped[str] = mapped_column(String(100))
    blog_id: Mapped[int | None] = mapped_column(ForeignKey("blogs.id"), nullable=True)


@pytest.fixture
def site(memcached_url: str):
    engine = create_engine(
        "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
    )
    Base.metadata.create_all(engine)
    Sessions = sessionmaker(engine)
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(MCACHE_URL=memcached_url, MCACHE_NAMESPACE="sa")
    mcache = MCache(app)
    mcache.watch_sqlalchemy(Sessions, app)

    @app.get("/posts")
    @mcache.cached_view(ttl=60, tags=["model:posts"])
    def posts():
        with Sessions() as session:
            return ",".join(session.scalars(select(Post.title).order_by(Post.id)))

    @app.get("/blogs/<int:pk>")
    @mcache.cached_view(ttl=60, tags=lambda pk: [f"obj:blogs:{pk}"])
    def blog(pk):
        with Sessions() as session:
            titles = session.scalars(select(Post.title).where(Post.blog_id == pk).order_by(Post.id))
            return f"blog {pk}: " + ",".join(titles)

    return app, mcache, Sessions


def test_insert_update_delete_invalidate_after_commit(site) -> None:
    app, _, Sessions = site
    client = app.test_client()
    assert client.get("/posts").data == b""
    with Sessions() as session, session.begin():
        session.add(Post(title="one"))
    assert client.get("/posts").data == b"one"
    with Sessions() as session, session.begin():
        session.scalars(select(Post)).one().title = "edited"
    assert client.get("/posts").data == b"edited"
    assert client.get("/posts").headers["X-Cache"] == "HIT"
    with Sessions() as session, session.begin():
        session.delete(session.scalars(select(Post)).one())
    assert client.get("/posts").data == b""


def test_a_moved_row_refreshes_its_old_and_new_parent(site) -> None:
    app, _, Sessions = site
    client = app.test_client()
    with Sessions() as session, session.begin():
        session.add_all(
            [Blog(id=1, name="a"), Blog(id=2, name="b"), Post(id=1, title="p", blog_id=1)]
        )
    assert client.get("/blogs/1").data == b"blog 1: p"
    assert client.get("/blogs/2").data == b"blog 2: "
    with Sessions() as session, session.begin():
        session.get(Post, 1).blog_id = 2
    assert client.get("/blogs/1").data == b"blog 1: "
    assert client.get("/blogs/2").data == b"blog 2: p"


def test_nothing_built_from_flushed_data_survives_a_rollback(site) -> None:
    app, mcache, Sessions = site
    with app.app_context():
        session: Session = Sessions()
        session.add(Post(title="never committed"))
        session.flush()
        inside = mcache.get_or_build(
            "home",
            lambda: ",".join(session.scalars(select(Post.title))),
            tags=["model:posts"],
        )
        assert inside == "never committed"
        session.rollback()
        session.close()
        assert mcache.get_or_build("home", lambda: "committed view", tags=["model:posts"]) == (
            "committed view"
        )
        assert (
            mcache.get_or_build("home", lambda: "again", tags=["model:posts"]) == "committed view"
        )


def test_an_entry_rebuilt_between_flush_and_commit_dies_at_commit(site) -> None:
    import threading

    app, mcache, Sessions = site
    with app.app_context():
        session = Sessions()
        session.add(Post(title="new"))
        session.flush()
        seen: list[str] = []

        def other_request() -> None:
            with app.app_context():
                seen.append(mcache.get_or_build("home", lambda: "old data", tags=["model:posts"]))

        thread = threading.Thread(target=other_request)
        thread.start()
        thread.join()
        assert seen == ["old data"]
        session.commit()
        session.close()
        assert mcache.get_or_build("home", lambda: "new data", tags=["model:posts"]) == "new data"


def test_a_session_closed_without_commit_lets_caching_resume(site) -> None:
    app, mcache, Sessions = site
    with app.app_context():
        session = Sessions()
        session.add(Post(title="abandoned"))
        session.flush()
        session.close()  # no commit, no explicit rollback
        assert mcache.get_or_build("home", lambda: "stored", tags=["model:posts"]) == "stored"
        assert mcache.get_or_build("home", lambda: "rebuilt", tags=["model:posts"]) == "stored"


def test_a_released_savepoint_keeps_the_outer_transaction_pending(site) -> None:
    from flask_mcache.sqlalchemy import may_store

    app, mcache, Sessions = site
    with app.app_context():
        assert mcache.get_or_build("home", lambda: "before", tags=["model:posts"]) == "before"
        session = Sessions()
        session.add(Post(title="outer"))
        session.flush()
        with session.begin_nested():
            session.add(Post(title="inner"))
        assert may_store() is False, "still uncommitted after the savepoint's release"
        session.commit()
        assert may_store() is True
        assert mcache.get_or_build("home", lambda: "after", tags=["model:posts"]) == "after"
        session.close()


def test_a_dropped_session_does_not_stop_caching(site) -> None:
    import gc

    from flask_mcache.sqlalchemy import may_store

    _, _, Sessions = site
    session = Sessions()
    session.add(Post(title="dropped"))
    session.flush()
    assert may_store() is False
    session.connection().close()
    del session
    gc.collect()
    assert may_store() is True


def test_flask_sqlalchemy_db(memcached_url: str) -> None:
    from flask_sqlalchemy import SQLAlchemy

    app = Flask("fsa")
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(
        SQLALCHEMY_DATABASE_URI="sqlite://", MCACHE_URL=memcached_url, MCACHE_NAMESPACE="fsa"
    )
    db = SQLAlchemy(app)

    class Note(db.Model):
        __tablename__ = "notes"
        id: Mapped[int] = mapped_column(primary_key=True)
        text: Mapped[str] = mapped_column(String(50))

    mcache = MCache(app)
    mcache.watch_sqlalchemy(db, app)

    @app.get("/notes")
    @mcache.cached_view(ttl=60, tags=["model:notes"])
    def notes():
        return ",".join(n.text for n in db.session.scalars(select(Note).order_by(Note.id)))

    with app.app_context():
        db.create_all()
    client = app.test_client()
    assert client.get("/notes").data == b""
    assert client.get("/notes").headers["X-Cache"] == "HIT"
    with app.app_context():
        db.session.add(Note(text="hello"))
        db.session.commit()
    assert client.get("/notes").data == b"hello"


def test_a_memoized_function_takes_tags_of_its_arguments_and_models_it_depends_on(site) -> None:
    app, mcache, Sessions = site
    calls: list[int] = []

    @mcache.cached(ttl=60, tags=lambda pk: [f"blog:{pk}"], depends_on=Post)
    def titles(pk: int) -> str:
        calls.append(pk)
        with Sessions() as session:
            return ",".join(session.scalars(select(Post.title).where(Post.blog_id == pk)))

    with app.app_context():
        assert titles(1) == titles(1) == ""
        assert calls == [1], "built once"
        mcache.invalidate("blog:2")
        assert titles(1) == "" and calls == [1], "another blog's tag leaves it"
        mcache.invalidate("blog:1")
        assert titles(1) == "" and calls == [1, 1], "its own tag makes it stale"
        with Sessions() as session, session.begin():
            session.add(Blog(id=1, name="b"))
            session.add(Post(title="new", blog_id=1))
        assert titles(1) == "new", "a commit of the model it depends on makes it stale"
