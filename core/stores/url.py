"""Store URLs: one string in settings names a whole store.

Query-string options are checked here, at start-up, so a typo fails loudly
with the list of valid options instead of being ignored until the first request
(every scheme and option: docs/reference/stores.md#store-urls).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from mcache.contract.store import Store
from mcache.errors import ConfigError, named_with_guesses
from mcache.model.ring import Server
from mcache.stores.memory.store import MemoryStore
from mcache.stores.redaction import redacted_url
from mcache.stores.sql.dialects import check_table_name
from mcache.stores.sql.store import SqlStore
from mcache.stores.tiered.store import TieredStore

__all__ = ["from_url"]

_SIZE = re.compile(r"(?i)^(\d+)\s*([kmg]i?b?|b)?$")
_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3}
EXAMPLES = {
    "memory": "memory://?max_bytes=64m",
    "memcached": "memcached://127.0.0.1:11211:1,127.0.0.2:11211:2?hashing=ketama",
    "memcached+tls": "memcached+tls://user:password@10.0.0.1:11211?tls_ca_file=/etc/ssl/ca.pem",
    "redis": "redis://127.0.0.1:6379/0?socket_timeout=1.0",
    "rediss": "rediss://user:password@10.0.0.1:6380/0?ssl_ca_certs=/etc/ssl/ca.pem",
    "redis+sentinel": "redis+sentinel://10.0.0.1:26379,10.0.0.2:26379/mymaster/0?replica_reads=true",
    "redis+cluster": "redis+cluster://10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000",
    "tiered": "tiered://?hot=memory://&cold=memcached://127.0.0.1:11211&hot_ttl=5",
    "postgresql": "postgresql://user@127.0.0.1:5432/site?table=mcache",
    "sqlite": "sqlite:////var/cache/site/cache.db",
}


def parse_size(text: str) -> int:
    """Read ``65536``, ``64k``, ``64m``, ``1g`` or ``64MiB`` as a number of bytes."""
    match = _SIZE.match(text.strip())
    if not match:
        raise ValueError(f"not a size: {text!r} (use e.g. 65536, 64k, 64m, 1g)")
    return int(match.group(1)) * _UNITS[(match.group(2) or "")[:1].lower()]


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"not a boolean: {text!r} (use true or false)")


Parser = Callable[[str], object]
_SQL_TABLE_OPTIONS: dict[str, Parser] = {  # the durable stores' options, whatever the database
    "table": check_table_name,
    "max_value_size": parse_size,
    "max_bytes": parse_size,
    "dead_timeout": float,
    "sweep_interval": float,
    "sweep_batch": int,
    "sweep_thread": _parse_bool,
}
SQL_STORE_OPTIONS = tuple(name for name in _SQL_TABLE_OPTIONS if name != "table")
"""What ``SqlStore`` takes; the rest of a durable store's options go to its connector."""
_REDIS_OPTIONS: dict[str, Parser] = {
    "socket_timeout": float,
    "socket_connect_timeout": float,
    "max_connections": int,
    "max_value_size": parse_size,
}
OPTIONS: dict[str, dict[str, Parser]] = {
    "memory": {"max_bytes": parse_size, "max_value_size": parse_size},
    "memcached": {
        "hashing": str,
        "ketama_points": int,
        "connect_timeout": float,
        "timeout": float,
        "max_pool_size": int,
        "max_value_size": parse_size,
        "retry_attempts": int,
        "dead_timeout": float,
        "flush_on_rejoin": _parse_bool,
        "replicas": int,
        "protocol": str,
        "tls": _parse_bool,
        "tls_ca_file": str,
        "tls_cert_file": str,
        "tls_key_file": str,
        "tls_verify": _parse_bool,
        "username": str,
        "password": str,
    },
    "tiered": {"hot": str, "cold": str, "hot_ttl": int},
    "redis": {
        **_REDIS_OPTIONS,
        "ssl_ca_certs": str,
        "ssl_certfile": str,
        "ssl_keyfile": str,
        "ssl_cert_reqs": str,
        "ssl_check_hostname": _parse_bool,
    },
    "redis+sentinel": {**_REDIS_OPTIONS, "replica_reads": _parse_bool, "sentinel_password": str},
    "redis+cluster": {**_REDIS_OPTIONS, "replica_reads": _parse_bool, "tag_copies": int},
    "postgresql": {
        "timeout": float,
        "connect_timeout": float,
        "prepare": _parse_bool,
        "max_connections": int,
        **_SQL_TABLE_OPTIONS,
    },
    "sqlite": {"timeout": float, **_SQL_TABLE_OPTIONS},
}


def from_url(url: str, **options: object) -> Store:
    """Build the store a URL names; keyword options override the query string.

    A password in the URL never appears in the error a bad URL raises: the messages name
    the URL as :func:`~mcache.stores.redaction.redacted_url` shows it."""
    shown = redacted_url(url)
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"store URL must look like scheme://…, got {shown!r}; valid examples: "
            + ", ".join(EXAMPLES.values())
        )
    parts = urlsplit(url)
    if parts.scheme in _VALKEY:  # the same protocol: one code path, redis-py's scheme
        url = _VALKEY[parts.scheme] + url[len(parts.scheme) :]
        parts = urlsplit(url)
    scheme = SCHEMES.get(parts.scheme, parts.scheme)
    if scheme not in OPTIONS:
        known = [*OPTIONS, *SCHEMES, *_VALKEY]
        raise ConfigError(
            f"unknown store scheme {named_with_guesses([parts.scheme], known)} in {shown!r};"
            " use memory://, memcached://,"
            f" redis://, redis+sentinel://, redis+cluster://, postgresql://, sqlite:/// or"
            f" tiered:// (valkey… for redis…) (e.g. {EXAMPLES['memcached']})"
        )
    merged = {**_query_options(scheme, parts.query, shown), **checked_options(scheme, options)}
    base = url.split("?", 1)[0]
    if scheme == "memory":
        return _memory(parts.netloc, parts.path, merged, shown)
    if scheme == "memcached":
        if parts.scheme == "memcached+tls":
            merged.setdefault("tls", True)
        return _memcached(parts.netloc, parts.path, merged, shown)
    if scheme == "tiered":
        return _tiered(parts.netloc, parts.path, merged, shown)
    if scheme == "postgresql":
        return _postgres(base, merged)
    if scheme == "sqlite":
        return _sqlite(parts.netloc, parts.path, merged, shown)
    if scheme == "redis+sentinel":
        return _needing(base, "redis.sentinel", "SentinelRedisStore", _REDIS_PY)(base, **merged)
    if scheme == "redis+cluster":
        return _needing(base, "redis.cluster", "ClusterRedisStore", _REDIS_PY)(base, **merged)
    return _redis(base, merged)


SCHEMES = {"rediss": "redis", "postgres": "postgresql", "memcached+tls": "memcached"}
"""URL schemes that name another's store (with TLS, or by another spelling)."""
_VALKEY = {
    "valkey": "redis",
    "valkeys": "rediss",
    "valkey+sentinel": "redis+sentinel",
    "valkey+cluster": "redis+cluster",
}


def _query_options(scheme: str, query: str, url: str) -> dict[str, object]:
    """The query string's options, checked and parsed as keyword options are."""
    options = dict(parse_qsl(query, keep_blank_values=True, strict_parsing=False))
    try:
        return checked_options(scheme, options, allowed=set(OPTIONS[scheme]))
    except ConfigError as error:
        raise ConfigError(f"{error} (in {url!r})") from None


_KINDS: dict[Parser, tuple[tuple[type, ...], str]] = {  # parser: Python types taken, in words
    parse_size: ((int,), "a size such as 65536 or '64m'"),
    int: ((int,), "a whole number"),
    float: ((int, float), "a number"),
    _parse_bool: ((bool,), "True or False"),
    str: ((str,), "a string"),
    check_table_name: ((str,), "a table name"),
}


def checked_options(
    scheme: str, options: Mapping[str, object], allowed: set[str] | None = None
) -> dict[str, object]:
    """Check keyword options as the query string's are: a string is parsed ('64m').

    Also what Django's ``OPTIONS`` of a ``db:`` LOCATION go through (as ``sqlite``'s).
    """
    if allowed is None:
        allowed = {*OPTIONS[scheme], "clock"} if scheme == "memory" else set(OPTIONS[scheme])
    checked: dict[str, object] = {}
    for name, value in options.items():
        if name not in allowed:
            valid = ", ".join(sorted(allowed))
            raise ConfigError(
                f"unknown {scheme} store option {named_with_guesses([name], allowed)};"
                f" valid options: {valid}"
            )
        parser = OPTIONS[scheme].get(name)
        if parser is None or (value is None and name == "max_connections"):
            checked[name] = value
        elif scheme == "tiered" and name in ("hot", "cold") and not isinstance(value, str):
            checked[name] = value  # a Store object as a tier
        elif isinstance(value, float) and value.is_integer() and parser in (int, parse_size):
            checked[name] = int(value)  # 64e6 or 2.0 from a settings file
        elif isinstance(value, str) and parser is not str:
            try:
                checked[name] = parser(value)
            except ValueError as error:
                raise ConfigError(f"{scheme} store option {name}={value!r}: {error}") from None
        elif isinstance(value, bool) is not (parser is _parse_bool) or not isinstance(
            value, _KINDS[parser][0]
        ):
            raise ConfigError(
                f"{scheme} store option {name} must be {_KINDS[parser][1]}, got {value!r}"
            )
        else:
            checked[name] = value
    return checked


def _memory(netloc: str, path: str, options: dict[str, object], url: str) -> Store:
    if netloc or path.strip("/"):
        raise ConfigError(
            f"memory:// takes no host or path, got {url!r}; e.g. {EXAMPLES['memory']}"
        )
    return MemoryStore(**options)  # type: ignore[arg-type]


def memcached_replicas(url: object, replicas: int) -> int | None:
    """Return how many copies of each key a memcached pool at ``url`` can keep, up to
    ``replicas`` (one per server at most); None when ``url`` is no memcached URL.

    What the session stores of both adapters ask: sessions are kept on several servers."""
    if not isinstance(url, str):
        return None
    parts = urlsplit(url)
    if SCHEMES.get(parts.scheme, parts.scheme) != "memcached":
        return None
    return min(replicas, len(parts.netloc.rpartition("@")[2].split(",")))


def parse_servers(netloc: str, url: str) -> list[Server]:
    """Read ``h1:p1[:weight],[::1]:p2[:weight]`` into servers."""
    if not netloc:
        raise ConfigError(f"no memcached servers in {url!r}; e.g. {EXAMPLES['memcached']}")
    return [_parse_server(item.strip(), url) for item in netloc.split(",")]


def _parse_server(item: str, url: str) -> Server:
    if item.startswith("["):
        host, _, rest = item[1:].partition("]")
        fields = rest.lstrip(":").split(":") if rest else []
    else:
        host, *fields = item.split(":")
    if not host or len(fields) > 2:
        raise ConfigError(
            f"bad memcached server {item!r} in {url!r}: use host[:port[:weight]],"
            f" e.g. {EXAMPLES['memcached']}"
        )
    port = _number(fields[0], "port", item, url) if fields else 11211
    weight = _number(fields[1], "weight", item, url) if len(fields) > 1 else 1
    if not 0 < port < 65536:
        raise ConfigError(f"bad port {port} for memcached server {item!r} in {url!r}")
    if weight < 1:
        raise ConfigError(f"weight must be >= 1 for memcached server {item!r} in {url!r}")
    return Server(host, port, weight)


def _number(text: str, what: str, item: str, url: str) -> int:
    if not text.isdigit():
        raise ConfigError(
            f"{what} of memcached server {item!r} in {url!r} must be a whole number, got {text!r}"
        )
    return int(text)


def _memcached(netloc: str, path: str, options: dict[str, object], url: str) -> Store:
    install = "pymemcache: pip install pymemcache (or the [memcached] extra)"
    memcached_store = _needing(url, "memcached.store", "MemcachedStore", install)
    if path.strip("/"):
        raise ConfigError(f"memcached:// takes no path, got {url!r}; e.g. {EXAMPLES['memcached']}")
    userinfo, at, hosts = netloc.rpartition("@")
    if at:
        username, colon, password = userinfo.partition(":")
        if not colon:
            raise ConfigError(
                f"memcached user without a password in {url!r}: write"
                f" {EXAMPLES['memcached+tls']} (percent-encode ':', '@' and ' ' in them)"
            )
        options = {"username": unquote(username), "password": unquote(password), **options}
    return memcached_store(parse_servers(hosts, url), **options)


def _tiered(netloc: str, path: str, options: dict[str, object], url: str) -> Store:
    if netloc or path.strip("/") or "hot" not in options or "cold" not in options:
        raise ConfigError(
            f"tiered:// takes a hot and a cold store URL as options, got {url!r};"
            f" e.g. {EXAMPLES['tiered']} (URL-encode the inner URLs' own query strings)"
        )
    tiers = {
        name: from_url(tier) if isinstance(tier, str) else tier
        for name, tier in (("hot", options.pop("hot")), ("cold", options.pop("cold")))
    }
    return TieredStore(tiers["hot"], tiers["cold"], **options)  # type: ignore[arg-type]


_REDIS_PY = "redis-py: pip install redis (or the [redis] extra)"


def _needing(url: str, module: str, name: str, install: str) -> Any:
    """Return the store class ``name`` of ``module``; if its driver is missing, say how
    to ``install`` it."""
    try:
        return getattr(importlib.import_module(f".{module}", __package__), name)
    except ImportError as error:
        raise ConfigError(f"{redacted_url(url)!r} needs {install} ({error})") from error


def _redis(base_url: str, options: dict[str, object]) -> Store:
    redis_store = _needing(base_url, "redis.store", "RedisStore", _REDIS_PY)
    parts = urlsplit(base_url)
    database = parts.path.strip("/")
    if database and not database.isdigit():
        raise ConfigError(
            f"redis database must be a number, got {database!r} in {redacted_url(base_url)!r};"
            f" e.g. {EXAMPLES['redis']}"
        )
    try:
        parts.port  # noqa: B018 - urlsplit validates the port lazily
    except ValueError as error:
        raise ConfigError(f"bad port in {redacted_url(base_url)!r}: {error}") from None
    return redis_store(base_url, **options)


def _sql_store(connector: object, options: dict[str, object]) -> Store:
    store_options = {name: options[name] for name in SQL_STORE_OPTIONS if name in options}
    return SqlStore(connector, **store_options)  # type: ignore[arg-type]


def _postgres(base_url: str, options: dict[str, object]) -> Store:
    install = "psycopg 3: pip install 'psycopg[binary]' (or the [postgres] extra)"
    postgres_connector = _needing(base_url, "sql.postgres", "PostgresConnector", install)
    if not urlsplit(base_url).path.strip("/"):
        shown = redacted_url(base_url)
        raise ConfigError(f"no database named in {shown!r}; e.g. {EXAMPLES['postgresql']}")
    names = ("table", "timeout", "connect_timeout", "prepare", "max_connections")
    connector = postgres_connector(base_url, **{n: options[n] for n in names if n in options})
    return _sql_store(connector, options)


def _sqlite(netloc: str, path: str, options: dict[str, object], url: str) -> Store:
    from mcache.stores.sql.sqlite import SqliteConnector, check_version

    if netloc or not path.strip("/"):
        raise ConfigError(
            f"sqlite:/// takes a file path, got {url!r}: sqlite:///cache.db (relative) or"
            f" {EXAMPLES['sqlite']} (absolute)"
        )
    problem = check_version()
    if problem:
        raise ConfigError(f"{url!r}: {problem}; use postgresql:// or a newer Python")
    names = ("table", "timeout")
    connector = SqliteConnector(path[1:], **{n: options[n] for n in names if n in options})  # type: ignore[arg-type]
    return _sql_store(connector, options)
