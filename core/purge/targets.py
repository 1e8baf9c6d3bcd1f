"""Where purges go: Varnish (xkey), Fastly and Cloudflare, each as the requests it takes.

A target only says which HTTP requests purge a batch of keys; :class:`~.sender.Purger`
sends them, off the request path. Each follows its vendor's published interface:

- **Varnish** with the xkey module (Debian's ``varnish-modules``): a ``PURGE`` to each
  Varnish with the keys in an ``xkey-purge`` header (``xkey-softpurge`` for a soft
  purge), which the VCL in docs/how-to/varnish.vcl hands to ``xkey.purge``;
- **Fastly**: ``POST /service/<id>/purge`` with ``{"surrogate_keys": [...]}``, at most
  256 keys a request, authenticated by ``Fastly-Key`` (``Fastly-Soft-Purge: 1`` marks
  the objects stale instead of removing them);
- **Cloudflare**: ``POST /zones/<zone>/purge_cache`` with ``{"tags": [...]}``, at most
  100 tags a request, authenticated by a ``Bearer`` API token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import quote, urlsplit

from mcache.errors import ConfigError

__all__ = ["Cloudflare", "Fastly", "PurgeRequest", "PurgeTarget", "Varnish", "batches"]


@dataclass(frozen=True)
class PurgeRequest:
    """One HTTP request of a purge."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # an API token
    body: bytes | None = None
    direct: bool = False
    """Sent around any proxy the environment names (a Varnish beside the site)."""


class PurgeTarget(Protocol):
    """A cache in front: the requests that purge ``keys`` there."""

    def requests(self, keys: Sequence[str]) -> list[PurgeRequest]:
        """Return the requests purging ``keys`` (already a batch this target takes)."""

    @property
    def batch(self) -> int:
        """The most keys one request may carry."""


def batches(keys: Sequence[str], most: int, max_bytes: int) -> Iterator[list[str]]:
    """Yield ``keys`` in runs of at most ``most`` keys and ``max_bytes`` joined by a space."""
    run: list[str] = []
    size = 0
    for key in keys:
        if run and (len(run) == most or size + 1 + len(key) > max_bytes):
            yield run
            run, size = [], 0
        size += len(key) + (1 if run else 0)
        run.append(key)
    if run:
        yield run


def _http_url(url: str, setting: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"{setting} must be an http:// or https:// URL, got {url!r}")
    return url


class Varnish:
    """Varnish servers with the xkey module, each purged by a ``PURGE`` request."""

    batch = 100
    max_header_bytes = 4096
    """Well under Varnish's default ``http_req_hdr_len`` (8 KB) for one header."""

    def __init__(self, urls: Sequence[str], soft: bool = False) -> None:
        if isinstance(urls, str):
            urls = [urls]
        if not urls:
            raise ConfigError(
                "a Varnish purge needs the URL of each Varnish, e.g. ['http://127.0.0.1:6081/']"
            )
        self.urls = [_http_url(url, "the Varnish purge URL") for url in urls]
        self.header = "xkey-softpurge" if soft else "xkey-purge"

    def requests(self, keys: Sequence[str]) -> list[PurgeRequest]:
        return [
            PurgeRequest("PURGE", url, {self.header: " ".join(run)}, direct=True)
            for run in batches(keys, self.batch, self.max_header_bytes)
            for url in self.urls
        ]


class Fastly:
    """A Fastly service, purged by surrogate keys through its API."""

    batch = 256

    def __init__(
        self, service_id: str, token: str, soft: bool = False, api: str = "https://api.fastly.com"
    ) -> None:
        if not service_id or not token:
            raise ConfigError("a Fastly purge needs the service's id and an API token")
        base = _http_url(api, "the Fastly API URL").rstrip("/")
        self.url = f"{base}/service/{quote(service_id, safe='')}/purge"
        self.headers = {
            "Fastly-Key": token,
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        if soft:
            self.headers["Fastly-Soft-Purge"] = "1"

    def requests(self, keys: Sequence[str]) -> list[PurgeRequest]:
        return [
            PurgeRequest(
                "POST", self.url, dict(self.headers), json.dumps({"surrogate_keys": run}).encode()
            )
            for run in batches(keys, self.batch, 1 << 20)
        ]


class Cloudflare:
    """A Cloudflare zone, purged by cache tags through its API."""

    batch = 100

    def __init__(
        self, zone_id: str, token: str, api: str = "https://api.cloudflare.com/client/v4"
    ) -> None:
        if not zone_id or not token:
            raise ConfigError("a Cloudflare purge needs the zone's id and an API token")
        base = _http_url(api, "the Cloudflare API URL").rstrip("/")
        self.url = f"{base}/zones/{quote(zone_id, safe='')}/purge_cache"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def requests(self, keys: Sequence[str]) -> list[PurgeRequest]:
        return [
            PurgeRequest("POST", self.url, dict(self.headers), json.dumps({"tags": run}).encode())
            for run in batches(keys, self.batch, 1 << 20)
        ]
