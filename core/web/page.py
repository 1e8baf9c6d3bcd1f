"""Cached pages as both adapters store them: ``(status, headers, body, *flags)``.

A page comes back from the store as the codec gives it: msgpack and JSON turn
tuples into lists, and JSON keeps the body as a latin-1 string (see
``Codec.storable_bytes``). ``as_page`` accepts exactly those shapes and returns
the tuple again; anything else under a page's key (another client's value,
bytes written by hand) is no page, and ``None``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple

from mcache.engine.build import STALE_SERVED
from mcache.model.codec import Codec
from mcache.observe.outcome import STORE_FAILED, UNCACHED
from mcache.sansio.steps import BlockingOrAwaited, Steps, perform, run_steps

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = [
    "FRAGMENTS_STAY",
    "PAGES_STAY",
    "PageRead",
    "as_page",
    "check_view_ttl",
    "get_page",
    "page_steps",
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


def _is_header(header: Any) -> bool:
    return (
        type(header) in (tuple, list) and len(header) == 2 and all(type(p) is str for p in header)
    )


def _log_foreign(cache: Cache, key: tuple[Any, ...]) -> None:
    cache.failures.warning("view.foreign", "a page's key held no page; rendered anew: %r", key[:5])


class PageRead(NamedTuple):
    """What :func:`page_steps` found: the value, it as a page, and how it was served."""

    result: Any
    """What came back: a page, or the caller's own uncacheable response."""
    page: tuple | None
    stale: bool
    """A stale page was served (its rebuild may have started)."""
    store_down: bool
    """The store failed during the read: the page was rendered for this request alone."""
    refused: str
    """Why ``result`` is the caller's own response, not stored (its ``Uncacheable``'s
    reason); "" otherwise."""


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


def _read(result: Any, page: tuple | None) -> PageRead:
    return PageRead(result, page, STALE_SERVED.get(), STORE_FAILED.get(), UNCACHED.get())


def page_steps(
    cache: Cache,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    flags: int,
    own: type,
    options: dict[str, Any],
) -> Steps[PageRead]:
    """``get_or_build`` a page, as steps either driver runs; return what came back and how
    (see :class:`PageRead`). ``build`` is a coroutine function for the async driver.

    What came back is the caller's own uncacheable response when it is an
    ``own``; anything else that is no page (another client's value under the
    key) is dropped, logged, and the page built once more.
    """
    with _reports_cleared():
        result = yield _get_or_build(cache, key, build, options)
        page = as_page(result, flags)
        if page is None and not isinstance(result, own):
            _log_foreign(cache, key)
            yield BlockingOrAwaited(partial(cache.delete, key), partial(cache.adelete, key))
            STALE_SERVED.set(False)  # what the first read said is not about this page
            result = yield _get_or_build(cache, key, build, options)
            page = as_page(result, flags)
        return _read(result, page)


def _get_or_build(
    cache: Cache, key: tuple[Any, ...], build: Callable[[], Any], options: dict[str, Any]
) -> BlockingOrAwaited:
    return BlockingOrAwaited(
        partial(cache.get_or_build, key, build, **options),
        partial(cache.aget_or_build, key, build, **options),
    )


def get_page(
    cache: Cache,
    key: tuple[Any, ...],
    build: Callable[[], Any],
    flags: int,
    own: type,
    options: dict[str, Any],
) -> PageRead:
    """:func:`page_steps`, run by calling (for an adapter that serves pages in sync code only)."""
    return run_steps(page_steps(cache, key, build, flags, own, options), perform)
