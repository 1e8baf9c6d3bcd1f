"""Purge targets named by URL, as a site's settings name them.

- ``varnish://127.0.0.1:6081`` (``varnish+https://…`` over TLS): a Varnish with the
  xkey module; ``?soft=1`` for soft purges;
- ``fastly://<service id>?token=env:FASTLY_API_TOKEN``: a Fastly service;
  ``&soft=1`` for soft purges;
- ``cloudflare://<zone id>?token=env:CLOUDFLARE_API_TOKEN``: a Cloudflare zone.

A token is read from the environment (``env:NAME``), so settings files hold no secret;
a literal token is taken too. ``api=`` points Fastly or Cloudflare elsewhere (a proxy,
or a local server in tests). A bad URL fails at start-up naming the setting.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from mcache.errors import ConfigError

from .sender import Purger
from .targets import Cloudflare, Fastly, PurgeTarget, Varnish

__all__ = ["purger_from", "target_from_url"]

_EXAMPLES = (
    "'varnish://127.0.0.1:6081', 'fastly://<service id>?token=env:FASTLY_API_TOKEN' or"
    " 'cloudflare://<zone id>?token=env:CLOUDFLARE_API_TOKEN'"
)


def purger_from(value: Any, setting: str) -> Purger | None:
    """Return the purger ``value`` names (a URL, a list of URLs, or a purger), or None."""
    if value is None or value == [] or value == ():
        return None
    if hasattr(value, "purge"):
        return value  # type: ignore[no-any-return]
    urls: Sequence[Any] = [value] if isinstance(value, str) else value
    if not isinstance(urls, list | tuple) or not all(isinstance(url, str) for url in urls):
        shown = (
            "a list holding something else"
            if isinstance(urls, list | tuple)
            else type(value).__name__
        )
        raise ConfigError(
            f"{setting} must be a purge URL or a list of them ({_EXAMPLES}), got {shown}"
        )
    return Purger([target_from_url(url, setting) for url in urls])


def target_from_url(url: str, setting: str) -> PurgeTarget:
    """Return the target ``url`` names; fail naming ``setting`` and what to write."""
    parts = urlsplit(url)
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    soft = query.pop("soft", "0") in ("1", "true", "yes")
    scheme = parts.scheme.lower()
    if scheme in ("varnish", "varnish+http", "varnish+https"):
        if not parts.netloc:
            raise ConfigError(
                f"{setting}: {_shown(url)!r} names no Varnish; write 'varnish://127.0.0.1:6081'"
            )
        transport = "https" if scheme == "varnish+https" else "http"
        return Varnish([f"{transport}://{parts.netloc}{parts.path or '/'}"], soft=soft)
    if scheme in ("fastly", "cloudflare"):
        ident = unquote(parts.netloc)
        token = _token(query.pop("token", ""), url, setting)
        api = query.pop("api", None)
        if scheme == "fastly":
            return Fastly(ident, token, soft, api or "https://api.fastly.com")
        if soft:
            raise ConfigError(
                f"{setting}: Cloudflare has no soft purge; drop soft=1 from {_shown(url)!r}"
            )
        return Cloudflare(ident, token, api or "https://api.cloudflare.com/client/v4")
    raise ConfigError(f"{setting}: unknown purge target {_shown(url)!r}; write {_EXAMPLES}")


def _token(given: str, url: str, setting: str) -> str:
    """Return the API token ``given`` names (``env:NAME``: that environment variable)."""
    if not given:
        raise ConfigError(
            f"{setting}: {_shown(url)!r} needs its API token: add ?token=env:<VARIABLE>"
        )
    if not given.startswith("env:"):
        return given
    name = given[4:]
    token = os.environ.get(name, "")
    if not token:
        raise ConfigError(
            f"{setting}: the environment variable {name}, the API token of"
            f" {_shown(url)!r}, is not set"
        )
    return token


def _shown(url: str) -> str:
    """Return ``url`` as an error may show it: without its query, where a token may be."""
    return url.split("?", 1)[0] + ("?…" if "?" in url else "")
