"""URLs that name several Redis hosts: ``scheme://[user:password@]h1:p1,h2:p2/path``.

Sentinel and Cluster URLs list the servers to learn the topology from, which
``urllib`` cannot read (one host per URL); both are parsed here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from mcache.errors import ConfigError
from mcache.stores.redis.store import _redacted

__all__ = ["HostsURL", "parse_hosts_url"]


@dataclass(frozen=True)
class HostsURL:
    """The hosts, credentials and path of a several-host URL (query string removed)."""

    hosts: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    path: str


def parse_hosts_url(url: str, what: str, default_port: int, example: str) -> HostsURL:
    """Split ``url``; a bad port or no ``what`` (``sentinel``) at all fails showing ``example``."""
    _, _, rest = url.partition("://")
    netloc, _, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    username = password = None
    if at:
        user, colon, secret = userinfo.partition(":")
        username, password = (unquote(user) or None), (unquote(secret) if colon else None)
    parsed = tuple(
        _host_port(host, url, what, default_port, example) for host in hosts.split(",") if host
    )
    if not parsed:
        raise ConfigError(f"no {what} named in {_redacted(url)!r}; e.g. {example}")
    return HostsURL(parsed, username, password, path.strip("/"))


def _host_port(text: str, url: str, what: str, default_port: int, example: str) -> tuple[str, int]:
    if text.startswith("["):  # [::1]:26379
        host, _, port = text[1:].partition("]")
        port = port.removeprefix(":")
    else:
        host, _, port = text.partition(":")
    if not port:
        return host, default_port
    if not port.isdigit():
        raise ConfigError(f"bad {what} port {port!r} in {_redacted(url)!r}; e.g. {example}")
    return host, int(port)
