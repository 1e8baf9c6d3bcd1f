"""The cache dashboard as a Flask blueprint the site mounts, behind a check the site writes.

``app.register_blueprint(dashboard_blueprint(allow=is_staff), url_prefix="/cache")``:
``allow`` is called on every request to the dashboard and a falsy answer is a 403; a
blueprint without one is refused when it is made, so the page is never left open by
omission. The page and its buttons are :mod:`mcache.admin`'s, as in Django's admin; a
site using Flask-WTF's ``CSRFProtect`` gets its token in every form.
"""

from __future__ import annotations

from collections.abc import Callable
from html import escape

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    get_flashed_messages,
    redirect,
    request,
    url_for,
)

from mcache.admin.dashboard import gather, trace_of
from mcache.admin.dashboard_actions import ActionError, perform, plan
from mcache.admin.dashboard_html import confirm_html, dashboard_html
from mcache.cache import Cache
from mcache.errors import ConfigError

__all__ = ["dashboard_blueprint"]

_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cache dashboard</title><style>
body {{ font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  margin: 0 auto; max-width: 1100px; padding: 1em; color: #222; }}
h1 {{ font-size: 1.5em; }} .module {{ border: 1px solid #ddd; border-radius: 6px;
  padding: 0.5em 1em; margin-bottom: 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; }}
.mcache-row {{ display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }}
th, td {{ padding: 2px 8px; border-bottom: 1px solid #eee;
  text-align: left; }} caption {{ text-align: left; font-weight: bold; }}
.button {{ background: #2a6ebb; color: #fff; border: 0; border-radius: 4px;
  padding: 4px 10px; cursor: pointer; }} .help {{ color: #666; }}
.mcache-dead, .problem {{ color: #ba2121; font-weight: bold; }} .done {{ color: #26734d; }}
.mcache-chart {{ display: block; max-width: 100%; height: auto; }}
</style></head><body><h1>Cache dashboard</h1>{message}{body}</body></html>"""


def dashboard_blueprint(
    allow: Callable[[], bool] | None = None,
    user: Callable[[], str] | None = None,
    name: str = "mcache_dashboard",
) -> Blueprint:
    """Return the dashboard's blueprint; ``allow()`` says whether this request may see it
    (and act), ``user()`` who is acting, for the log (default: the client's address)."""
    if not callable(allow):
        raise ConfigError(
            "dashboard_blueprint(allow=...) needs a callable that says whether the current"
            " request may see the cache dashboard, e.g. allow=lambda: current_user.is_admin;"
            " the dashboard is never mounted open"
        )
    who = user or (lambda: f"client {request.remote_addr}")
    blueprint = Blueprint(name, __name__)

    @blueprint.before_request
    def guard() -> None:
        if not allow():
            abort(403)

    @blueprint.get("/")
    def dashboard() -> Response:
        caches = _caches()
        asked = request.args.get("trace", "")
        traced = caches.get(request.args.get("cache", ""), caches["default"])
        trace = trace_of(traced, asked) if asked else None
        body = dashboard_html(
            [gather(cache, alias) for alias, cache in caches.items()],
            url_for(f"{name}.act"),
            _hidden(),
            trace,
            target_label="table",
        )
        said = get_flashed_messages(category_filter=["mcache"]) if current_app.secret_key else []
        return _page(body, "".join(f'<p class="done">{escape(done)}</p>' for done in said))

    @blueprint.post("/act")
    def act() -> Response:
        caches = _caches()
        try:
            action = plan(request.form.to_dict(), caches, _table_tag)
            if request.form.get("confirmed") != "yes":
                back = url_for(f"{name}.dashboard")
                return _page(confirm_html(action, request.path, back, _hidden()))
            done = perform(action, caches, who(), request.form.get("typed", ""))
        except ActionError as error:
            return _page("", f'<p class="problem">{escape(str(error))}</p>', status=400)
        if current_app.secret_key:  # said on the next page; without sessions, in the log only
            flash(done, "mcache")
        return redirect(url_for(f"{name}.dashboard"), 303)  # type: ignore[return-value]

    return blueprint


def _caches() -> dict[str, Cache]:
    extensions = current_app.extensions
    if "mcache" not in extensions:
        raise ConfigError("the cache dashboard needs mcache: MCache(app) or mcache.init_app(app)")
    caches = {"default": extensions["mcache"]}
    counters = extensions.get("mcache.counters")
    if counters is not None and counters is not caches["default"]:
        caches["counters"] = counters
    return caches


def _hidden() -> dict[str, str]:
    """The CSRF token of Flask-WTF's ``CSRFProtect``, when the site uses it."""
    if "csrf" not in current_app.extensions:
        return {}
    from flask_wtf.csrf import generate_csrf

    return {"csrf_token": generate_csrf()}


def _table_tag(table: str) -> tuple[str, str]:
    """Return the tag of a SQLAlchemy table's rows (``model:<table>``), and the page's words."""
    return f"model:{table}", f"table {table}"


def _page(body: str, message: str = "", status: int = 200) -> Response:
    return Response(_PAGE.format(message=message, body=body), status, mimetype="text/html")
