"""Small pieces every store shares."""

from __future__ import annotations

__all__ = ["MiB", "check_delta", "stored_count", "too_large_message"]

MiB = 1024 * 1024


def stored_count(data: object) -> int | None:
    """Read a counter as a store holds it: decimal digits, which memcached's ``decr``
    may pad with trailing spaces (``b"9 "``); anything else (a miss, foreign bytes) is None.
    """
    if isinstance(data, bytes):
        digits = data.rstrip(b" ")
        if digits.isdigit():
            return int(digits)
    return None


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
