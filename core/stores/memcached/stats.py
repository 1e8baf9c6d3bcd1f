"""Memcached's ``stats``, ``stats slabs`` and ``stats items`` as plain mappings.

pymemcache returns flat dicts with byte keys (``b"1:chunk_size"``,
``b"items:1:number"``); the stats report wants text keys and one mapping per
slab class, so the slab memory chart can be drawn from it directly.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["parse_detail"]

Fields = dict[str, int | float | str]


def plain(value: object) -> int | float | str:
    """Return a stats value as an int, float or str."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float | str):
        return value
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    text = str(value)
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def parse_detail(raw: Mapping[object, object], kind: str) -> dict:
    """Turn pymemcache's flat stats into text keys, nested by slab class for slabs/items."""
    flat = {(k.decode() if isinstance(k, bytes) else str(k)): plain(v) for k, v in raw.items()}
    if kind == "":
        return flat
    nested: dict[str, Fields] = {}
    for name, value in flat.items():
        parts = name.split(":")
        if kind == "items" and len(parts) == 3:
            nested.setdefault(parts[1], {})[parts[2]] = value
        elif kind == "slabs" and len(parts) == 2:
            nested.setdefault(parts[0], {})[parts[1]] = value
        else:
            nested.setdefault("total", {})[name] = value
    return nested
