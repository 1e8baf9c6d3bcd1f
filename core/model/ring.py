"""Server selection for a pool of memcached servers.

Memcached servers do not know about each other: the client decides which server
owns a key, the way other clients sharing the pool do (libketama's continuum, or
the classic clients' CRC modulo). See "Placement" in docs/how-to/clusters.md.
"""

from __future__ import annotations

import bisect
import hashlib
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from mcache.errors import ConfigError

__all__ = ["KetamaRing", "ModuloRing", "Ring", "Server", "classic_hash", "make_ring"]


@dataclass(frozen=True)
class Server:
    """One memcached server of a pool."""

    host: str
    port: int = 11211
    weight: int = 1

    @property
    def name(self) -> str:
        """Return ``host:port``, the server's identity on the continuum."""
        return f"{self.host}:{self.port}"


class Ring:
    """Maps keys to servers."""

    servers: tuple[Server, ...]

    def server_for(self, key: str) -> Server:
        """Return the server that owns ``key``."""
        raise NotImplementedError

    def iter_servers(self, key: str) -> Iterator[Server]:
        """Yield every server once, the owner of ``key`` first, then its successors."""
        raise NotImplementedError

    def owning_servers(self) -> set[Server]:
        """Return the servers that own some keys (a tiny weight may own none)."""
        return set(self.servers)


LIBKETAMA_POINTS = 160
"""Points per server (of average weight) in libketama: 40 md5 digests × 4."""


class KetamaRing(Ring):
    """The libketama continuum with weights.

    ``points`` per server of average weight: libketama's 160 keeps the pool
    shareable with other ketama clients but spreads keys unevenly (one of four
    servers may get 15% more); 4000 bring that within ±3%, at that price.
    """

    def __init__(self, servers: Sequence[Server], points: int = LIBKETAMA_POINTS) -> None:
        if not isinstance(points, int) or points < 4 or points % 4:
            raise ConfigError(f"ketama_points must be a multiple of 4, >= 4; got {points!r}")
        self.servers = _checked(servers)
        self.points = points
        total = sum(s.weight for s in self.servers)
        points_list: list[tuple[int, int]] = []
        for index, server in enumerate(self.servers):
            repeats = int(server.weight / total * (points // 4) * len(self.servers))
            for k in range(repeats):
                digest = hashlib.md5(f"{server.name}-{k}".encode()).digest()
                for h in range(4):
                    point = int.from_bytes(digest[h * 4 : h * 4 + 4], "little")
                    points_list.append((point, index))
        points_list.sort()
        self._hashes = [p[0] for p in points_list]
        self._owners = [p[1] for p in points_list]

    def _position(self, key: str) -> int:
        point = int.from_bytes(hashlib.md5(key.encode()).digest()[:4], "little")
        position = bisect.bisect_left(self._hashes, point)
        return 0 if position == len(self._hashes) else position

    def server_for(self, key: str) -> Server:
        """Return the server that owns ``key``."""
        return self.servers[self._owners[self._position(key)]]

    def owning_servers(self) -> set[Server]:
        """Return the servers with at least one point on the continuum."""
        return {self.servers[index] for index in set(self._owners)}

    def iter_servers(self, key: str) -> Iterator[Server]:
        """Yield every server once, walking the continuum clockwise from ``key``."""
        seen: set[int] = set()
        start = self._position(key)
        total = len(self._owners)
        for step in range(total):
            owner = self._owners[(start + step) % total]
            if owner not in seen:
                seen.add(owner)
                yield self.servers[owner]
                if len(seen) == len(self.servers):
                    return


class ModuloRing(Ring):
    """The classic clients' modulo: ``(crc32(key) >> 16) & 0x7fff`` over weighted slots.

    python-memcached, PHP's memcache and libmemcached's CRC hash pick a server so
    (not ``crc32 % n``), each server repeated ``weight`` times in pool order. When
    it is down, the next tried are python-memcached's retries, then the rest.
    """

    RETRIES = 10
    """python-memcached's ``_SERVER_RETRIES``: its failover gives up after as many."""

    def __init__(self, servers: Sequence[Server]) -> None:
        self.servers = _checked(servers)
        self._slots = [i for i, s in enumerate(self.servers) for _ in range(s.weight)]

    def server_for(self, key: str) -> Server:
        """Return the server that owns ``key``."""
        return self.servers[self._slots[classic_hash(key.encode()) % len(self._slots)]]

    def iter_servers(self, key: str) -> Iterator[Server]:
        """Yield the owner of ``key`` first, then python-memcached's retries, then the rest."""
        seen: set[int] = set()
        hashed = classic_hash(key.encode())
        for attempt in range(self.RETRIES):
            index = self._slots[hashed % len(self._slots)]
            if index not in seen:
                seen.add(index)
                yield self.servers[index]
            hashed = classic_hash(f"{hashed}{attempt}".encode("ascii"))
        for index in range(len(self.servers)):
            if index not in seen:
                yield self.servers[index]


def classic_hash(key: bytes) -> int:
    """Return the classic clients' server hash of ``key``: the top half of its crc32,
    15 bits (python-memcached's ``cmemcache_hash``, libmemcached's ``MEMCACHED_HASH_CRC``)."""
    return ((zlib.crc32(key) & 0xFFFFFFFF) >> 16) & 0x7FFF


def _checked(servers: Sequence[Server]) -> tuple[Server, ...]:
    servers = tuple(servers)
    if not servers:
        raise ConfigError("a memcached pool needs at least one server, e.g. 127.0.0.1:11211")
    for server in servers:
        if not isinstance(server.weight, int) or server.weight <= 0:
            raise ConfigError(
                f"server {server.name}: weight must be a whole number > 0, got {server.weight!r}"
            )
    names = [s.name for s in servers]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ConfigError(f"server listed twice in the pool: {', '.join(duplicates)}")
    return servers


def make_ring(
    servers: Sequence[Server], hashing: str = "ketama", ketama_points: int = LIBKETAMA_POINTS
) -> Ring:
    """Build the ring named by ``hashing`` (``"ketama"`` or ``"modulo"``)."""
    if hashing == "ketama":
        return KetamaRing(servers, ketama_points)
    if hashing == "modulo":
        return ModuloRing(servers)
    raise ConfigError(f"hashing must be 'ketama' or 'modulo', got {hashing!r}")
