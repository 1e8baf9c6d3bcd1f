"""Differential runs: a simulated history's server operations replayed on a real server.

The simulated memcached must answer as a real one would: each operation a run applied
is sent, in the same order and with the same bytes, to a real memcached or Redis through
its mcache store, and the answers are compared. Cas tokens differ between servers, so
each real token stands in for the simulated one it answers to. Answers are compared up
to the first moment anything of the history could have expired (the real servers live
on real time, the simulated one on virtual time); positive TTLs are sent as an hour.

One difference is the stores' own, and kept: Redis's ``cas`` compares the value's content
(its sha1), memcached's a version. After a rewrite with the same bytes (a lock's owner
renewing its own token) a ``cas`` with the older token fails on memcached and passes on
Redis; such a ``cas`` is not sent, so the two servers stay alike, and is counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcache.contract.store import NO_VALUE, Store
from tests.sim.simulation import Result

HOUR = 3600


@dataclass
class Mismatch:
    """An operation the real server answered otherwise."""

    at: float
    method: str
    simulated: Any
    real: Any

    def __str__(self) -> str:
        return f"{self.method} at {self.at:.4f}: simulated {self.simulated!r}, real {self.real!r}"


def horizon(result: Result) -> float:
    """The first virtual time at which an item written in the history could expire."""
    first = float("inf")
    for at, method, args, _, _ in result.history.applied:
        ttl = _ttl(method, args)
        if ttl is not None and ttl > 0:
            first = min(first, int(at) + ttl - 1)
    return first


def _ttl(method: str, args: tuple[Any, ...]) -> int | None:
    if method in ("set", "add") and len(args) >= 3:
        return int(args[2])
    if method == "cas" and len(args) >= 4:
        return int(args[3])
    if method == "touch":
        return int(args[1])
    return None


def replay(result: Result, store: Store) -> tuple[list[Mismatch], int]:
    """Send the history's operations to ``store`` (flushed first); return what differs, and
    how many ``cas`` were left out as the content-compared kind (see the module)."""
    store.flush()
    tokens: dict[Any, Any] = {}
    until = horizon(result)
    mismatches = []
    by_content = 0
    for at, method, args, simulated, raised in result.history.applied:
        if at >= until:
            break
        if raised:
            continue
        if method == "cas" and simulated is False and _same_content(store, args, tokens):
            by_content += 1
            continue
        real = _send(store, method, args, tokens)
        if method == "gets":
            if simulated[1] is not None and real[1] is not None:
                tokens[simulated[1]] = real[1]
            simulated, real = simulated[0], real[0]
        elif method == "get_many_expiring":
            simulated = {key: value for key, (value, _) in simulated.items()}
            real = {key: value for key, (value, _) in real.items()}
        if simulated != real:
            mismatches.append(Mismatch(at, method, simulated, real))
    return mismatches, by_content


def _same_content(store: Store, args: tuple[Any, ...], tokens: dict[Any, Any]) -> bool:
    """Whether ``store`` compares a ``cas`` by content and the key holds what the token
    was read from (a rewrite with the same bytes since)."""
    token = tokens.get(args[2])
    if not isinstance(token, str):
        return False
    value, now = store.gets(args[0])
    return value is not NO_VALUE and now == token


def _send(store: Store, method: str, args: tuple[Any, ...], tokens: dict[Any, Any]) -> Any:
    args = list(args)
    ttl_at = {"set": 2, "add": 2, "cas": 3, "touch": 1}.get(method)
    if ttl_at is not None and ttl_at < len(args) and int(args[ttl_at]) > 0:
        args[ttl_at] = HOUR
    if method == "cas":
        args[2] = tokens.get(args[2], -1)
    if method == "get_many_expiring" and not store.traits.tells_time_left:
        return {key: (value, None) for key, value in store.get_many(args[0]).items()}
    return getattr(store, method)(*args)
