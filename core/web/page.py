"""Cached pages as both adapters store them: ``(status, headers, body, holes, built, *flags)``.

``holes`` is the page's list of holes (see :mod:`mcache.web.holes`): ``[]``, or the
nonce of its placeholders and their recipes; ``built`` is when it was rendered (Unix
seconds), from which a response says its ``Age`` to a cache in front.

A page comes back from the store as the codec gives it: msgpack and JSON turn tuples
into lists, and JSON keeps the body as a latin-1 string (see ``Codec.storable_bytes``).
``as_page`` accepts exactly those shapes and returns the tuple again; anything else under
a page's key (another client's value, bytes written by hand) is no page, and ``None``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from mcache.engine.build import STALE_SERVED
from mcache.model.codec import Codec
from mcache.model.jobs import in_process
from mcache.observe.outcome import BYPASS, STORE_FAILED, UNCACHED
from mcache.sansio.steps import BlockingOrAwaited, Steps
from mcache.web.query import QueryRule

if TYPE_CHECKING:
    from mcache.cache import Cache
    from mcache.engine.call import BuildOptions

__all__ = [
    "FRAGMENTS_STAY",
    "PAGES_STAY",
    "PageBuild",
    "PageSettings",
    "Served",
    "age",
    "as_page",
    "cdn_cache_control",
    "check_hole_context",
    "check_view_ttl",
    "cookie_names",
    "cookie_values",
    "serve_steps",
    "shared_windows",
]

PAGES_STAY = "cached pages re-render in the web process: they need their request"
"""Why a page's rebuild never goes to a task queue (see :func:`mcache.model.jobs.in_process`)."""
FRAGMENTS_STAY = "template fragments re-render in the web process: they need their context"


def as_page(found: Any, flags: int = 0) -> tuple | None:
    """Return ``found`` as ``(status, [(name, value)…], body bytes, [hole…], built,
    *flags)``, or None."""
    if type(found) not in (tuple, list) or len(found) != 5 + flags:
        return None
    status, headers, body, holes, built, *rest = found
    if type(status) is not int or type(headers) not in (tuple, list):
        return None
    if type(built) not in (int, float):
        return None
    if type(body) not in (bytes, str) or any(type(flag) is not bool for flag in rest):
        return None
    if type(holes) not in (tuple, list) or not all(type(hole) is str for hole in holes):
        return None
    if not all(_is_header(header) for header in headers):
        return None
    page_headers = [tuple(header) for header in headers]
    return (status, page_headers, Codec.bytes_of(body), list(holes), built, *rest)


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
    cookies: tuple[str, ...] | None = None
    """The names of the cookies the page's key covers (None: not declared, see
    :func:`significant_cookies`)."""
    cdn: bool | None = None
    """Whether a stored page tells caches in front its windows (None: the site's setting)."""
    query: QueryRule | None = None
    """The query parameters a page's key keeps (None: the site's rule, see
    :mod:`mcache.web.query`)."""

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


def cookie_names(cookies: object, setting: str) -> tuple[str, ...] | None:
    """Return the significant cookies' names, checked: ``setting`` names where they came from."""
    if cookies is None:
        return None
    names = list(cookies) if isinstance(cookies, list | tuple | set | frozenset) else None
    if names is None or not all(isinstance(name, str) and name for name in names):
        raise TypeError(
            f"{setting} must be a list of cookie names, e.g. ['theme'], got {cookies!r}"
        )
    return tuple(sorted(set(names)))


def check_hole_context(hole_context: object, decorator: str) -> None:
    """Refuse a ``hole_context`` that is not a mapping of names to callables."""
    if hole_context is None:
        return
    if not isinstance(hole_context, Mapping) or not all(
        isinstance(name, str) and callable(make) for name, make in hole_context.items()
    ):
        raise TypeError(
            f"{decorator}: hole_context must be a dict of names to callables, e.g."
            f" {{'cart': cart_count}} (or {{}}), got {hole_context!r}"
        )


def cookie_values(names: tuple[str, ...] | None, cookies: Mapping[str, str]) -> tuple:
    """Return what a page's key holds of the request's cookies: the value of each
    significant one (None when absent, which differs from empty), and nothing of others."""
    return tuple(cookies.get(name) for name in names or ())


def shared_windows(options: BuildOptions) -> dict[str, int] | None:
    """Return the ``Cache-Control`` directives that keep a page in a shared cache in front
    for the entry's own windows: ``s-maxage`` (RFC 9111) its ``ttl``,
    ``stale-while-revalidate`` and ``stale-if-error`` (RFC 5861) its ``stale_ttl``. None
    for an entry that never expires: only an invalidation ends it, which a CDN never sees."""
    if options.ttl <= 0:
        return None
    stale = options.stale_ttl
    return {"s-maxage": options.ttl, "stale-while-revalidate": stale, "stale-if-error": stale}


def cdn_cache_control(windows: Mapping[str, int]) -> str:
    """Return RFC 9213's ``CDN-Cache-Control`` for ``windows``: the same directives, read
    only by a CDN, where ``max-age`` is the CDN's own."""
    return ", ".join(
        f"{'max-age' if name == 's-maxage' else name}={value}" for name, value in windows.items()
    )


def age(page: tuple) -> str:
    """Return the ``Age`` of a stored page in whole seconds, as RFC 9111 writes it."""
    return str(max(0, int(time.time() - page[4])))


def _is_header(header: Any) -> bool:
    return (
        type(header) in (tuple, list) and len(header) == 2 and all(type(p) is str for p in header)
    )


def _log_foreign(cache: Cache, key: tuple[Any, ...]) -> None:
    cache.failures.warning("view.foreign", "a page's key held no page; rendered anew: %r", key[:5])


@contextlib.contextmanager
def _reports_cleared() -> Iterator[None]:
    """Clear what ``get_or_build`` reports in context variables, and put them back after."""
    served, failed, uncached = STALE_SERVED.set(False), STORE_FAILED.set(""), UNCACHED.set("")
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
    """How :func:`serve_steps` answers: a ``page`` to restore marked ``state`` (HIT, MISS,
    STALE; BYPASS when it was rendered and could not be stored), or, with no page, BYPASS
    with the caller's own ``response`` (None: run the view again)."""

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
    refusal: Callable[[tuple], str | None] = lambda page: None,
) -> Steps[Served]:
    """Serve a page, as steps either driver runs: HEAD from the GET entry (never stored
    from a HEAD), else ``get_or_build`` with the options ``options`` return (``build`` a
    coroutine function for the async driver). ``refusal(page)`` says why a stored page
    may not answer this request, or None. A result that is an ``own`` is the caller's uncacheable
    response; anything else that is no page is dropped, logged, and built once more.
    """
    if head:
        peek = BlockingOrAwaited(partial(cache.peek, key, None), partial(cache.apeek, key, None))
        found = as_page((yield peek), flags)
        refused = "head" if found is None else refusal(found)
        if refused is not None:
            return Served(BYPASS, refused)
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
        refused = "foreign" if page is None else refusal(page)
        if refused is not None:
            return Served(BYPASS, refused)
        failed = STORE_FAILED.get()
        if failed and build.built:  # rendered for this request, and not stored
            return Served(BYPASS if failed == "too-large" else "MISS", failed, page)
        return Served(
            "STALE" if STALE_SERVED.get() else "MISS" if build.built else "HIT", page=page
        )
