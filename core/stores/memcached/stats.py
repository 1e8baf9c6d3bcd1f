"""Memcached's ``stats``, ``stats slabs`` and ``stats items`` as plain mappings.

pymemcache returns flat dicts with byte keys (``b"items:1:number"``); the stats report wants
text keys and one mapping per slab class, to draw the slab memory chart from directly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcache.model.ring import Server

__all__ = ["parse_detail", "stats_report"]

Fields = dict[str, int | float | str]


def plain(value: object) -> int | float | str:
    """Return a stats value as an int, float or str."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | str):
        return value
    text = value.decode(errors="replace") if isinstance(value, bytes) else str(value)
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text


def parse_detail(raw: Mapping[object, object], kind: str) -> dict:
    """Turn pymemcache's flat stats into text keys, nested by slab class for slabs/items."""
    flat = {(k.decode() if isinstance(k, bytes) else str(k)): plain(v) for k, v in raw.items()}
    if kind == "":
        return flat
    nested: dict[str, Fields] = {}
    for name, value in flat.items():
        parts = name.split(":")  # slabs: "1:chunk_size", items: "items:1:number"
        if len(parts) == (3 if kind == "items" else 2):
            nested.setdefault(parts[-2], {})[parts[-1]] = value
        else:
            nested.setdefault("total", {})[name] = value
    return nested


def stats_report(raw: Mapping[Server, object]) -> dict[str, dict[str, int | float | str]]:
    """Each server's ``stats`` with text keys, keyed by ``host:port`` (the blocking store's
    and its async twin's)."""
    return {
        server.name: parse_detail(stats, "") if isinstance(stats, dict) else stats  # type: ignore[misc]
        for server, stats in raw.items()
    }
