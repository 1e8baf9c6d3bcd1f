"""From ``app.config`` (``MCACHE_*`` keys) to a core :class:`mcache.Cache`.

Every ``MCACHE_`` key must be one of ``KEYS``: a typo fails ``init_app`` with
the list of valid keys instead of being ignored, and a bad value fails it with
the key's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcache import Cache
from mcache.codec import Codec
from mcache.errors import ConfigError, MCacheError
from mcache.stores import from_url

__all__ = ["KEYS", "cache_from_config", "counters_cache"]

CACHE_KEYS = {
    "MCACHE_NAMESPACE": "namespace",
    "MCACHE_DEFAULT_TTL": "default_ttl",
    "MCACHE_STALE_TTL": "stale_ttl",
    "MCACHE_LOCK_TIMEOUT": "lock_timeout",
    "MCACHE_WAIT": "wait",
    "MCACHE_STALE_WAIT": "stale_wait",
    "MCACHE_REFRESH": "refresh",
    "MCACHE_EARLY_REFRESH": "early_refresh",
    "MCACHE_JITTER": "jitter",
    "MCACHE_TAG_CACHE_TTL": "tag_cache_ttl",
    "MCACHE_NEAR_TTL": "near_ttl",
    "MCACHE_NEAR_SIZE": "near_size",
    "MCACHE_TRACE_DIR": "trace_dir",
    "MCACHE_STATS_INTERVAL": "stats_interval",
    "MCACHE_REFRESHER": "refresher",
    "MCACHE_REFRESH_QUEUE": "refresh_queue",
    "MCACHE_REFRESH_FALLBACK": "refresh_fallback",
    "MCACHE_METRICS": "metrics",
}
CODEC_KEYS = {
    "MCACHE_SERIALIZER": "serializer",
    "MCACHE_SIGNING_KEY": "signing_key",
    "MCACHE_COMPRESS_THRESHOLD": "compress_threshold",
}
STORE_KEYS = {"MCACHE_REPLICAS": "replicas", "MCACHE_STORE_OPTIONS": ""}
ONLINE_KEYS = frozenset(
    {"MCACHE_ONLINE", "MCACHE_ONLINE_WINDOW", "MCACHE_ONLINE_SLOTS", "MCACHE_ROBOTS"}
)
COUNTER_KEYS = frozenset({"MCACHE_VIEW_COUNT_FIELDS"})
KEYS = frozenset(
    {
        "MCACHE_URL",
        "MCACHE_COUNTERS_URL",
        *ONLINE_KEYS,
        *CACHE_KEYS,
        *CODEC_KEYS,
        *STORE_KEYS,
        *COUNTER_KEYS,
    }
)


def cache_from_config(config: Mapping[str, Any], url_key: str = "MCACHE_URL") -> Cache:
    """Return the core cache ``config`` describes; ``ConfigError`` names the key to fix.

    ``url_key="MCACHE_COUNTERS_URL"`` gives the counters' cache: the same
    settings on another store (a durable one, so counts survive a flush).
    """
    unknown = sorted(k for k in config if k.startswith("MCACHE_") and k not in KEYS)
    if unknown:
        raise ConfigError(
            f"unknown config key(s) {', '.join(unknown)}; mcache reads {', '.join(sorted(KEYS))}"
        )
    _check_types(config)
    url = config.get(url_key) or "memory://"
    store_options = dict(config.get("MCACHE_STORE_OPTIONS") or {})
    if config.get("MCACHE_REPLICAS") not in (None, 1):
        store_options["replicas"] = config["MCACHE_REPLICAS"]
    try:
        store = from_url(url, **store_options)
    except ConfigError as error:
        raise ConfigError(f"{url_key} / MCACHE_STORE_OPTIONS / MCACHE_REPLICAS: {error}") from None
    codec_kwargs = {param: config[key] for key, param in CODEC_KEYS.items() if key in config}
    cache_kwargs = {param: config[key] for key, param in CACHE_KEYS.items() if key in config}
    try:
        codec = Codec(**codec_kwargs)
        cache = Cache(store, codec=codec, **cache_kwargs)
    except (MCacheError, TypeError, ValueError) as error:
        raise ConfigError(f"{_key_named_in(str(error))}: {error}") from None
    window, slots = online_shape(config)
    if not (slots >= 2 and window >= slots):
        raise ConfigError(
            f"MCACHE_ONLINE_WINDOW / MCACHE_ONLINE_SLOTS: a window of {window} s needs at least"
            f" 2 slots and no more slots than seconds, got {slots}"
        )
    return cache


_TYPES: dict[str, tuple[type, ...]] = {
    "MCACHE_URL": (str,),
    "MCACHE_NAMESPACE": (str,),
    "MCACHE_ONLINE": (bool,),
    "MCACHE_ONLINE_WINDOW": (int,),
    "MCACHE_ONLINE_SLOTS": (int,),
    "MCACHE_ROBOTS": (list, tuple),
    "MCACHE_STORE_OPTIONS": (Mapping,),
    "MCACHE_VIEW_COUNT_FIELDS": (Mapping,),
    "MCACHE_REFRESH": (str,),
    "MCACHE_TRACE_DIR": (str,),
    "MCACHE_SERIALIZER": (str,),
    "MCACHE_EARLY_REFRESH": (bool, int, float),
    "MCACHE_STATS_INTERVAL": (int, float),
    "MCACHE_DEFAULT_TTL": (int, float),
    "MCACHE_STALE_TTL": (int, float),
    "MCACHE_LOCK_TIMEOUT": (int, float),
    "MCACHE_WAIT": (int, float),
    "MCACHE_STALE_WAIT": (int, float),
    "MCACHE_JITTER": (int, float),
    "MCACHE_TAG_CACHE_TTL": (int, float),
    "MCACHE_REFRESHER": (str,),
    "MCACHE_REFRESH_QUEUE": (str,),
    "MCACHE_REFRESH_FALLBACK": (str,),
    "MCACHE_REPLICAS": (int,),
    "MCACHE_METRICS": (list, tuple),
}


def online_shape(config: Mapping[str, Any]) -> tuple[int, int]:
    """Return the online counters' (window seconds, slots): the hook and the reader agree."""
    return config.get("MCACHE_ONLINE_WINDOW") or 300, config.get("MCACHE_ONLINE_SLOTS") or 6


def _check_types(config: Mapping[str, Any]) -> None:
    for key, types in _TYPES.items():
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, types) or (bool not in types and isinstance(value, bool)):
            expected = " or ".join(t.__name__ for t in types)
            raise ConfigError(f"{key} must be a {expected}, got {value!r}")


def _key_named_in(message: str) -> str:
    """Return the config key whose parameter the core's message starts with."""
    named = {**CACHE_KEYS, **CODEC_KEYS}.items()
    for key, param in sorted(named, key=lambda item: -len(item[1])):  # refresher before refresh
        if message.startswith(param) or f" {param} " in message:
            return key
    return "MCACHE_*"


def counters_cache(app: Any) -> Cache:
    """Return the cache ``app``'s counters live in: ``MCACHE_COUNTERS_URL``'s, else the app's."""
    extensions = app.extensions
    return extensions.get("mcache.counters") or extensions["mcache"]  # type: ignore[no-any-return]
