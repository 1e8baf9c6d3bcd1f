"""From ``app.config`` (``MCACHE_*`` keys) to a core :class:`mcache.Cache`.

Every ``MCACHE_`` key must be one of ``KEYS``: a typo fails ``init_app`` with
the list of valid keys instead of being ignored, and a bad value fails it with
the key's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcache import Cache
from mcache.admin.config_problems import (
    CACHE_OPTIONS,
    CODEC_OPTIONS,
    ProblemList,
    named_with_guesses,
    option_problems,
)
from mcache.errors import ConfigError
from mcache.features.visitors import checked_noise
from mcache.model.codec import Codec
from mcache.model.signing import signed_by_default, unsigned_pickle
from mcache.stores import from_url
from mcache.web.page import cookie_names
from mcache.web.query import DEFAULT_QUERY, QueryRule, query_rule
from mcache.web.surrogates import checked_kind
from mcache.wording import a

__all__ = ["KEYS", "cache_from_config", "counters_cache", "page_cookies", "page_query"]

CACHE_KEYS = {
    f"MCACHE_{name.upper()}": name for name in (*CACHE_OPTIONS, "default_ttl", "replication_lag")
}
CODEC_KEYS = {f"MCACHE_{name.upper()}": name for name in CODEC_OPTIONS}

_TYPES: dict[str, tuple[type, ...]] = {
    "MCACHE_URL": (str,),
    "MCACHE_NAMESPACE": (str,),
    "MCACHE_ONLINE": (bool,),
    "MCACHE_SESSIONS": (bool,),
    "MCACHE_SESSION_URL": (str,),
    "MCACHE_SESSION_REPLICAS": (int,),
    "MCACHE_ONLINE_WINDOW": (int,),
    "MCACHE_ONLINE_SLOTS": (int,),
    "MCACHE_ONLINE_NOISE": (int, float),
    "MCACHE_ROBOTS": (list, tuple),
    "MCACHE_PAGE_COOKIES": (list, tuple),
    "MCACHE_PAGE_QUERY": (list, tuple, dict),
    "MCACHE_PAGE_CDN": (bool,),
    "MCACHE_PAGE_SURROGATE": (str,),
    "MCACHE_STORE_OPTIONS": (Mapping,),
    "MCACHE_VIEW_COUNT_FIELDS": (Mapping,),
    "MCACHE_REFRESH": (str,),
    "MCACHE_TRACE_DIR": (str,),
    "MCACHE_SERIALIZER": (str,),
    "MCACHE_SIGNING_KEY": (str, bytes),
    "MCACHE_FALLBACK_SIGNING_KEYS": (list, tuple),
    "MCACHE_TRUST_UNSIGNED_PICKLE": (bool,),
    "MCACHE_EARLY_REFRESH": (bool, int, float),
    "MCACHE_STATS_INTERVAL": (int, float),
    "MCACHE_DEFAULT_TTL": (int, float),
    "MCACHE_STALE_TTL": (int, float),
    "MCACHE_LOCK_TIMEOUT": (int, float),
    "MCACHE_WAIT": (int, float),
    "MCACHE_STALE_WAIT": (int, float),
    "MCACHE_JITTER": (int, float, list, tuple),
    "MCACHE_TAG_CACHE_TTL": (int, float),
    "MCACHE_REFRESHER": (str,),
    "MCACHE_REFRESH_QUEUE": (str,),
    "MCACHE_REFRESH_FALLBACK": (str,),
    "MCACHE_REPLICAS": (int,),
    "MCACHE_METRICS": (list, tuple),
    "MCACHE_REPLICATION_LAG": (int, float),
}
KEYS = frozenset({*CACHE_KEYS, *CODEC_KEYS, *_TYPES, "MCACHE_COUNTERS_URL", "MCACHE_REPLICA_BIND"})
"""Every key the extension reads: the core's options, those whose type is checked, two more."""


def cache_from_config(config: Mapping[str, Any], url_key: str = "MCACHE_URL") -> Cache:
    """Return the core cache ``config`` describes; ``ConfigError`` names the keys to fix.

    ``url_key="MCACHE_COUNTERS_URL"`` gives the counters' cache: the same
    settings on another store (a durable one, so counts survive a flush).
    Every problem of the config is reported in one error, not the first alone.
    """
    problems = ProblemList("")
    unknown = sorted(k for k in config if k.startswith("MCACHE_") and k not in KEYS)
    if unknown:
        named = named_with_guesses(unknown, KEYS)
        problems.add(f"unknown config key(s) {named}; mcache reads {', '.join(sorted(KEYS))}")
    mistyped = _mistyped(config, problems)
    url = config.get(url_key) or "memory://"
    store = None
    if not mistyped & {url_key, "MCACHE_STORE_OPTIONS", "MCACHE_REPLICAS"}:
        store_options = dict(config.get("MCACHE_STORE_OPTIONS") or {})
        if config.get("MCACHE_REPLICAS") not in (None, 1):
            store_options["replicas"] = config["MCACHE_REPLICAS"]
        store_keys = f"{url_key} / MCACHE_STORE_OPTIONS / MCACHE_REPLICAS"
        store = problems.check(store_keys, lambda: from_url(url, **store_options))
    codec_kwargs = _params(config, CODEC_KEYS, mistyped)
    cache_kwargs = _params(config, CACHE_KEYS, mistyped)
    if config.get("MCACHE_REPLICA_BIND") is not None:  # a replica: its lag matters (2 s unless set)
        cache_kwargs.setdefault("replication_lag", 2.0)
    setting = {param: key for key, param in {**CACHE_KEYS, **CODEC_KEYS}.items()}.__getitem__
    option_problems(cache_kwargs, codec_kwargs, setting, problems)
    if not mistyped & {"MCACHE_ONLINE_WINDOW", "MCACHE_ONLINE_SLOTS"}:
        window, slots = online_shape(config)
        if not (slots >= 2 and window >= slots):
            problems.add(
                f"MCACHE_ONLINE_WINDOW / MCACHE_ONLINE_SLOTS: a window of {window} s needs at"
                f" least 2 slots and no more slots than seconds, got {slots}"
            )
    if "MCACHE_ONLINE_NOISE" not in mistyped:
        noise = config.get("MCACHE_ONLINE_NOISE") or 0.0
        problems.check("", lambda: checked_noise(noise, "MCACHE_ONLINE_NOISE"))
    if store is not None and not store.traits.process_local:
        codec_kwargs = _signed_by_default(config, codec_kwargs, problems)
    problems.raise_if_any()
    codec = Codec(**codec_kwargs, serializer_setting="MCACHE_SERIALIZER")
    return Cache(store, codec=codec, **cache_kwargs)


def _signed_by_default(
    config: Mapping[str, Any], codec_kwargs: dict[str, Any], problems: ProblemList
) -> dict[str, Any]:
    """Sign values with a key derived from ``SECRET_KEY``, reading those signed under
    ``SECRET_KEY_FALLBACKS``, unless the config chose otherwise; with no secret to derive
    it from, refuse to unpickle what other processes write (docs/explanation/security.md)."""
    secret = config.get("SECRET_KEY")
    signed = signed_by_default(codec_kwargs, secret, config.get("SECRET_KEY_FALLBACKS") or ())
    if unsigned_pickle(signed):
        problems.add(
            "values on a shared store are pickled, and with no SECRET_KEY there is nothing to"
            " sign them with: whoever can write to the servers could run code in this app."
            " Set SECRET_KEY (mcache signs with a key derived from it), or MCACHE_SIGNING_KEY,"
            " or MCACHE_SERIALIZER='json' (or 'msgpack'), or MCACHE_TRUST_UNSIGNED_PICKLE=True"
            " if only trusted hosts reach the servers"
        )
    return signed


def _params(config: Mapping[str, Any], keys: Mapping[str, str], mistyped: set[str]) -> dict:
    """Return the core's parameters the ``keys`` given in ``config`` set (well typed ones)."""
    return {
        param: config[key] for key, param in keys.items() if key in config and key not in mistyped
    }


def online_shape(config: Mapping[str, Any]) -> tuple[int, int]:
    """Return the online counters' (window seconds, slots): the hook and the reader agree."""
    return config.get("MCACHE_ONLINE_WINDOW") or 300, config.get("MCACHE_ONLINE_SLOTS") or 6


def _mistyped(config: Mapping[str, Any], problems: ProblemList) -> set[str]:
    """Note each key whose value has the wrong type; return those keys."""
    mistyped = set()
    for key, types in _TYPES.items():
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            expected = " or ".join(t.__name__ for t in types)
            problems.add(f"{key} must be {a(expected)}, got {value!r}")
            mistyped.add(key)
    return mistyped


def counters_cache(app: Any) -> Cache:
    """Return the cache ``app``'s counters live in: ``MCACHE_COUNTERS_URL``'s, else the app's."""
    extensions = app.extensions
    return extensions.get("mcache.counters") or extensions["mcache"]  # type: ignore[no-any-return]


def page_surrogate_kind(config: Mapping[str, Any]) -> str | None:
    """Return ``MCACHE_PAGE_SURROGATE``, checked: the header shared pages name their tags in."""
    return checked_kind(config.get("MCACHE_PAGE_SURROGATE"), "MCACHE_PAGE_SURROGATE")


def page_cookies(config: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Return ``MCACHE_PAGE_COOKIES``, checked: the cookies every cached page's key covers."""
    try:
        return cookie_names(config.get("MCACHE_PAGE_COOKIES"), "MCACHE_PAGE_COOKIES")
    except TypeError as error:
        raise ConfigError(str(error)) from None


def page_query(config: Mapping[str, Any]) -> QueryRule:
    """Return ``MCACHE_PAGE_QUERY``, checked: the query parameters every cached page's key
    keeps (unset: all but the analytics ones)."""
    try:
        return query_rule(config.get("MCACHE_PAGE_QUERY"), "MCACHE_PAGE_QUERY") or DEFAULT_QUERY
    except TypeError as error:
        raise ConfigError(str(error)) from None
