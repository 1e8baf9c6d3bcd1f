"""From a ``settings.CACHES`` entry to a core :class:`mcache.Cache`.

What is unknown or invalid is refused with a message naming the setting and
the fix; the system check (:mod:`django_mcache.checks`) calls it at start-up
so a typo fails ``manage.py check`` instead of the first request.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from django.utils.module_loading import import_string

from mcache import Cache
from mcache.admin.config_problems import (
    CACHE_OPTIONS,
    CODEC_OPTIONS,
    ProblemList,
    named_with_guesses,
    option_problems,
)
from mcache.errors import ConfigError
from mcache.model.codec import Codec
from mcache.model.signing import signed_by_default, unsigned_pickle
from mcache.refreshers import NAMES as REFRESHER_NAMES
from mcache.stores.redaction import redacted_url
from mcache.stores.url import OPTIONS as STORE_OPTIONS
from mcache.stores.url import SCHEMES, SQL_STORE_OPTIONS, checked_options
from mcache.web.page import cookie_names
from mcache.web.query import DEFAULT_QUERY, QueryRule, query_rule
from mcache.web.surrogates import checked_kind

from .aliases import replication_lag
from .db_store import DB_SCHEME

__all__ = [
    "ALIAS_SCHEME",
    "CACHE_OPTIONS",
    "CODEC_OPTIONS",
    "cache_from_settings",
]

ALIAS_SCHEME = "alias:"
DJANGO_CULL_OPTIONS = frozenset({"MAX_ENTRIES", "CULL_FREQUENCY"})
"""Django's local-memory culling knobs: memcached and Redis evict by LRU instead."""
PAGE_OPTIONS = frozenset({"page_cookies", "page_cdn", "page_surrogate", "page_query"})
"""What ``@cached_view`` pages on this cache default to: read by :func:`page_defaults`."""

_SAFE_NAMESPACE = re.compile(r"[!-~]{1,60}")


def cache_from_settings(location: str, params: Mapping[str, Any]) -> Cache:
    """Return the core cache a ``CACHES`` entry describes; raise ``ConfigError`` naming the fix.

    Every problem of the entry is reported in one error, not the first alone.
    """
    problems = ProblemList("")
    if not isinstance(location, str) or not location:
        hint = ""
        if isinstance(location, list | tuple):  # as Django's own memcached backends take it
            hint = f"; for a pool write 'memcached://{','.join(map(str, location))}'"
        problems.add(
            "LOCATION must be a store URL such as 'memcached://127.0.0.1:11211',"
            " 'redis://127.0.0.1:6379/0', 'memory://', 'db:<database alias>' or"
            f" 'alias:<another cache alias>', got {location!r}{hint}"
        )
    raw = params.get("OPTIONS") or {}
    if not isinstance(raw, Mapping):
        problems.add(f"OPTIONS must be a dict of option names to values, got {raw!r}")
        problems.raise_if_any()
    options = {k: v for k, v in raw.items() if k not in DJANGO_CULL_OPTIONS | PAGE_OPTIONS}
    problems.check("", lambda: page_defaults(raw))
    store_options = _store_options(location) - CACHE_OPTIONS - CODEC_OPTIONS
    known_options = CACHE_OPTIONS | CODEC_OPTIONS | store_options
    unknown = sorted(set(options) - known_options)
    if unknown:
        problems.add(
            f"unknown OPTIONS {named_with_guesses(unknown, known_options)} for LOCATION"
            f" {redacted_url(location)!r}; "
            f"mcache options: {', '.join(sorted(CACHE_OPTIONS | PAGE_OPTIONS))}; codec options: "
            f"{', '.join(sorted(CODEC_OPTIONS))}; store options for this LOCATION: "
            f"{', '.join(sorted(_store_options(location))) or 'none'}"
        )
    cache_kwargs = {k: v for k, v in options.items() if k in CACHE_OPTIONS}
    codec_kwargs = {k: v for k, v in options.items() if k in CODEC_OPTIONS}
    store_kwargs = {k: v for k, v in options.items() if k in store_options}
    cache_kwargs.setdefault("namespace", _namespace(params.get("KEY_PREFIX", "")))
    default_ttl = problems.check("", lambda: _default_ttl(params))
    if "refresher" in cache_kwargs:
        refresher = problems.check("", lambda: _refresher(cache_kwargs["refresher"]))
        cache_kwargs["refresher"] = refresher or "thread"
    store = None
    if isinstance(location, str) and location:
        store = problems.check("", lambda: _store(location, store_kwargs))
    option_problems(cache_kwargs, codec_kwargs, lambda name: f"OPTIONS[{name!r}]", problems)
    lag = problems.check("", replication_lag)
    problems.raise_if_any()
    from .invalidation import may_store

    if store is not None and not store.traits.process_local:
        codec_kwargs = _signed_by_default(codec_kwargs)
    return Cache(
        store,
        default_ttl=default_ttl,
        codec=Codec(**codec_kwargs, serializer_setting="OPTIONS['serializer']"),
        may_store=may_store,
        replication_lag=lag,
        **cache_kwargs,
    )


def _signed_by_default(codec_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Sign values with a key derived from ``SECRET_KEY``, reading those signed under
    ``SECRET_KEY_FALLBACKS``, unless ``OPTIONS`` chose otherwise (a store other processes
    write to is a way to run code in this one: docs/explanation/security.md)."""
    from django.conf import settings

    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", ())
    signed = signed_by_default(codec_kwargs, secret_key(), fallbacks)
    if unsigned_pickle(signed):
        raise ConfigError(
            "SECRET_KEY is empty, and mcache signs cached values with a key derived from it:"
            " set SECRET_KEY, or OPTIONS['signing_key'], or OPTIONS['serializer'] = 'json', or"
            " OPTIONS['trust_unsigned_pickle'] = True if only trusted hosts reach the servers"
        )
    return signed


def secret_key() -> str:
    """Return ``SECRET_KEY``, or "" where Django refuses to read it (empty)."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    try:
        return str(settings.SECRET_KEY)
    except ImproperlyConfigured:
        return ""


class PageDefaults(NamedTuple):
    """What ``@cached_view`` pages on a cache default to (its ``OPTIONS``, checked)."""

    cookies: tuple[str, ...] | None = None
    cdn: bool = False
    surrogate: str | None = None
    query: QueryRule = DEFAULT_QUERY


def page_defaults(options: Mapping[str, Any]) -> PageDefaults:
    """Return the ``page_cookies``, ``page_cdn``, ``page_surrogate`` and ``page_query`` of a
    cache's ``OPTIONS``, checked."""
    try:
        cookies = cookie_names(options.get("page_cookies"), "OPTIONS['page_cookies']")
        query = query_rule(options.get("page_query"), "OPTIONS['page_query']") or DEFAULT_QUERY
    except TypeError as error:
        raise ConfigError(str(error)) from None
    cdn = options.get("page_cdn", False)
    if not isinstance(cdn, bool):
        raise ConfigError(f"OPTIONS['page_cdn'] must be True or False, got {cdn!r}")
    surrogate = checked_kind(options.get("page_surrogate"), "OPTIONS['page_surrogate']")
    return PageDefaults(cookies, cdn, surrogate, query)


def _store_options(location: str) -> set[str]:
    if not isinstance(location, str) or location.startswith(ALIAS_SCHEME):
        return set()
    if location.startswith(DB_SCHEME):
        return {"table", *SQL_STORE_OPTIONS}
    scheme = location.split("://", 1)[0]
    scheme = SCHEMES.get(scheme, scheme)
    return set(STORE_OPTIONS.get(scheme, {}))


_stores: dict[tuple[str, str], Any] = {}
_stores_lock = threading.Lock()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_stores.clear)  # a child must not reuse the parent's sockets


def _store(location: str, options: dict[str, Any]) -> Any:
    """Return the process's one store for a LOCATION and its options: aliases naming
    the same ``memory://`` or memcached pool share it, as Django's own backends do."""
    signature = (location, repr(sorted(options.items())))
    with _stores_lock:
        store = _stores.get(signature)
        if store is None:
            store = _stores[signature] = _new_store(location, options)
    return store


def _new_store(location: str, options: dict[str, Any]) -> Any:
    if location.startswith(ALIAS_SCHEME):
        from .django_store import DjangoCacheStore

        return DjangoCacheStore(location[len(ALIAS_SCHEME) :])
    if location.startswith(DB_SCHEME):
        from mcache.stores.sql.store import SqlStore

        from .db_store import DjangoDatabaseConnector

        checked = checked_options("sqlite", options)
        table = str(checked.pop("table", "mcache"))
        return SqlStore(DjangoDatabaseConnector(location[len(DB_SCHEME) :], table), **checked)
    from mcache.stores import from_url

    return from_url(location, **options)


def _namespace(key_prefix: object) -> str:
    """Use KEY_PREFIX as the namespace of tags and counters, so sites sharing servers stay apart."""
    prefix = str(key_prefix or "")
    if not prefix or _SAFE_NAMESPACE.fullmatch(prefix):
        return prefix
    from mcache.model.keys import make_key

    return "p" + make_key("", prefix).rsplit(":", 1)[-1][:16]


def _default_ttl(params: Mapping[str, Any]) -> int:
    timeout = params.get("TIMEOUT", 300)
    if timeout is None:
        return 0  # Django's TIMEOUT=None: keep forever
    try:
        seconds = float(timeout)
    except (TypeError, ValueError):
        raise ConfigError(f"TIMEOUT must be a number of seconds or None, got {timeout!r}") from None
    # TIMEOUT <= 0 (Django: cache nothing) is applied per call by the backend; the
    # core cache, used directly through ``backend.mcache``, then keeps 1 second.
    return max(1, int(-(-seconds // 1)))


def _refresher(spec: object) -> Callable[[Callable[[], object]], bool] | str:
    if isinstance(spec, str) and spec in REFRESHER_NAMES:
        return spec  # Cache builds it, with refresh_queue and refresh_fallback
    if isinstance(spec, str) and "." in spec:
        try:
            spec = import_string(spec)
        except ImportError as error:
            raise ConfigError(f"OPTIONS['refresher']: cannot import {spec!r}: {error}") from None
    if isinstance(spec, type):
        spec = spec()
    if isinstance(spec, str) or not callable(spec):
        raise ConfigError(
            "OPTIONS['refresher'] must be 'thread', 'celery', 'rq', 'tasks', a callable taking"
            f" a job, or its dotted path; got {spec!r}"
        )
    return spec
