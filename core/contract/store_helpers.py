"""Small pieces every store shares."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from mcache.contract.store import MAX_KEY_BYTES
from mcache.errors import ValueTooLarge

__all__ = [
    "COPY_SEARCH_PER_OWNER",
    "MiB",
    "check_delta",
    "check_size",
    "copies_per_owner",
    "counted",
    "stored_count",
    "too_large_message",
    "twin_made_once",
]

Owner = TypeVar("Owner", bound=Hashable)

COPY_SEARCH_PER_OWNER = 64
"""Suffixes tried per owner (server, slot range) when placing a key's copies."""

Twin = TypeVar("Twin")
MiB = 1024 * 1024
_U64 = 2**64
_DECIMAL = re.compile(rb"[0-9]{1,20}")


_TWIN_LOCK = threading.Lock()  # making a twin is rare: one lock for every store


def twin_made_once(store: Any, make: Callable[[], Twin]) -> Twin:
    """Return ``store._twin``, made by ``make()`` on the first call (racing callers share
    one); once it exists no lock is taken, as every awaited store call asks for it."""
    twin = store._twin
    if twin is None:
        with _TWIN_LOCK:
            if store._twin is None:
                store._twin = make()
            twin = store._twin
    return twin  # type: ignore[no-any-return]


def stored_count(data: object) -> int | None:
    """Read a counter as a store holds it: decimal digits, which memcached's ``decr``
    may pad with trailing spaces (``b"9 "``); anything else (a miss, foreign bytes) is None.
    """
    if isinstance(data, bytes):
        digits = data.rstrip(b" ")
        if digits.isdigit():
            return int(digits)
    return None


def counted(value: bytes, delta: int, op: str) -> int | None:
    """Return what ``incr`` (wrapping at 2**64) or ``decr`` (flooring at 0) makes of
    ``value``, as memcached counts; None when ``value`` is not a decimal integer.
    """
    if not _DECIMAL.fullmatch(value):
        return None
    number = int(value)
    return (number + delta) % _U64 if op == "incr" else max(number - delta, 0)


def check_delta(delta: int) -> None:
    """Refuse what memcached refuses: ``incr``/``decr`` take a non-negative int."""
    if not isinstance(delta, int) or isinstance(delta, bool) or delta < 0:
        raise ValueError(f"delta must be a non-negative int, got {delta!r}; use decr to subtract")


def check_size(key: str, value: bytes, limit: int, hint: str = "") -> None:
    """Refuse a value over the store's ``limit`` (``hint``: a server's own limit, if it has one)."""
    if len(value) > limit:
        raise ValueTooLarge(too_large_message(key, len(value), limit) + hint)


def too_large_message(key: str, size: int, limit: int) -> str:
    """Say which value is too large, by how much, and which option raises the limit."""
    return (
        f"value for {key!r} is {size} bytes; the store's limit is {limit}"
        " (the max_value_size option)"
    )


def copies_per_owner(base: str, owner_of: Callable[[str], Owner], owners: int) -> dict[Owner, str]:
    """Map each owner to a key it owns: ``base`` for its own, else ``base~n`` for the
    smallest such n (see :class:`~mcache.contract.store.Colocating`).

    Tries :data:`COPY_SEARCH_PER_OWNER` suffixes per owner at most, none making a key
    too long; an owner not found so gets no copy, and readers near it use ``base``."""
    copies = {owner_of(base): base}
    limit = COPY_SEARCH_PER_OWNER * owners
    if len(base) + len(str(limit)) + 1 <= MAX_KEY_BYTES:
        for n in range(1, limit + 1):
            if len(copies) == owners:
                break
            candidate = f"{base}~{n}"
            copies.setdefault(owner_of(candidate), candidate)
    return copies
