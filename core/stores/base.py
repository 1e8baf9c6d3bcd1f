"""Small pieces every store shares."""

from __future__ import annotations

import re

__all__ = ["MiB", "check_delta", "counted", "stored_count", "too_large_message"]

MiB = 1024 * 1024
_U64 = 2**64
_DECIMAL = re.compile(rb"[0-9]{1,20}")


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


def too_large_message(key: str, size: int, limit: int) -> str:
    """Say which value is too large, by how much, and which option raises the limit."""
    return (
        f"value for {key!r} is {size} bytes; the store's limit is {limit}"
        " (the max_value_size option)"
    )
