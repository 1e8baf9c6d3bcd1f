"""What ``@cached_view`` tells the edge about a page it answered, and where it leaves it.

The adapter knows how a page's key is made from a request; the edge, wrapped around
the application, sees the response that finally leaves it (after every middleware).
The adapter leaves a :class:`PageRecord` in the request's WSGI environ or ASGI scope,
the one dict both share, and the edge learns from the two together
(:mod:`mcache.edge.learning`). Only a page any anonymous visitor may be given is
recorded: no holes, not per user, answered from (or stored to) the cache.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["CHANNEL", "PageRecord", "leave_record"]

CHANNEL = "mcache.edge"
"""The environ (or scope) key a record is left under."""


class PageRecord(NamedTuple):
    """How a page's key is made, and the page itself, as the adapter served it.

    The key is ``(*prefix, vary values, *middle, cookie values)``: ``prefix`` holds
    what the request's address gave (view, scheme, host, path, query), ``vary_environ``
    the environ names of the headers the key covers, ``cookies`` the significant
    cookies' names (None: none declared). ``signature_environ``: environ names, besides
    the edge's own, that the adapter's scheme or host reads (a proxy's SSL header).
    """

    cache: Cache
    key: tuple[Any, ...]
    page: tuple
    prefix: tuple[Any, ...]
    vary_environ: tuple[str, ...]
    middle: tuple[Any, ...]
    cookies: tuple[str, ...] | None
    private_cookies: frozenset[str]
    """Cookies whose presence makes a visitor someone (the session's): never answered."""
    parse_cookies: Callable[[str], Mapping[str, str]]
    header: str | None
    tags: list[str] | None = None
    """The tags the page was stored with (its hit reads their versions with it, in one
    round trip); None: unknown, read as a plain ``get`` reads it."""
    signature_environ: tuple[str, ...] = ()


def leave_record(channel: MutableMapping[str, Any], record: PageRecord) -> None:
    """Leave ``record`` in the request's environ or scope for an edge around the application."""
    channel[CHANNEL] = record
