"""The store keys of a simulated entry and of its build lock, as a cache makes them.

An entry is a row's (``row3``: the row itself) or a page's (``page3``: a page that
shows row 3, built over a nested read of ``row3``).
"""

from __future__ import annotations

from typing import Any

from mcache import Cache

ENTRIES = ("row", "page")


def entry_key(cache: Cache, row: int, entry: str = "row") -> str:
    """The store key of the ``entry`` ("row" or "page") of ``row``."""
    return cache._store_key(f"{entry}{row}")


def lock_key(cache: Cache, row: int, entry: str = "row") -> str:
    """The store key of the build lock of that entry."""
    return cache.parts.derived_key("l", entry_key(cache, row, entry))


def tag_prefix(cache: Cache) -> str:
    """What every tag key of the cache's namespace begins with (its copies' too)."""
    return cache.tags.key("t0").removesuffix("t0")


def reads_a_tag(prefix: str, method: str, args: tuple[Any, ...]) -> bool:
    """Whether a store call (a store's method, or a pool node's command: a batch of meta
    requests, a leasing read with the keys it reads beside) reads a key beginning with
    ``prefix``: a tag's version."""
    if method == "meta":
        mark = b"mg " + prefix.encode()
        return any(request.startswith(mark) for request in args[0])
    if method == "leased_get":
        args = args[1:]
    elif not method.startswith("get") or not args:
        return False
    keys = args[0] if isinstance(args[0], list | tuple) else (args[0],)
    return any(isinstance(key, str) and key.startswith(prefix) for key in keys)
