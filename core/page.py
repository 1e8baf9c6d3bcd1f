"""Cached pages as both adapters store them: ``(status, headers, body, *flags)``.

A page comes back from the store as the codec gives it: msgpack and JSON turn
tuples into lists, and JSON keeps the body as a latin-1 string (see
``Codec.storable_bytes``). ``as_page`` accepts exactly those shapes and returns
the tuple again; anything else under a page's key (another client's value,
bytes written by hand) is no page, and ``None``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .codec import Codec

if TYPE_CHECKING:
    from .cache import Cache

__all__ = ["as_page", "drop_foreign"]


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


def _is_header(header: Any) -> bool:
    return (
        type(header) in (tuple, list) and len(header) == 2 and all(type(p) is str for p in header)
    )


def drop_foreign(cache: Cache, key: tuple[Any, ...]) -> None:
    """Drop a value under a page's key that is no page, so the page is built anew; log it once."""
    cache.failures.warning("view.foreign", "a page's key held no page; rendered anew: %r", key[:5])
    cache.delete(key)
