"""The Flask dashboard with Flask-WTF's CSRFProtect: its forms carry the token, and a POST
without it is refused before anything is done (a real Flask app and test client)."""

from __future__ import annotations

import re

from flask import Flask
from flask_wtf.csrf import CSRFProtect

from flask_mcache import MCache
from flask_mcache.dashboard import dashboard_blueprint


def test_buttons_carry_the_csrf_token_and_need_it(memcached_url: str) -> None:
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY="tests-only", MCACHE_URL=memcached_url, MCACHE_NAMESPACE="csrf-dash"
    )
    CSRFProtect(app)
    mcache = MCache(app)
    app.register_blueprint(dashboard_blueprint(allow=lambda: True), url_prefix="/cache")
    with app.app_context():
        mcache.cache.set("kept", 1)
    client = app.test_client()
    page = client.get("/cache/").get_data(as_text=True)
    [token, *_] = re.findall(r'name="csrf_token" value="([^"]+)"', page)
    fields = {"kind": "flush", "cache": "default", "confirmed": "yes", "typed": "default"}
    refused = client.post("/cache/act", data=fields)
    assert refused.status_code == 400 and "CSRF" in refused.get_data(as_text=True)
    with app.app_context():
        assert mcache.cache.get("kept") == 1, "nothing flushed without the token"
    done = client.post("/cache/act", data={**fields, "csrf_token": token})
    assert done.status_code == 303
    with app.app_context():
        assert mcache.cache.get("kept", None) is None
