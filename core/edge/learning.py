"""What the edge knows: for each request address, how its page's key is made and the
headers the application sent with each stored page.

Learned, never configured: when a response leaves the application with a
:class:`~mcache.edge.record.PageRecord` beside it, and that response is exactly the
stored page (same status, same body, byte for byte) sent to anyone (no ``Set-Cookie``,
nothing private, no ``Vary`` the page's key does not cover), its headers, as every
middleware left them, are what the edge sends with that page. A middleware that
changed the body (compression, a debug toolbar) or made the response personal leaves
nothing to learn, and those pages always go to the application.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mcache.edge.record import PageRecord
from mcache.logs import FailureLog
from mcache.memo import BoundedMemo
from mcache.observe.outcome import reason_header

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["ADDRESS_ENVIRON", "Learned", "Recipe", "Sent"]

ADDRESS_ENVIRON = (
    "wsgi.url_scheme",
    "HTTP_HOST",
    "SERVER_NAME",
    "SERVER_PORT",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
    "HTTP_X_FORWARDED_PROTO",
    "SCRIPT_NAME",
    "PATH_INFO",
    "QUERY_STRING",
)
"""What of a request makes the address part of its page's key, in either adapter."""
RECIPES = 4096
"""Addresses remembered per process (more, and the memo starts afresh)."""
RESPONSES_PER_ADDRESS = 8
"""Stored pages (variants, rebuilds) whose headers are kept per address."""
_LOG = FailureLog()
_PRIVATE = re.compile(r"\b(private|no-store|no-cache)\b", re.IGNORECASE)
_SPLIT = re.compile(r"\s*,\s*")


@dataclass
class Recipe:
    """How an address's page key is made, and the headers sent with its stored pages."""

    record: PageRecord
    sent: dict[tuple[tuple[Any, ...], float], list[tuple[str, str]]] = field(default_factory=dict)
    """``(key, built)`` of a stored page: the headers it left the application with."""

    def key_for(self, environ: Mapping[str, Any], cookies: Mapping[str, str]) -> tuple[Any, ...]:
        """Return the page key the adapter would make for this request."""
        record = self.record
        vary = tuple(environ.get(name) for name in record.vary_environ)
        chosen = tuple(cookies.get(name) for name in record.cookies or ())
        return (*record.prefix, vary, *record.middle, chosen)


@dataclass
class Sent:
    """A response leaving the application, as the edge saw it: for learning from."""

    status: int
    headers: list[tuple[str, str]]
    length: int = 0
    crc: int = 0

    def add(self, chunk: bytes) -> None:
        self.length += len(chunk)
        self.crc = zlib.crc32(chunk, self.crc)


class Learned:
    """The recipes of one edge (one process): bounded, forgotten all at once when full."""

    def __init__(self, cache: Callable[[], Cache | None]) -> None:
        self._cache = cache
        self.names: tuple[str, ...] = ADDRESS_ENVIRON
        self.recipes: BoundedMemo[tuple[Any, ...], Recipe] = BoundedMemo(RECIPES)

    def signature(self, environ: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple(environ.get(name) for name in self.names)

    def learn(self, environ: Mapping[str, Any], record: PageRecord, sent: Sent) -> bool:
        """Learn the headers of a response that is exactly its stored page; return whether.

        ``environ``: the request as it came, before the application saw it (Django
        rewrites some of it in place). A failure here only costs the lesson (logged):
        the response has gone out already."""
        try:
            return self._learn(environ, record, sent)
        except Exception as error:
            _LOG.warning("edge.learn", "the edge could not learn a page: %r", error)
            return False

    def _learn(self, environ: Mapping[str, Any], record: PageRecord, sent: Sent) -> bool:
        cache = self._cache()
        if cache is not None and record.cache is not cache:
            return False  # a page of another cache than the edge's
        if not _is_the_page(record, sent):
            return False
        extra = [n for n in record.signature_environ if n not in self.names]
        if extra:  # the adapter's address reads more than the edge did: start afresh
            self.names = (*self.names, *extra)
            self.recipes.clear()
        signature = self.signature(environ)
        kept = record._replace(key=(), page=())  # the recipe alone: no body held here
        recipe = self.recipes.get(signature)
        if recipe is None or recipe.record.prefix != record.prefix:
            recipe = self.recipes.remember(signature, Recipe(kept))
        recipe.record = kept  # the newest way its key is made (its tags, say)
        if len(recipe.sent) >= RESPONSES_PER_ADDRESS:
            recipe.sent.clear()
        recipe.sent[(record.key, record.page[4])] = _replayable(sent.headers, record.header)
        return True


def _is_the_page(record: PageRecord, sent: Sent) -> bool:
    """Return whether ``sent`` is the stored page, unchanged, fit for any anonymous visitor."""
    status, _, body, holes, *_ = record.page
    if holes or sent.status != status or sent.length != len(body):
        return False
    if sent.crc != zlib.crc32(body):
        return False  # a middleware rewrote the body (compressed it, injected a toolbar)
    allowed = {*(_vary_name(n) for n in record.vary_environ), "cookie"}
    for name, value in sent.headers:
        lower = name.lower()
        if lower == "set-cookie":
            return False
        if lower == "cache-control" and _PRIVATE.search(value):
            return False
        if lower == "vary" and not {v.lower() for v in _SPLIT.split(value.strip())} <= allowed:
            return False  # it depends on a header the key does not cover (Origin, say)
    return True


def _vary_name(environ_name: str) -> str:
    return environ_name.removeprefix("HTTP_").replace("_", "-").lower()


def _replayable(headers: Iterable[tuple[str, str]], header: str | None) -> list[tuple[str, str]]:
    """Return the headers to send again: without what told how this one response was
    answered (``X-Cache``, its reason, ``Cache-Status``), which the edge says anew."""
    own = {"cache-status"}
    if header:
        own |= {header.lower(), reason_header(header).lower()}
    return [(name, value) for name, value in headers if name.lower() not in own]
