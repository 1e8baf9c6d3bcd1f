"""The extension: ``MCache(app)`` or ``MCache()`` + ``init_app(app)``.

Per-app state lives in ``app.extensions["mcache"]`` (never on the extension
object, which only remembers, weakly, which apps it was given, to check their
routes), so one ``MCache`` serves several apps in one process, each with its
own ``MCACHE_*`` config. Everything delegates to the core :class:`mcache.Cache`
of the current app.
"""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from flask import Flask, current_app

from mcache import Cache, Lock
from mcache.errors import MCacheWarning, user_stacklevel
from mcache.features.counters import Counter, ViewCounter
from mcache.features.memoize import LateBound, Memoized, tags_with
from mcache.features.raw_keys import RawKeys
from mcache.features.visitors import OnlineCounter
from mcache.web.page import check_hole_context, check_view_ttl, cookie_names
from mcache.web.query import QuerySpec, query_rule

from .config import (
    cache_from_config,
    counters_cache,
    page_cookies,
    page_query,
    page_surrogate_kind,
)
from .view_order import check_app, check_on_first_request
from .views import TagsSpec, ViewSettings, cached_view, refused_response

__all__ = ["MCache"]

T = TypeVar("T")


class MCache:
    """The extension: dog-pile-safe caching, tags, locks and counters for Flask apps."""

    def __init__(self, app: Flask | None = None) -> None:
        self._apps: weakref.WeakSet[Flask] = weakref.WeakSet()
        if app is not None:
            self.init_app(app)

    def init_app(self, app: Flask) -> None:
        """Build the app's cache from ``MCACHE_*`` config (bad values raise here); add the CLI.

        ``MCACHE_URL`` left unset outside debug and testing is warned about: each worker
        process would have a cache of its own (``"memory://"`` written out is a choice).
        """
        cache = app.extensions["mcache"] = cache_from_config(app.config)
        app.extensions["mcache.page_cookies"] = page_cookies(app.config)
        app.extensions["mcache.page_query"] = page_query(app.config)
        app.extensions["mcache.page_surrogate"] = page_surrogate_kind(app.config)
        cache.locator = "flask_mcache:current_cache:"  # a queue worker runs in an app context
        if app.config.get("MCACHE_COUNTERS_URL"):
            app.extensions["mcache.counters"] = cache_from_config(app.config, "MCACHE_COUNTERS_URL")
        if not app.config.get("MCACHE_URL") and not (app.debug or app.testing):
            warnings.warn(
                "MCACHE_URL is not set, so the cache is 'memory://', kept in each"
                " process's own memory: every worker process of the server has a cache of its"
                " own, and an edit in another process (a flask shell, a task worker, another"
                " worker) never invalidates this one's pages. Set MCACHE_URL to a shared store,"
                " e.g. 'memcached://127.0.0.1:11211' or 'redis://127.0.0.1:6379/0' (or to"
                " 'memory://' for an app that runs in one process).",
                MCacheWarning,
                stacklevel=user_stacklevel(),
            )
        if app.config.get("MCACHE_REPLICA_BIND") is not None:
            from .fresh_reads import install

            install(app, cache)
        if app.config.get("MCACHE_SESSIONS"):
            from .sessions import MCacheSessionInterface

            app.session_interface = MCacheSessionInterface(app)
        from .cli import mcache_cli
        from .holes import HolesExtension
        from .jinja import MCacheExtension, count_view, online_count, track_online, view_count

        if "mcache" not in app.cli.commands:
            app.cli.add_command(mcache_cli)
        app.jinja_env.add_extension(MCacheExtension)
        app.jinja_env.add_extension(HolesExtension)
        app.jinja_env.globals.update(
            view_count=view_count, count_view=count_view, online_count=online_count
        )
        if app.config.get("MCACHE_ONLINE") and track_online not in app.before_request_funcs.get(
            None, []
        ):
            app.before_request(track_online)
        self._apps.add(app)
        check_on_first_request(app)

    def _check_routes(self) -> None:
        """Fail if a view this extension cached is routed without its cache (wrong order)."""
        for app in list(self._apps):
            check_app(app)

    @property
    def cache(self) -> Cache:
        """Return the current app's core cache."""
        try:
            return current_app.extensions["mcache"]
        except KeyError:
            raise RuntimeError(
                "this app has no mcache: call MCache(app) or mcache.init_app(app) first"
            ) from None

    @property
    def counters(self) -> Cache:
        """Return the cache the current app's counters live in (``MCACHE_COUNTERS_URL``'s, else
        the app's own): a durable store keeps counts across a flushed memcached."""
        self.cache  # noqa: B018 - the same error as .cache when the app has no mcache
        return counters_cache(current_app)

    def cached_view(
        self,
        ttl: float | Callable[..., Any] | None = None,
        *,
        stale_ttl: float | None = None,
        tags: TagsSpec = None,
        depends_on: Any = (),
        vary_on_headers: Sequence[str] = (),
        per_user: Callable[[], Any] | None = None,
        unless: Callable[[], Any] | None = None,
        key: Callable[..., Any] | None = None,
        refresh: str | None = None,
        header: str | None = "X-Cache",
        stale_wait: float | None = None,
        cookies: Sequence[str] | None = None,
        cdn: bool | None = None,
        query: QuerySpec = None,
        hole_context: Mapping[str, Callable[[], Any]] | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Cache a view's whole response: dog-pile safe, stale-while-rebuilding, tagged.

        The key covers the method (HEAD shares GET's), scheme, host, path, sorted query
        string, ``vary_on_headers`` and ``per_user()``; ``key(**view_args)`` replaces the
        path and query (Flask-Caching's ``make_cache_key``), and ``unless()`` returning true
        serves the view uncached. ``tags`` may be a callable of the view's arguments;
        ``depends_on`` takes SQLAlchemy classes or rows. ``cookies`` (default:
        ``MCACHE_PAGE_COOKIES``) names the cookies the page depends on: their values join
        the key, others are ignored, and ``Vary: Cookie`` may then be stored; ``cdn``
        (default: ``MCACHE_PAGE_CDN``) sends the entry's windows to caches in front.
        ``query``: the query parameters the key keeps, a list (``["page"]``) or
        ``{"exclude": [...]}`` (default: ``MCACHE_PAGE_QUERY``, else all but the analytics
        ones, see :mod:`mcache.web.query`); the view sees only those. ``hole_context``
        (``{name: f()}``, even ``{}``) declares that everything per-visitor sits in
        ``{% nocache %}`` holes, which may read these names besides Flask's context:
        visitors with a session, signed in or not, then share the page.
        Written bare, it is ``@mcache.cached_view()``. See docs/how-to/cache-a-page.md.
        """
        if callable(ttl):
            return self.cached_view()(ttl)  # written bare, without parentheses
        check_view_ttl(ttl, "mcache.cached_view")
        check_hole_context(hole_context, "mcache.cached_view")
        settings = ViewSettings(
            ttl,
            stale_ttl,
            tags,
            tuple(sorted({h.lower() for h in vary_on_headers})),
            refresh,
            header,
            stale_wait,
            cookie_names(cookies, "cached_view(cookies=...)"),
            cdn,
            query_rule(query, "cached_view(query=...)"),
            _dependency_tags(depends_on, "cached_view"),
            per_user,
            unless,
            key,
            hole_context,
        )
        return cached_view(lambda: self.cache, settings, self._check_routes)

    def cached(
        self,
        ttl: float | Callable[..., Any] | None = None,
        *,
        tags: Any = None,
        depends_on: Any = (),
        **options: Any,
    ) -> Callable[[Callable[..., T]], Memoized]:
        """Memoize a function by its canonical arguments (``.invalidate(*args)``, ``.uncached``).

        ``depends_on``: SQLAlchemy mapped classes or rows whose commits make every
        result stale. Written bare, ``@mcache.cached`` is ``@mcache.cached()``.
        """
        if callable(ttl):
            return self.cached()(ttl)  # type: ignore[return-value]
        dependencies = _dependency_tags(depends_on, "cached")
        if dependencies:
            from .sqlalchemy import watched_tags

            tags = tags_with(tags, lambda: watched_tags(dependencies, "mcache.cached"))
        key_prefix = options.pop("key_prefix", None)

        def decorate(function: Callable[..., T]) -> Memoized:
            return LateBound(  # type: ignore[return-value]
                function, lambda: self.cache, ttl, tags, key_prefix, options, refused_response
            )

        return decorate

    def get(self, key: Any, default: Any = None) -> Any:
        """Return the value cached under ``key`` (any canonical key), or ``default``."""
        return self.cache.get(key, default)

    def get_many(self, keys: Iterable[Any]) -> dict[Any, Any]:
        """Return the values cached under ``keys``, in one round trip; absent keys are left out."""
        return self.cache.get_many(keys)

    def set(self, key: Any, value: Any, ttl: float | None = None) -> bool:
        """Cache ``value`` under ``key`` for ``ttl`` seconds (``MCACHE_DEFAULT_TTL`` if None)."""
        return self.cache.set(key, value, ttl)

    def set_many(self, items: Mapping[Any, Any], ttl: float | None = None) -> list[Any]:
        """Cache several values; return the keys that could not be stored."""
        return self.cache.set_many(items, ttl)

    @property
    def raw(self) -> RawKeys:
        """Un-namespaced keys and bare values shared with other programs (see
        ``mcache.features.raw_keys``)."""
        return self.cache.raw

    def delete(self, key: Any) -> bool:
        """Remove ``key``'s value; ``True`` when there was one."""
        return self.cache.delete(key)

    def get_or_build(self, key: Any, build: Callable[[], T], **options: Any) -> T:
        """Dog-pile-safe read (see ``mcache.Cache.get_or_build``)."""
        return self.cache.get_or_build(key, build, **options)

    async def aget_or_build(self, key: Any, build: Callable[[], Awaitable[T]], **options: Any) -> T:
        """Await a dog-pile-safe read with a coroutine builder (in an ``async def`` view, which
        Flask runs on a loop of its own per request: see ``mcache.Cache.aget_or_build``)."""
        return await self.cache.aget_or_build(key, build, **options)

    def invalidate(self, *tags: str) -> dict[str, int]:
        """Bump ``tags``: every entry carrying one of them is stale from now on."""
        return self.cache.invalidate(*tags)

    async def ainvalidate(self, *tags: str) -> dict[str, int]:
        """:meth:`invalidate` in an ``async def`` view, on the store's async twin."""
        return await self.cache.ainvalidate(*tags)

    def lock(self, name: str, timeout: int | None = None, wait: float = 0.0) -> Lock:
        """Return the distributed lock ``name``."""
        return self.cache.lock(name, timeout, wait)

    def counter(self, name: str, ttl: int = 0) -> Counter:
        """Return the atomic counter ``name``."""
        return self.counters.counter(name, ttl)

    def view_counter(
        self, name: str | Any, initial: Callable[[Any], int] | None = None, ttl: int = 0
    ) -> ViewCounter:
        """Return the view counter ``name``, seeded by ``initial`` (e.g. from the database); given
        a SQLAlchemy mapped class, its rows' counter (see :mod:`flask_mcache.counters`)."""
        if not isinstance(name, str):
            from .counters import model_view_counter

            return model_view_counter(self.counters, name)
        return self.counters.view_counter(name, initial, ttl)

    def flush_view_counts(self, *models: Any) -> int:
        """Add the views of these mapped classes' rows counted since the last flush to their column.

        Call it from a periodic job: one ``UPDATE`` per row viewed. Returns the rows written.
        """
        from .counters import flush_view_counts

        return flush_view_counts(self.counters, models)

    def online_counter(
        self,
        name: str = "site",
        window: int = 300,
        slots: int = 6,
        unique: str = "auto",
        noise: float = 0.0,
    ) -> OnlineCounter:
        """Return the online counter ``name`` (``noise``: its counts blurred by that fraction,
        see `mcache.Cache.online_counter`)."""
        return self.counters.online_counter(name, window, slots, unique, noise)

    def watch_sqlalchemy(self, target: Any, app: Flask | None = None) -> None:
        """Bump model and row tags from a SQLAlchemy session class, sessionmaker or ``db`` (see
        :mod:`flask_mcache.sqlalchemy`; needs the ``[sqlalchemy]`` extra)."""
        from . import sqlalchemy as watcher
        from .counters import use_sessions

        app = app or current_app._get_current_object()  # type: ignore[attr-defined]
        cache = app.extensions["mcache"]
        cache.may_store = watcher.may_store
        watcher.watch(target, lambda: cache)
        app.extensions[watcher.WATCHING] = True  # depends_on= is followed from here on
        use_sessions(app, target)  # view counts of rows are seeded and written back through it

    def stats(self) -> dict[str, Any]:
        """Return mcache's counters and the servers' statistics."""
        return self.cache.stats()


def _dependency_tags(depends_on: Any, owner: str) -> tuple[str, ...]:
    """Return the tags of ``depends_on`` (SQLAlchemy only imported when one is given)."""
    if depends_on is None or (isinstance(depends_on, tuple) and not depends_on):
        return ()
    from .sqlalchemy import dependency_tags

    return tuple(dependency_tags(depends_on, owner))


def current_cache(_: str = "") -> Cache:
    """Return the current app's core cache: how a queue worker (in an app context) finds it."""
    return current_app.extensions["mcache"]  # type: ignore[no-any-return]
