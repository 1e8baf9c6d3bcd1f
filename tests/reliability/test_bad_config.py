"""Bad configuration fails at start-up with a message naming the setting: one case each.

Every message a user can meet: store URLs and their options, ``Cache`` and
``Codec`` arguments, Django's ``CACHES`` entry (as the system check reports it)
and Flask's ``MCACHE_*`` keys. Nothing here talks to a server: a bad setting
must fail before any connection is tried.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from flask import Flask

from django_mcache.config import cache_from_settings
from flask_mcache import MCache
from mcache import Cache, Codec
from mcache.errors import ConfigError
from mcache.stores import from_url

M = "memcached://127.0.0.1:11211"

CORE: list[tuple[Callable[[], object], str]] = [
    (lambda: from_url("memcache://h:11211"), "unknown store scheme 'memcache'"),
    (lambda: from_url("127.0.0.1:11211"), "must look like scheme://"),
    (lambda: from_url("memory://host"), "memory:// takes no host or path"),
    (lambda: from_url("memory://?max_bytes=lots"), "max_bytes='lots'"),
    (lambda: from_url("memory://?max_bytes=8m&max_value_size=9m"), "max_value_size"),
    (lambda: from_url("memory://?color=red"), "unknown memory store option 'color'"),
    (lambda: from_url("memory://", max_bytes=0), "max_bytes must be > 0"),
    (lambda: from_url("memcached://"), "no memcached servers"),
    (lambda: from_url("memcached://h:99999"), "bad port"),
    (lambda: from_url("memcached://h:11211:0"), "weight must be >= 1"),
    (lambda: from_url("memcached://h:11211:-2"), "weight"),
    (lambda: from_url("memcached://h:11211,h:11211"), "server listed twice"),
    (lambda: from_url("memcached://h:11211/db"), "takes no path"),
    (lambda: from_url(M + "?replicas=2"), "replicas must be between 1 and the number of servers"),
    (lambda: from_url(M + "?hashing=rendezvous"), "hashing must be 'ketama' or 'modulo'"),
    (lambda: from_url(M + "?ketama_points=161"), "ketama_points must be a multiple of 4"),
    (lambda: from_url(M + "?timeout=0"), "connect_timeout and timeout must be > 0"),
    (lambda: from_url(M + "?timeout=soon"), "timeout='soon'"),
    (lambda: from_url(M + "?retry_attempts=0"), "retry_attempts must be >= 1"),
    (lambda: from_url(M + "?dead_timeout=-1"), "dead_timeout must be >= 0"),
    (lambda: from_url(M + "?max_pool_size=0"), "max_pool_size must be >= 1"),
    (lambda: from_url(M + "?flush_on_rejoin=maybe"), "flush_on_rejoin='maybe'"),
    (lambda: from_url(M, flush_on_rejoin=1), "flush_on_rejoin must be True or False"),
    (lambda: from_url("redis://h:6379/zero"), "database"),
    (lambda: from_url("redis://h:port/0"), "bad port in"),
    (lambda: from_url("memcached://h:1:2:3"), "host[:port[:weight]]"),
    (lambda: from_url("memcached://h:abc"), "port"),
    (lambda: from_url(M + "?max_value_size=0"), "max_value_size must be >= 1"),
    (lambda: from_url("redis://h:6379/0?max_value_size=0"), "max_value_size must be >= 1"),
    (lambda: from_url("redis://h:6379/0?socket_timeout=0"), "socket_timeout"),
    (lambda: from_url("redis://h:6379/0?db=1"), "unknown redis store option 'db'"),
    (lambda: from_url("tiered://?hot=memory://"), "takes a hot and a cold store URL"),
    (lambda: from_url("tiered://?hot=memory://&cold=memory://&hot_ttl=0"), "hot_ttl"),
    (lambda: Cache(42), "store must be a URL"),  # type: ignore[arg-type]
    (lambda: Cache(namespace="a b"), "namespace"),
    (lambda: Cache(default_ttl=-1), "default_ttl must be >= 0"),
    (lambda: Cache(default_ttl="5m"), "default_ttl must be a number of seconds"),  # type: ignore[arg-type]
    (lambda: Cache(stale_ttl=-5), "stale_ttl"),
    (lambda: Cache(lock_timeout=0), "lock_timeout must be >= 1 second"),
    (lambda: Cache(wait=-1), "wait must be a number of seconds >= 0"),
    (lambda: Cache(stale_wait=-1), "stale_wait must be a number of seconds >= 0"),
    (lambda: Cache(refresher="cron"), "refresher must be one of 'thread', 'celery', 'rq'"),
    (lambda: Cache(refresher="rq", refresh_fallback="x"), "refresh_fallback must be"),
    (lambda: Cache().get_or_build("k", int, stale_wait="1s"), "stale_wait must be a number"),  # type: ignore[arg-type]
    (lambda: Cache(refresh="later"), "refresh must be 'sync' or 'background'"),
    (lambda: Cache(jitter=1.5), "jitter must be a fraction"),
    (lambda: Cache(early_refresh=-1), "early_refresh"),
    (lambda: Cache(tag_cache_ttl=-0.1), "tag_cache_ttl"),
    (lambda: Cache(stats_interval=0), "stats_interval must be > 0"),
    (lambda: Cache(trace_dir=3), "trace_dir must be a directory path"),  # type: ignore[arg-type]
    (lambda: Cache(trace_dir="/proc/mcache-traces"), "cannot be created"),
    (lambda: Cache(stats_interval="5"), "stats_interval must be a number of seconds"),  # type: ignore[arg-type]
    (lambda: Codec(object()), "serializer must be a name or a Serializer"),  # type: ignore[arg-type]
    (lambda: Codec("yaml"), "unknown serializer 'yaml'"),
    (lambda: Codec(compress_threshold=-1), "compress_threshold"),
    (lambda: Codec(compress_level=12), "compress_level must be an int from -1 to 9"),
    (lambda: Codec(signing_key=""), "signing_key must be a non-empty str or bytes"),
    (lambda: Cache().cached(colour="red"), "unknown option(s) for cached(): colour"),
]


@pytest.mark.parametrize(("make", "message"), CORE, ids=[m for _, m in CORE])
def test_core_settings(make: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        make()
    assert message in str(raised.value)


DJANGO: list[tuple[dict, str]] = [
    ({"LOCATION": ""}, "LOCATION must be a store URL"),
    ({"LOCATION": ["h1:11211", "h2:11211"]}, "write 'memcached://h1:11211,h2:11211'"),
    ({"LOCATION": "memory://", "OPTIONS": ["wait", 1]}, "OPTIONS must be a dict"),
    ({"LOCATION": "memory://", "OPTIONS": {"stale_tll": 60}}, "unknown OPTIONS 'stale_tll'"),
    ({"LOCATION": "memory://", "OPTIONS": {"replicas": 2}}, "unknown OPTIONS 'replicas'"),
    ({"LOCATION": "memory://", "TIMEOUT": "soon"}, "TIMEOUT must be a number of seconds"),
    ({"LOCATION": "memory://", "OPTIONS": {"refresher": "no.such.thing"}}, "refresher"),
    ({"LOCATION": "memory://", "OPTIONS": {"refresher": 5}}, "OPTIONS['refresher'] must be"),
    ({"LOCATION": "memory://", "OPTIONS": {"wait": "long"}}, "wait"),
    ({"LOCATION": "memory://", "OPTIONS": {"stale_wait": -1}}, "stale_wait must be"),
    ({"LOCATION": "memory://", "OPTIONS": {"refresher": "cron"}}, "must be 'thread', 'celery'"),
    ({"LOCATION": M, "OPTIONS": {"replicas": 3}}, "replicas must be between 1"),
    ({"LOCATION": "memcached://h:11211:0"}, "weight must be >= 1"),
    ({"LOCATION": "alias:nowhere"}, "nowhere"),
]


@pytest.mark.parametrize(("params", "message"), DJANGO, ids=[m for _, m in DJANGO])
def test_django_caches_entry(params: dict, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        cache_from_settings(params["LOCATION"], params)
    assert message in str(raised.value)


FLASK: list[tuple[dict, str]] = [
    (
        {"MCACHE_URLS": "memory://"},
        "unknown config key(s) 'MCACHE_URLS' (did you mean 'MCACHE_URL'?)",
    ),
    ({"MCACHE_URL": 11211}, "MCACHE_URL must be a"),
    ({"MCACHE_URL": "memcached://h:11211:0"}, "MCACHE_URL / MCACHE_STORE_OPTIONS"),
    ({"MCACHE_URL": M, "MCACHE_REPLICAS": 2}, "replicas must be between 1"),
    ({"MCACHE_URL": "memory://", "MCACHE_REPLICAS": 2}, "MCACHE_REPLICAS"),
    ({"MCACHE_STORE_OPTIONS": {"max_bytes": "lots"}}, "max_bytes='lots'"),
    ({"MCACHE_DEFAULT_TTL": "300"}, "MCACHE_DEFAULT_TTL must be a"),
    ({"MCACHE_STALE_TTL": -1}, "MCACHE_STALE_TTL"),
    ({"MCACHE_LOCK_TIMEOUT": 0}, "MCACHE_LOCK_TIMEOUT"),
    ({"MCACHE_STALE_WAIT": "1"}, "MCACHE_STALE_WAIT must be a"),
    ({"MCACHE_STALE_WAIT": -1}, "MCACHE_STALE_WAIT: stale_wait must be"),
    ({"MCACHE_VIEW_COUNT_FIELDS": ["views"]}, "MCACHE_VIEW_COUNT_FIELDS must be a"),
    ({"MCACHE_REFRESHER": "cron"}, "MCACHE_REFRESHER: refresher must be one of"),
    ({"MCACHE_REFRESHER": "rq", "MCACHE_REFRESH_FALLBACK": "x"}, "MCACHE_REFRESH_FALLBACK"),
    ({"MCACHE_REFRESH": "later"}, "MCACHE_REFRESH"),
    ({"MCACHE_JITTER": 2}, "MCACHE_JITTER"),
    ({"MCACHE_NAMESPACE": "a b"}, "MCACHE_NAMESPACE"),
    ({"MCACHE_SERIALIZER": "yaml"}, "MCACHE_SERIALIZER"),
    ({"MCACHE_SIGNING_KEY": ""}, "MCACHE_SIGNING_KEY"),
    ({"MCACHE_STATS_INTERVAL": 0}, "MCACHE_STATS_INTERVAL"),
    ({"MCACHE_ONLINE": "yes"}, "MCACHE_ONLINE must be a"),
    ({"MCACHE_ONLINE_WINDOW": 60, "MCACHE_ONLINE_SLOTS": 1}, "MCACHE_ONLINE_SLOTS"),
    ({"MCACHE_ONLINE_WINDOW": "5m"}, "MCACHE_ONLINE_WINDOW must be a"),
    ({"MCACHE_ROBOTS": "bot"}, "MCACHE_ROBOTS must be a"),
]


@pytest.mark.parametrize(("config", "message"), FLASK, ids=[m for _, m in FLASK])
def test_flask_config(config: dict, message: str) -> None:
    app = Flask(__name__)
    app.secret_key = "tests"  # mcache signs cached values with a key derived from it
    app.config.update(config)
    with pytest.raises(ConfigError) as raised:
        MCache(app)
    assert message in str(raised.value)
