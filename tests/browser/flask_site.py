"""A Flask site with the cache dashboard mounted at ``/cache/``, for the browser tests.

Served by gunicorn (``tests.browser.flask_site:app``) on the memcached server
``MCACHE_DASHBOARD_MEMCACHED`` names, counting families. The dashboard's ``allow`` is
the site's own rule: a session that signed in as staff at ``/staff-login``.
"""

from __future__ import annotations

import os

from flask import Flask, redirect, session

from flask_mcache import MCache
from flask_mcache.dashboard import dashboard_blueprint

app = Flask(__name__)
app.config.update(
    SECRET_KEY="tests-only-not-secret",
    MCACHE_URL=f"memcached://{os.environ.get('MCACHE_DASHBOARD_MEMCACHED', '')}",
    MCACHE_NAMESPACE="flask-dashboard",
    MCACHE_METRICS=["families"],
    MCACHE_STATS_INTERVAL=0.2,
    MCACHE_TRUST_UNSIGNED_PICKLE=True,
)
mcache = MCache(app)


@app.get("/news/")
@mcache.cached_view(60, tags=["news"], stale_ttl=0)
def news() -> str:
    return "<h1>News</h1>"


@app.get("/staff-login")
def staff_login():  # the site's own sign-in, reduced to what the test needs
    session["staff"] = True
    return redirect("/cache/")


app.register_blueprint(
    dashboard_blueprint(allow=lambda: session.get("staff", False), user=lambda: "staff"),
    url_prefix="/cache",
)
