"""``--top N``: a cache's entries most recently read, from memcached's own item dump.

memcached keeps no per-key read count, so "hot" is what its LRU crawler can tell: read
since written, then most recently accessed (:data:`RANKING`). Only this cache's entries
are listed, never its tag, lock or counter records (see docs/how-to/stats.md).
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from mcache.admin.report import table as aligned
from mcache.cache import Cache

__all__ = ["hot_keys", "render_hot_keys"]

RANKING = (
    "ranked by read since written, then by last access (memcached's lru_crawler metadump;"
    " it counts no reads per key, and updates an item's access time at most once a minute)"
)


def hot_keys(cache: Cache, top: int) -> list[dict[str, Any]]:
    """Return the ``top`` entries most recently read, across the cache's memcached servers.

    Raises ``ValueError`` naming what to do on a store that cannot dump its items.
    """
    if not cache.shared.traits.server_detail:
        raise ValueError(
            f"--top needs a memcached store (its lru_crawler metadump); this cache uses"
            f" {cache.shared!r}. On Redis, redis-cli --hotkeys lists hot keys under an LFU"
            " maxmemory-policy"
        )
    entry = re.compile(
        (re.escape(cache.namespace) + ":" if cache.namespace else "") + r"(?:[^:]*:)?[0-9a-f]{32}$"
    )
    origin, now = cache.counts.origin, time.time()
    rows = []
    for server, items in cache.shared.metadump().items():  # type: ignore[attr-defined]
        if isinstance(items, str):
            raise ValueError(f"--top: {items}")
        for item in items:
            key = item.get("key", "")
            if not entry.match(key):
                continue
            rows.append(_row(server, key, item, origin.readable(key), origin.family(key), now))
    rows.sort(key=lambda row: (row["read"], -row["idle_s"]), reverse=True)
    return rows[:top]


def _row(
    server: str, key: str, item: Mapping[str, str], readable: str, family: str, now: float
) -> dict[str, Any]:
    expires = int(item.get("exp", "-1"))
    return {
        "key": key,
        "readable": readable,
        "family": family,
        "server": server,
        "read": item.get("fetch") == "yes",
        "idle_s": max(0, int(now) - int(item.get("la", "0"))),
        "expires_in_s": None if expires < 0 else max(0, expires - int(now)),
        "size": int(item.get("size", "0")),
    }


def render_hot_keys(rows: list[dict[str, Any]]) -> str:
    """Return the rows as a table, with how they were ranked."""
    if not rows:
        return f"no entries of this cache on its servers ({RANKING})"
    header = ["key", "family", "read", "last access", "expires in", "bytes", "server"]
    rows_text = [
        [
            row["readable"] or row["key"],
            row["family"],
            "yes" if row["read"] else "no",
            f"{row['idle_s']} s ago",
            "never" if row["expires_in_s"] is None else f"{row['expires_in_s']} s",
            f"{row['size']:,}",
            row["server"],
        ]
        for row in rows
    ]
    return "\n".join([*aligned(header, rows_text), "", RANKING])
