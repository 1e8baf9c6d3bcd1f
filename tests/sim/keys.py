"""The store keys of a simulated entry and of its build lock, as a cache makes them.

An entry is a row's (``row3``: the row itself) or a page's (``page3``: a page that
shows row 3, built over a nested read of ``row3``).
"""

from __future__ import annotations

from mcache import Cache

ENTRIES = ("row", "page")


def entry_key(cache: Cache, row: int, entry: str = "row") -> str:
    """The store key of the ``entry`` ("row" or "page") of ``row``."""
    return cache._store_key(f"{entry}{row}")


def lock_key(cache: Cache, row: int, entry: str = "row") -> str:
    """The store key of the build lock of that entry."""
    return cache.parts.derived_key("l", entry_key(cache, row, entry))
