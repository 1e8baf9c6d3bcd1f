"""Cached pages as both adapters store them: ``(status, headers, body, *flags)``.

A page comes back from the store as the codec gives it: msgpack and JSON turn
tuples into lists, and JSON keeps the body as a latin-1 string (see
``Codec.storable_bytes``). ``as_page`` accepts exactly those shapes and returns
the tuple again; anything else under a page's key (another client's value,
bytes written by hand) is no page, and ``None``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from mcache.engine.build import STALE_SERVED
from mcache.model.codec import Codec
from mcache.model.jobs import in_process
from mcache.observe.outcome import BYPASS, STORE_FAILED, UNCACHED
from mcache.sansio.steps import BlockingOrAwaited, Steps

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = [
    "FRAGMENTS_STAY",
    "PAGES_STAY",
    "PageBuild",
    "PageSettings",
    "Served",
    "as_page",
    "check_view_ttl",
    "serve_steps",
]

PAGES_STAY = "cached pages re-render in the web process: they need their request"
"""Why a page's rebuild never goes to a task queue (see :func:`mcache.model.jobs.in_process`)."""
FRAGMENTS_STAY = "template fragments re-render in the web process: they need their context"


def as_page(found: Any, flags: int = 0) -> tuple | None:
    """Return ``found`` as ``(status, [(name, value)…], body bytes, *flags)``, or None."""
    if type(found) not in (tuple, list) or len(found) != 3 + flags:
        return None
    status, headers, body, *rest = found
    if type(status) is not int or type(headers) not in (tuple, list):
        return None
    if type(body) not in (bytes, str) or any(type(flag) is not bool for flag in rest):
        return None
    if not all(_is_header(header) for header in headers):
        return None
    return (status, [tuple(header) for header in headers], Codec.bytes_of(body), *rest)


def check_view_ttl(ttl: object, decorator: str) -> None:
    """Refuse a ``cached_view`` ttl that is no number of seconds, saying how to write one."""
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int | float)):
        raise TypeError(
            f"cached_view: ttl must be a number of seconds or None, got {ttl!r};"
            f" write @{decorator}(300) or @{decorator}()"
        )


@dataclass(frozen=True)
class PageSettings:
    """What a ``cached_view`` decorator was given, checked once; each adapter adds its own."""

    ttl: float | None
    stale_ttl: float | None = None
    tags: Any = None
    """Tag names, or a callable of the view's arguments returning them."""
    vary: tuple[str, ...] = ()
    """The lower-cased names of the request headers the page's key covers."""
    refresh: str | None = None
    header: str | None = "X-Cache"
    stale_wait: float | None = None

    def options(self, tags: Any, dependencies: Iterable[str]) -> dict[str, Any]:
        """The page's ``get_or_build`` options: ``tags`` (the view's, resolved) and the
        ``dependencies``' tags."""
        names = [tags] if isinstance(tags, str) else list(tags or ())
        return {
            "ttl": self.ttl,
            "stale_ttl": self.stale_ttl,
            "tags": [*names, *dependencies],  # repeats dropped by get_or_build
            "refresh": self.refresh,
            "stale_wait": self.stale_wait,
        }


def _is_header(header: Any) -> bool:
    return (
        type(header) in (tuple, list) and len(header) == 2 and all(type(p) is str for p in header)
    )


def _log_foreign(cache: Cache, key: tuple[Any, ...]) -> None:
    cache.failures.warning("view.foreign", "a page's key held no page; rendered anew: %r", key[:5])


@contextlib.contextmanager
def _reports_cleared() -> Iterator[None]:
    """Clear what ``get_or_build`` reports in context variables, and put them back after."""
    served, failed, uncached = STALE_SERVED.set(False), STORE_FAILED.set(False), UNCACHED.set("")
    try:
        yield
    finally:
        STALE_SERVED.reset(served)
        STORE_FAILED.reset(failed)
        UNCACHED.reset(uncached)


class PageBuild:
    """A page's build: ``here()`` in the request's thread (this request built the page),
    ``elsewhere()`` in a refresher's (a background refresh, after the response)."""

    def __init__(self, here: Callable[[], Any], elsewhere: Callable[[], Any]) -> None:
        self.here, self.elsewhere = here, elsewhere
        self.thread = threading.get_ident()
        self.built = False

    def __call__(self) -> Any:
        if threading.get_ident() != self.thread:
            return self.elsewhere()
        self.built = True
        return self.here()


class Served(NamedTuple):
    """How :func:`serve_steps` answers: a page to restore marked ``state`` (HIT, MISS,
    STALE), or BYPASS with the caller's own ``response`` (None: run the view again)."""

    state: str
    reason: str = ""
    page: tuple | None = None
    response: Any = None


def serve_steps(
    cache: Cache,
    key: tuple[Any, ...],
    head: bool,
    options: Steps[dict[str, Any]],
    build: PageBuild,
    flags: int,
    own: type,
    serves: Callable[[tuple], bool] = lambda page: True,
) -> Steps[Served]:
    """Serve a page, as steps either driver runs: HEAD from the GET entry (never stored
    from a HEAD), else ``get_or_build`` with the options ``options`` return (``build`` a
    coroutine function for the async driver). ``serves(page)`` says whether a stored page
    may answer this request. A result that is an ``own`` is the caller's uncacheable
    response; anything else that is no page is dropped, logged, and built once more.
    """
    if head:
        peek = BlockingOrAwaited(partial(cache.peek, key, None), partial(cache.apeek, key, None))
        found = as_page((yield peek), flags)
        if found is None or not serves(found):
            return Served(BYPASS, "head" if found is None else "session")
        return Served("HIT", page=found)
    job, page_options = in_process(build, PAGES_STAY), (yield from options)
    read = BlockingOrAwaited(
        partial(cache.get_or_build, key, job, **page_options),
        partial(cache.aget_or_build, key, job, **page_options),
    )
    with _reports_cleared():
        result = yield read
        page = as_page(result, flags)
        if page is None and not isinstance(result, own):
            _log_foreign(cache, key)
            yield BlockingOrAwaited(partial(cache.delete, key), partial(cache.adelete, key))
            STALE_SERVED.set(False)  # what the first read said is not about this page
            result = yield read
            page = as_page(result, flags)
        if isinstance(result, own):  # this request's own, uncacheable response
            return Served(BYPASS, UNCACHED.get(), response=result)
        if page is None or not serves(page):
            return Served(BYPASS, "session" if page is not None else "foreign")
        if STORE_FAILED.get() and build.built:
            return Served("MISS", "store-down", page)
        return Served(
            "STALE" if STALE_SERVED.get() else "MISS" if build.built else "HIT", page=page
        )
