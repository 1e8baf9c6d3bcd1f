"""The example blog's read side in Flask: SQLAlchemy over the same database, flask_mcache.

    python -m example_project.flask_app [--port 8001] [--check]

The Django example migrates and seeds the database first (shared data); this
app maps the same tables with SQLAlchemy and caches its pages with
``flask_mcache``: an edit committed through SQLAlchemy refreshes them at once,
and so does one made in the Django admin when both apps use one memcached or
Redis (with no ``MCACHE_URL``, both take a memcached running on 127.0.0.1:11211:
see ``store.py``). Its templates are loaded by name, as ``{% nocache %}`` holes
need: the header's online count is one, filled for every request.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
import time
from datetime import datetime, timedelta, timezone

from flask import Flask, Response, abort, g, render_template
from jinja2 import DictLoader
from sqlalchemy import ForeignKey, String, create_engine, func, select
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, sessionmaker

from example_project.cache_footer import STYLESHEET, filled
from example_project.checklist import CHECK_POSTS, Checklist, check_slug, view_count_moved
from example_project.store import shared
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


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{% block title %}{% endblock %} · Field Notes (Flask)</title>
<link rel="stylesheet" href="/site.css"></head>
<body><header><a class="site" href="/">Field Notes</a> <a href="/calendar/">Calendar</a>
<span class="online" title="visitors of this minute and the four before it">
{% nocache %}{{ online_count(current=True) }}{% endnocache %} online</span></header>
<main>{% block body %}{% endblock %}</main>
<footer>{% block rendered %}Page rendered at {{ now() }} UTC.{% endblock %}
This request: <!--mcache-status-->
"Online" counts the visitors of this minute and the four before it, you included.</footer>
</body></html>"""
LISTED = """<ul class="posts">{% for p in posts %}<li>
<h2><a href="/posts/{{ p.id }}/">{{ p.title }}</a></h2>
<div class="meta">{{ p.published.strftime("%-d %B %Y") }}</div>
<p class="excerpt">{{ p.body | truncate(160) }}</p></li>{% endfor %}</ul>"""
HOME = (
    """{% extends "page.html" %}{% block title %}Latest posts{% endblock %}{% block body %}
<aside class="try"><h2>What to try</h2><ol>
<li>Reload this page: the footer says MISS once, then HIT.</li>
<li>Open <a href="/calendar/">the calendar</a> twice.</li>
{% if shared_store %}<li>Edit a post in the Django example's admin
(<code>python -m example_project</code>, then http://127.0.0.1:8000/admin/): this app's
pages follow at once, both apps sharing {{ store }}.</li>
{% else %}<li>An edit made in the Django example's admin shows here only when this app's
five minutes are up: on {{ store }} each process has a cache of its own. Start memcached
on 127.0.0.1:11211 (or give both apps one <code>MCACHE_URL</code>) and restart both, and
this app's pages follow at once.</li>{% endif %}
</ol></aside><h1>Latest posts</h1>"""
    + LISTED
    + """{% endblock %}"""
)
BLOG = (
    """{% extends "page.html" %}{% block title %}{{ blog.name }}{% endblock %}{% block body %}
<h1>{{ blog.name }}</h1>"""
    + LISTED
    + """{% endblock %}"""
)
POST = """{% extends "page.html" %}{% block title %}{{ post.title }}{% endblock %}{% block body %}
<h1>{{ post.title }}</h1>
<div class="meta">{{ post.published.strftime("%-d %B %Y") }} ·
{{ count_view('post:' ~ post.id) }} views</div>
{% mcache 600, 'post-body', tags=tags, vary=[post.id] %}<div class="fragment"><article>
{% for paragraph in post.body.split("\n\n") %}<p>{{ paragraph }}</p>{% endfor %}</article>
<p class="meta">this text is a cached fragment, rendered at {{ now() }} UTC</p></div>
{% endmcache %}{% endblock %}
{% block rendered %}The page is rendered for every request (its view count moves); its text
is the cached fragment above.{% endblock %}"""
CALENDAR = """{% extends "page.html" %}{% block title %}Calendar{% endblock %}{% block body %}
<h1>Posts per day</h1><table><thead><tr><th>Day</th><th class="number">Posts</th></tr>
</thead><tbody>{% for day, posts in rows %}<tr><td>{{ day }}</td>
<td class="number">{{ posts }}</td></tr>{% endfor %}</tbody></table>{% endblock %}"""
# Each adapter names tags its own way (SQLAlchemy: tables; Django: app labels). The pages
# carry both, and share the Django site's namespace, so an edit in either app (Django's
# admin included) refreshes them at once when both run on one memcached or Redis.
POSTS = ["model:blog_post", "model:blog.post"]
BLOGS = ["model:blog_blog", "model:blog.blog"]


def create_app(database: str, namespace: str = "example") -> Flask:
    """Return the Flask app reading ``database`` (a SQLite file the Django example prepared)."""
    engine = create_engine(f"sqlite:///{database}")
    sessions = sessionmaker(engine)
    app = Flask("example_project.flask_app")
    app.config.update(
        SECRET_KEY=os.environ.get("MCACHE_EXAMPLE_SECRET", "example-only-not-secret"),
        MCACHE_URL=os.environ.get("MCACHE_URL", "memory://"),
        MCACHE_NAMESPACE=namespace,
        MCACHE_STALE_TTL=600,
        MCACHE_ONLINE=True,
    )
    mcache = MCache(app)
    mcache.watch_sqlalchemy(sessions, app)
    app.sessions = sessions  # type: ignore[attr-defined]
    app.jinja_loader = DictLoader(
        {"page.html": PAGE, "home.html": HOME, "blog.html": BLOG, "post.html": POST,
         "calendar.html": CALENDAR}
    )  # fmt: skip
    store = app.config["MCACHE_URL"]
    app.jinja_env.globals["now"] = lambda: datetime.now(timezone.utc).strftime("%H:%M:%S")

    @app.before_request
    def start_clock() -> None:
        g.started = time.perf_counter()

    @app.after_request
    def say_what_the_cache_did(response: Response) -> Response:
        if response.mimetype == "text/html" and not response.is_streamed:
            took = time.perf_counter() - g.get("started", time.perf_counter())
            state, reason = response.headers.get("X-Cache"), response.headers.get("X-Cache-Reason")
            data = response.get_data()
            body = filled(data, state, reason, took)
            if body is not data:  # a page with the footer's marker
                response.set_data(body)
        return response

    @app.get("/site.css")
    def stylesheet() -> Response:
        return Response(
            STYLESHEET.read_bytes(), mimetype="text/css", headers={"Cache-Control": "max-age=3600"}
        )

    @app.get("/")
    @mcache.cached_view(ttl=300, tags=POSTS)
    def home():
        with sessions() as session:
            posts = session.scalars(select(Post).order_by(Post.published.desc()).limit(10)).all()
            return render_template(
                "home.html", posts=posts, store=store, shared_store=shared(store)
            )

    @app.get("/blogs/<slug>/")
    @mcache.cached_view(ttl=300, tags=POSTS + BLOGS)
    def blog(slug):
        with sessions() as session:
            found = session.scalars(select(Blog).where(Blog.slug == slug)).first()
            if found is None:
                abort(404)
            posts = session.scalars(
                select(Post).where(Post.blog_id == found.id).order_by(Post.published.desc())
            ).all()
            return render_template("blog.html", blog=found, posts=posts)

    @app.get("/posts/<int:pk>/")
    def post(pk):
        with sessions() as session:
            found = session.get(Post, pk)
            if found is None:
                abort(404)
            tags = [f"obj:blog_post:{pk}", f"obj:blog.post:{pk}"]
            return render_template("post.html", post=found, tags=tags)

    @app.get("/calendar/")
    @mcache.cached_view(ttl=600, tags=POSTS, refresh="background")
    def calendar():
        with sessions() as session:
            day = func.date(Post.published)
            rows = session.execute(select(day, func.count()).group_by(day).order_by(day.desc()))
            return render_template("calendar.html", rows=rows.all())

    return app


def check(app: Flask) -> int:
    """Walk every page twice, edit and add posts through SQLAlchemy, and see the pages follow.

    As the Django check, it walks a blog it creates for itself (on top of the
    latest posts) and deletes after: whatever an admin did to the demo data,
    the check holds and leaves the data as it found it.
    """
    slug = check_slug()
    with app.sessions() as session, session.begin():  # type: ignore[attr-defined]
        newest = session.scalar(select(func.max(Post.published))) or datetime.now()
        top = max(datetime.now(), newest) + timedelta(minutes=1)
        blog = Blog(name=f"Check {slug}", slug=slug)
        session.add(blog)
        session.flush()
        blog_id = blog.id
        for i in range(CHECK_POSTS):
            published = top - timedelta(hours=i)
            session.add(
                Post(
                    blog_id=blog_id,
                    title=f"Check post {i}",
                    body="check",
                    views=0,
                    published=published,
                )
            )
    try:
        return _walk(app, slug, blog_id, top)
    finally:  # leave the data as it was
        with app.sessions() as session, session.begin():  # type: ignore[attr-defined]
            for post in session.scalars(select(Post).where(Post.blog_id == blog_id)):
                session.delete(post)
            session.delete(session.get(Blog, blog_id))


def _walk(app: Flask, slug: str, blog_id: int, top: datetime) -> int:
    client = app.test_client()
    checks = Checklist()
    for path, shown in (
        ("/", "Latest posts"),
        (f"/blogs/{slug}/", f"Check {slug}"),
        ("/calendar/", "day"),
    ):
        first, second = client.get(path), client.get(path)
        checks.expect(first.status_code == second.status_code == 200, f"{path} answers 200")
        checks.expect(shown.encode() in first.data, f"{path} shows {shown!r}")
        checks.expect(second.headers.get("X-Cache") == "HIT", f"{path} is a hit the second time")
    with app.sessions() as session, session.begin():  # type: ignore[attr-defined]
        latest = session.scalars(select(Post).order_by(Post.published.desc())).first()
        pk = latest.id
        latest.title = "Edited <through> SQLAlchemy"
    home = client.get("/").data
    edited = b"Edited &lt;through&gt; SQLAlchemy" in home
    checks.expect(edited, "/ shows the edit at once, escaped")
    views = [client.get(f"/posts/{pk}/").data for _ in range(2)]
    checks.expect(b"Edited &lt;through&gt;" in views[0], "the post page shows it")
    checks.expect(view_count_moved(views[0], views[1]), "a post's view count moves")
    online = re.search(rb"\d+ online", views[1]) is not None
    checks.expect(online, "it shows the online count")
    with app.sessions() as session, session.begin():  # type: ignore[attr-defined]
        new = Post(
            blog_id=blog_id, title="Added through SQLAlchemy", body="new", published=top, views=0
        )
        session.add(new)
    listing = client.get(f"/blogs/{slug}/").data
    shown = b"Added through SQLAlchemy" in listing
    checks.expect(shown, "the blog's list shows a new post at once")
    rebuilt = client.get("/calendar/").headers.get("X-Cache")
    checks.expect(rebuilt in ("MISS", "STALE"), "the calendar is rebuilt after the new post")
    return checks.verdict()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m example_project.flask_app",
        description="Serve the example blog's Flask twin on http://127.0.0.1:8001/, over the"
        " Django example's database (migrated and seeded first, as python -m example_project"
        " does).",
    )
    parser.add_argument("--port", type=int, default=8001, help="the port to serve on (8001)")
    parser.add_argument(
        "--check", action="store_true", help="walk every page, edit a post, check, and exit"
    )
    args = parser.parse_args(argv)
    from django.conf import settings

    from example_project.__main__ import prepare
    from example_project.store import choose_store

    why = choose_store()  # before prepare(), which keeps what this chose
    prepare()
    namespace = f"flask-check-{secrets.token_hex(4)}" if args.check else "example"
    app = create_app(settings.DATABASES["default"]["NAME"], namespace)
    if args.check:
        return check(app)
    store = app.config["MCACHE_URL"]
    print(f"mcache example blog (Flask) on http://127.0.0.1:{args.port}/")
    print(f"  store: {store} ({why})")
    if shared(store):
        print("  an edit in the Django example's admin refreshes this app's pages at once")
    else:
        print("  an edit in the Django example's admin shows here only when a page expires")
        print("  (5 min): start memcached on 127.0.0.1:11211 and restart both to share one")
    app.run("127.0.0.1", args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
