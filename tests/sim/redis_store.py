"""The real Redis store on a simulated Redis: redis-py's client, pool and parser, a socket
that leads to :class:`~tests.sim.redis.SimRedisServer`.

Each process of a run has a store of its own, with its own client and connections, as real
processes do; every store call is performed whole when the network delivers it to the
server (:meth:`tests.sim.servers.Network.deliver`), so its commands reach the server as one
round trip does.
"""

from __future__ import annotations

from typing import Any

import redis
from redis._parsers import _RESP2Parser

from mcache.stores.redis.store import RedisStore
from tests.sim.memcached import SimSocket
from tests.sim.redis import SimRedisServer


class SimRedisSocket(SimSocket):
    """A connection to the simulated Redis: the simulated memcached's socket (what is sent
    is answered at once, the reply waits to be received), with what redis-py's parser and
    connection also ask of a socket."""

    def recv(self, size: int, flags: int = 0) -> bytes:
        if flags:  # MSG_PEEK: look without taking
            if not self.replies:
                raise TimeoutError("timed out")
            return self.replies[:size]
        return super().recv(size)

    def recv_into(self, buffer: Any, size: int = 0) -> int:
        chunk = self.recv(size or len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)

    def shutdown(self, how: int) -> None:
        pass


class SimRedisConnection(redis.Connection):
    """redis-py's connection, its socket the simulated server's."""

    sim_server: SimRedisServer

    def _connect(self) -> Any:
        return SimRedisSocket(self.sim_server)  # type: ignore[arg-type]  # it answers RESP


def sim_redis_store(server: SimRedisServer, replica: SimRedisServer | None = None) -> RedisStore:
    """A Redis store of one process, on ``server`` (its plain reads on ``replica``, if one
    is given, as a Sentinel store's with ``replica_reads``)."""
    return RedisStore(
        f"redis://{server.name}:6379/0",
        client=sim_client(server),
        replica=None if replica is None else sim_client(replica),
    )


def sim_client(server: SimRedisServer) -> redis.Redis:
    """A redis-py client of ``server``, with the pure-Python RESP parser (hiredis's polls
    the socket's file descriptor, which a simulated socket has none of)."""
    connection = type("Connection", (SimRedisConnection,), {"sim_server": server})
    pool = redis.ConnectionPool(
        connection_class=connection,
        parser_class=_RESP2Parser,
        protocol=2,
        host=server.name,
        port=6379,
    )
    return redis.Redis(connection_pool=pool)
