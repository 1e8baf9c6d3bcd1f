"""The example blog's read side in Flask: SQLAlchemy over the same database, flask_mcache.

    python -m example_project.flask_app [--port 8001] [--check]

The Django example migrates and seeds the database first (shared data); this
app maps the same tables with SQLAlchemy and caches its pages with
``flask_mcache``: an edit committed through SQLAlchemy refreshes them at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime

from flask import Flask, abort, render_template_string
from sqlalchemy import ForeignKey, String, create_engine, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from flask_mcache import MCache


class Base(DeclarativeBase):
    pass


class Blog(Base):
    __tablename__ = "blog_blog"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100))
    slug: Mapped[str] = mapped_column(String(50))


class Post(Base):
    __tablename__ = "blog_post"
    id: Mapped[int] = mapped_column(primary_key=True)
    blog_id: Mapped[int] = mapped_column(ForeignKey("blog_blog.id"))
    title: Mapped[str] = mapped_column(String(200))
    body: Mapped[str]
    published: Mapped[datetime]
    views: Mapped[int]


PAGE = """<!doctype html><title>mcache example (Flask)</title>
<p><a href="/">Home</a> · {{ online_count() }} online</p>{{ body|safe }}"""
POSTS = "model:blog_post"


def create_app(database: str) -> Flask:
    """Return the Flask app reading ``database`` (a SQLite file the Django example prepared)."""
    engine = create_engine(f"sqlite:///{database}")
    sessions = sessionmaker(engine)
    app = Flask("example_project.flask_app")
    app.config.update(
        SECRET_KEY=os.environ.get("MCACHE_EXAMPLE_SECRET", "example-only-not-secret"),
        MCACHE_URL=os.environ.get("MCACHE_URL", "memory://"),
        MCACHE_NAMESPACE="flask-example",
        MCACHE_STALE_TTL=600,
        MCACHE_ONLINE=True,
    )
    mcache = MCache(app)
    mcache.watch_sqlalchemy(sessions, app)
    app.sessions = sessions  # type: ignore[attr-defined]

    @app.get("/")
    @mcache.cached_view(ttl=300, tags=[POSTS])
    def home():
        with sessions() as session:
            posts = session.scalars(select(Post).order_by(Post.published.desc()).limit(10)).all()
            items = "".join(f'<li><a href="/posts/{p.id}/">{p.title}</a></li>' for p in posts)
        return render_template_string(PAGE, body=f"<h1>Latest posts</h1><ul>{items}</ul>")

    @app.get("/blogs/<slug>/")
    @mcache.cached_view(ttl=300, tags=[POSTS, "model:blog_blog"])
    def blog(slug):
        with sessions() as session:
            found = session.scalars(select(Blog).where(Blog.slug == slug)).first()
            if found is None:
                abort(404)
            titles = session.scalars(select(Post.title).where(Post.blog_id == found.id)).all()
        items = "".join(f"<li>{t}</li>" for t in titles)
        return render_template_string(PAGE, body=f"<h1>{found.name}</h1><ul>{items}</ul>")

    @app.get("/posts/<int:pk>/")
    def post(pk):
        with sessions() as session:
            found = session.get(Post, pk)
            if found is None:
                abort(404)
            return render_template_string(
                "{% mcache 600, 'post-body', tags=[tag], vary=[post.id] %}"
                "<h1>{{ post.title }}</h1><article>{{ post.body }}</article>{% endmcache %}"
                "<p>{{ count_view('post:' ~ post.id) }} views</p>",
                post=found,
                tag=f"obj:blog_post:{pk}",
            )

    @app.get("/calendar/")
    @mcache.cached_view(ttl=600, tags=[POSTS], refresh="background")
    def calendar():
        with sessions() as session:
            day = func.date(Post.published)
            rows = session.execute(select(day, func.count()).group_by(day).order_by(day.desc()))
            table = "".join(f"<tr><td>{d}</td><td>{n}</td></tr>" for d, n in rows)
        return render_template_string(PAGE, body=f"<h1>Posts per day</h1><table>{table}</table>")

    return app


def check(app: Flask) -> int:
    """Walk every page twice, edit a post through SQLAlchemy, and check the home page shows it."""
    client = app.test_client()
    problems = []
    for path in ("/", "/blogs/cooking/", "/calendar/"):
        first, second = client.get(path), client.get(path)
        ok = first.status_code == second.status_code == 200 and second.headers["X-Cache"] == "HIT"
        print(("ok   " if ok else "FAIL ") + f"{path} answers, then hits")
        problems += [] if ok else [path]
    with app.sessions() as session, session.begin():  # type: ignore[attr-defined]
        latest = session.scalars(select(Post).order_by(Post.published.desc())).first()
        latest.title = "Edited through SQLAlchemy"
        pk = latest.id
    shown = b"Edited through SQLAlchemy" in client.get("/").data
    print(("ok   " if shown else "FAIL ") + "/ shows the edit at once")
    views = [client.get(f"/posts/{pk}/").data for _ in range(2)]
    counted = b"1 views" in views[0] and b"2 views" in views[1]
    print(("ok   " if counted else "FAIL ") + "a post's view count moves")
    problems += [] if shown else ["edit"]
    problems += [] if counted else ["views"]
    print("all pages fine" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m example_project.flask_app")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--check", action="store_true", help="walk every page once and exit")
    args = parser.parse_args(argv)
    from django.conf import settings

    from example_project.__main__ import prepare

    prepare()
    app = create_app(settings.DATABASES["default"]["NAME"])
    if args.check:
        return check(app)
    print(f"mcache example blog (Flask) on http://127.0.0.1:{args.port}/")
    app.run("127.0.0.1", args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
