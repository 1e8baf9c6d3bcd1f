"""The store keys of a simulated row's entry and of its build lock, as a cache makes them."""

from __future__ import annotations

from mcache import Cache


def entry_key(cache: Cache, row: int) -> str:
    """The store key of the entry that caches ``row``."""
    return cache._store_key(f"row{row}")


def lock_key(cache: Cache, row: int) -> str:
    """The store key of the build lock of ``row``'s entry."""
    return cache.parts.derived_key("l", entry_key(cache, row))
