"""Bounded memos: a dict that forgets everything at once when it is full.

The core remembers many small derivations (a key's store key, a key's owner, a tag's
key, a key's family) that are cheap to derive again and looked up on every call. A
memo that empties itself at its limit needs no bookkeeping on a hit (its ``get`` is
the dict's own) and bounds the memory a stream of distinct keys can take; an LRU would
pay on every hit to keep an order these memos do not need.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["PER_KEY_LIMIT", "BoundedMemo"]

K = TypeVar("K")
V = TypeVar("V")

PER_KEY_LIMIT = 65536
"""Keys a per-key memo (when a key goes stale, who holds it…) keeps: a hot set fits, and a
stream of distinct keys costs at most a few megabytes."""


class BoundedMemo(dict[K, V]):
    """A dict of at most ``limit`` entries: remembering one more first forgets them all."""

    __slots__ = ("limit",)

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def remember(self, key: K, value: V) -> V:
        """Keep ``value`` for ``key`` (emptying the memo first when it is full); return it."""
        if len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value
