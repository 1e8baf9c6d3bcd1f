"""Jinja support: ``{% mcache ttl, "name", tags=[…], vary=[…], depends_on=… %}`` and counters.

The tag is ``mcache``, not ``cache``, so it never clashes with Flask-Caching's; fragment
names are global to the app, as there. A fragment is rendered through ``get_or_build``:
once however many requests want it, served stale while one re-renders it. The globals
``view_count``, ``count_view`` (once per request) and ``online_count`` read the counters.
"""

from __future__ import annotations

import hashlib
from collections.abc import Hashable
from functools import partial
from typing import Any

from flask import current_app, g, request
from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from markupsafe import Markup

from mcache.features.counters import ROBOTS, ViewCounter, is_robot
from mcache.model.jobs import in_process
from mcache.model.keys import keyable
from mcache.web.holes import suspended
from mcache.web.page import FRAGMENTS_STAY

from .config import counters_cache, online_shape
from .counters import is_row, model_view_counter, row_ident

__all__ = ["MCacheExtension", "count_view", "online_count", "track_online", "view_count"]

_OPTIONS = ("tags", "vary", "depends_on")
"""The tag's options, in the order ``_cached`` takes them."""


class MCacheExtension(Extension):
    """``{% mcache ttl, "name" [, tags=[…]] [, vary=[…]] [, depends_on=…] %}…{% endmcache %}``.

    ``depends_on``: SQLAlchemy mapped classes or rows (or a list of them) whose
    commits make the fragment stale, as ``watch_sqlalchemy`` bumps them.
    """

    tags = {"mcache"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        ttl = parser.parse_expression()
        parser.stream.expect("comma")
        name = parser.parse_expression()
        options: dict[str, nodes.Expr] = {}
        while parser.stream.skip_if("comma"):
            key = parser.stream.expect("name")
            if key.value not in _OPTIONS:
                parser.fail(
                    f"mcache: unknown option {key.value}=; use tags=, vary= or depends_on=",
                    key.lineno,
                )
            parser.stream.expect("assign")
            options[key.value] = parser.parse_expression()
        body = parser.parse_statements(("name:endmcache",), drop_needle=True)
        args = [ttl, name, *(options.get(option, nodes.Const(None)) for option in _OPTIONS)]
        call = self.call_method("_cached", args)
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _cached(
        self, ttl: Any, name: Any, tags: Any, vary: Any, depends_on: Any, caller: Any
    ) -> str:
        cache = current_app.extensions["mcache"]
        key = ("jinja", str(name), tuple(keyable(v) for v in (vary or ())))
        tag_list = [tags] if isinstance(tags, str) else list(tags or ())
        if depends_on is not None:
            from .sqlalchemy import dependency_tags, watched_tags

            followed = watched_tags(dependency_tags(depends_on, "mcache"), "{% mcache %}")
            tag_list = list(dict.fromkeys([*tag_list, *followed]))
        # None or 0 keeps the fragment until invalidated, as Flask-Caching's {% cache %} does
        build = in_process(partial(_shared, caller), FRAGMENTS_STAY)
        rendered = cache.get_or_build(key, build, ttl=ttl or 0, tags=tag_list or None)
        return Markup(rendered)  # rendered (and escaped) once already, whatever the codec kept


def _shared(caller: Any) -> str:
    with suspended():  # shared by every visitor: no hole of the page around it
        return caller()  # type: ignore[no-any-return]


def _counter_of(obj_or_key: Any) -> tuple[ViewCounter, Hashable]:
    """Return the counter and ident of a row (its table's, by primary key) or of a plain key."""
    cache = counters_cache(current_app)
    if isinstance(obj_or_key, str | int) and not isinstance(obj_or_key, bool):
        return cache.view_counter("views"), obj_or_key
    if is_row(obj_or_key):
        return model_view_counter(cache, obj_or_key), row_ident(obj_or_key)
    ident = getattr(obj_or_key, "id", None)
    if ident is None:
        ident = getattr(obj_or_key, "pk", None)
    if type(ident) not in (int, str):
        raise TypeError(
            f"view_count/count_view take a SQLAlchemy row, an int or str key, or an object with"
            f" an int or str id; got {obj_or_key!r}"
        )
    return cache.view_counter(f"views:{type(obj_or_key).__qualname__}"), ident


def view_count(obj_or_key: Any) -> int:
    """Return the view count of a row or key (seeded from a row's ``views`` column)."""
    counter, ident = _counter_of(obj_or_key)
    return counter.value(ident)


def count_view(obj_or_key: Any) -> int:
    """Count one view per request, and return the count this request recorded."""
    counter, ident = _counter_of(obj_or_key)
    counted = g.setdefault("_mcache_views_counted", {})
    if (counter.name, ident) not in counted:
        counted[counter.name, ident] = counter.incr(ident)
    return counted[counter.name, ident]


def online_counter(scope: str = "site") -> Any:
    """Return the online counter of ``scope`` as the config shapes it: the hook counts into
    it and ``online_count`` reads it, so both must agree on its window and slots."""
    window, slots = online_shape(current_app.config)
    noise = current_app.config.get("MCACHE_ONLINE_NOISE") or 0.0
    return counters_cache(current_app).online_counter(scope, window, slots, noise=noise)


def online_count(scope: str | None = None, current: bool = False) -> int:
    """Return the distinct visitors seen in the window of ``scope`` (the whole site by default);
    ``current=True`` counts the filling slot too, so the visitor looking is online at once."""
    return online_counter(scope or "site").count(current)


def track_online() -> None:
    """A ``before_request`` hook (``MCACHE_ONLINE = True``): count this visitor on the site.

    The visitor is an id keyed with ``SECRET_KEY`` from the address and user
    agent, so no cookie or session is needed; robots are not counted.
    """
    agent = request.headers.get("User-Agent", "")
    if is_robot(agent, current_app.config.get("MCACHE_ROBOTS") or ROBOTS):
        return
    agent = agent.lower()
    secret = str(current_app.config.get("SECRET_KEY") or "mcache").encode()[:64]
    seen = f"{request.remote_addr}|{agent}".encode()
    visitor = hashlib.blake2b(seen, key=secret, digest_size=12).hexdigest()
    online_counter("site").hit(visitor)
