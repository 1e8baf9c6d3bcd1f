"""A Flask site with server-side sessions and a sign-in form, for the session outage test.

Served by gunicorn (``tests.browser.flask_sessions_site:app``) with its sessions on the
store ``MCACHE_OUTAGE_SESSIONS`` names (memcached alone, or tiered over SQLite).
"""

from __future__ import annotations

import os

from flask import Flask, redirect, request, session
from markupsafe import escape

from flask_mcache import MCache

app = Flask(__name__)
app.config.update(
    SECRET_KEY="tests-only-not-secret",
    MCACHE_URL="memory://",
    MCACHE_SESSIONS=True,
    MCACHE_SESSION_URL=os.environ["MCACHE_OUTAGE_SESSIONS"],
)
MCache(app)


@app.get("/")
def home() -> str:
    who = session.get("user")
    title = f"Signed in as {escape(who)}" if who else "Signed out"
    return (
        f"<title>{title}</title><form method=post action=/in>"
        "<input name=user id=user><button id=go>Sign in</button></form>"
    )


@app.post("/in")
def sign_in():
    session.regenerate()
    session["user"] = request.form["user"]
    return redirect("/")
