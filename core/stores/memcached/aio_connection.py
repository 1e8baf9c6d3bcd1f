"""memcached's text protocol on an event loop: one connection, and a bounded pool per server.

No asyncio client keeps the blocking store's ketama ring, replicas and failover (emcache
routes by rendezvous hashing; aiomcache has one server and no pipelining), so the async twin
routes with the blocking store's own steps (:mod:`mcache.stores.memcached.steps`) and only
the wire is asyncio's, fed to the blocking reader's parsers (:mod:`mcache.stores.memcached.wire`).
Each command returns and raises what pymemcache's method of that name does, so the node's
error translation is one function. ``python -m tests.benchmarks memcached_async`` measures
it against emcache.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcache.stores.memcached import meta
from mcache.stores.memcached.access import auth_request, check_auth_reply
from mcache.stores.memcached.wire import (
    ProtocolError,
    parse_lines,
    parse_stats,
    parse_values,
    replied_error,
)

if TYPE_CHECKING:
    from mcache.model.ring import Server
    from mcache.stores.memcached.node import NodeOptions

__all__ = ["AioConnection", "AioPool"]

Parser = Callable[[bytes], "tuple[object, int] | int"]
_PARSE_WITH_CAS = functools.partial(parse_values, with_cas=True)


class AioConnection(asyncio.Protocol):
    """One connection to a server, one request at a time (the pool sees to that)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.transport: asyncio.Transport | None = None
        self._buf = b""
        self._need = 0
        self._parse: Parser | None = None
        self._waiter: asyncio.Future[Any] | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        waiter = self._waiter
        if waiter is None or waiter.done() or len(self._buf) < self._need:
            return
        try:
            parsed = self._parse(self._buf)  # type: ignore[misc]
            if type(parsed) is int:
                self._need = parsed
                return
            reply, end = parsed  # type: ignore[misc]
            if end != len(self._buf):
                raise ProtocolError("bytes after the reply")
        except Exception as error:
            waiter.set_exception(error)
            return
        self._buf = b""
        waiter.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_exception(
                ConnectionResetError(f"memcached closed the connection: {exc or 'EOF'}")
            )

    # -- requests -----------------------------------------------------------------------------

    @property
    def usable(self) -> bool:
        return self.transport is not None and not self.transport.is_closing()

    async def request(self, data: bytes, parse: Parser) -> Any:
        """Send ``data``, return its parsed reply; a late reply aborts the connection."""
        if self.transport is None:
            raise ConnectionResetError("memcached connection is closed")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        self._parse, self._need, self._buf = parse, 0, b""
        self.transport.write(data)
        timer = loop.call_later(self.timeout, self._timed_out, waiter)
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _timed_out(self, waiter: asyncio.Future[Any]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError(f"no reply from memcached in {self.timeout}s"))
        self.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()
            self.transport = None

    # -- commands: pymemcache's names, arguments and answers -----------------------------------

    async def authenticate(self, request: bytes) -> None:
        """Send the user and password (``memcached -Y``); raise unless let in (as the blocking
        client does: :func:`~mcache.stores.memcached.access.check_auth_reply`)."""
        (line,) = await self._lines(request, 1)
        check_auth_reply(line)

    async def get_many(self, keys: list[str]) -> dict[str, bytes]:
        return await self.request(b"get " + " ".join(keys).encode() + b"\r\n", parse_values)  # type: ignore[no-any-return]

    async def leased_get(
        self, request: bytes, beside: list[str]
    ) -> tuple[meta.MetaReply, dict[str, bytes]]:
        if not beside:  # else ``request`` ends with a get of them
            return await self.request(request, meta.parse_reply), {}
        return await self.request(request, meta.parse_reply_and_values)  # type: ignore[no-any-return]

    async def meta(self, requests: list[bytes]) -> list[meta.MetaReply]:
        count = len(requests)
        return await self.request(b"".join(requests), lambda buf: meta.parse_replies(buf, count))  # type: ignore[no-any-return]

    async def gets(self, key: str) -> tuple[bytes | None, bytes | None]:
        found = await self.request(b"gets %s\r\n" % key.encode(), _PARSE_WITH_CAS)
        return found.get(key, (None, None))  # type: ignore[no-any-return]

    async def set(self, key: str, value: bytes, expire: int = 0) -> bool:
        return await self._stored(_storage(b"set", key, value, expire)) == b"STORED"

    async def set_many(self, values: Mapping[str, bytes], expire: int = 0) -> list[str]:
        lines = await self._lines(
            b"".join(_storage(b"set", k, v, expire) for k, v in values.items()), len(values)
        )
        return [key for key, line in zip(values, lines, strict=True) if line != b"STORED"]

    async def add(self, key: str, value: bytes, expire: int = 0) -> bool:
        return await self._stored(_storage(b"add", key, value, expire)) == b"STORED"

    async def append(self, key: str, value: bytes) -> bool:
        return await self._stored(_storage(b"append", key, value, 0)) == b"STORED"

    async def prepend(self, key: str, value: bytes) -> bool:
        return await self._stored(_storage(b"prepend", key, value, 0)) == b"STORED"

    async def replace(self, key: str, value: bytes, expire: int = 0) -> bool:
        return await self._stored(_storage(b"replace", key, value, expire)) == b"STORED"

    async def cas(self, key: str, value: bytes, cas: bytes, expire: int = 0) -> bool | None:
        line = await self._stored(_storage(b"cas", key, value, expire, b" " + cas))
        return {b"STORED": True, b"EXISTS": False}.get(line)

    async def incr(self, key: str, value: int) -> int | None:
        return await self._counted(b"incr", key, value)

    async def decr(self, key: str, value: int) -> int | None:
        return await self._counted(b"decr", key, value)

    async def incr_many(self, keys: list[str], deltas: Mapping[str, int]) -> list[int | None]:
        data = b"".join(b"incr %s %d\r\n" % (key.encode(), deltas[key]) for key in keys)
        return [_number(line) for line in await self._lines(data, len(keys))]

    async def delete(self, key: str) -> bool:
        return await self._stored(b"delete %s\r\n" % key.encode()) == b"DELETED"

    async def delete_many(self, keys: list[str]) -> bool:
        for line in await self._lines(
            b"".join(b"delete %s\r\n" % k.encode() for k in keys), len(keys)
        ):
            _raise_error(line)
        return True

    async def touch(self, key: str, expire: int) -> bool:
        return await self._stored(b"touch %s %d\r\n" % (key.encode(), expire)) == b"TOUCHED"

    async def flush_all(self) -> bool:
        return await self._stored(b"flush_all\r\n") == b"OK"

    async def stats(self, *kind: str) -> dict[bytes, bytes]:
        command = b" ".join([b"stats", *(k.encode() for k in kind)]) + b"\r\n"
        return await self.request(command, parse_stats)  # type: ignore[no-any-return]

    async def _counted(self, verb: bytes, key: str, value: int) -> int | None:
        return _number((await self._lines(b"%s %s %d\r\n" % (verb, key.encode(), value), 1))[0])

    async def _lines(self, data: bytes, count: int) -> list[bytes]:
        return await self.request(data, lambda buf: parse_lines(buf, count))  # type: ignore[no-any-return]

    async def _stored(self, data: bytes) -> bytes:
        line = (await self._lines(data, 1))[0]
        _raise_error(line)
        return line


class AioPool:
    """A server's connections on one event loop: at most ``size`` open, idle ones reused; a
    caller beyond ``size`` waits for one to come back, so a burst never opens more."""

    def __init__(self, server: Server, options: NodeOptions) -> None:
        self.host, self.port = server.host, server.port
        self.connect_timeout, self.timeout = options.connect_timeout, options.timeout
        self.access = options.access
        self.idle: list[AioConnection] = []
        self.slots = asyncio.Semaphore(options.max_pool_size)

    async def run(self, command: str, args: tuple[Any, ...]) -> Any:
        """Run ``command(*args)`` on a connection; one that failed or was cancelled is dropped."""
        await self.slots.acquire()
        try:
            connection = self.idle.pop() if self.idle else await self._connect()
            try:
                result = await getattr(connection, command)(*args)
            except BaseException:
                connection.close()
                raise
            if connection.usable:
                self.idle.append(connection)
            return result
        finally:
            self.slots.release()

    async def _connect(self) -> AioConnection:
        loop = asyncio.get_running_loop()
        tls = self.access.tls
        _transport, connection = await asyncio.wait_for(
            loop.create_connection(
                lambda: AioConnection(self.timeout),
                self.host,
                self.port,
                ssl=tls,
                server_hostname=self.host if tls is not None else None,
            ),
            self.connect_timeout,
        )
        if self.access.credentials is not None:
            try:
                await connection.authenticate(auth_request(self.access.credentials))
            except BaseException:
                connection.close()
                raise
        return connection

    def close(self) -> None:
        """Close the idle connections (those in use close when their call ends)."""
        while self.idle:
            self.idle.pop().close()


def _storage(verb: bytes, key: str, value: bytes, expire: int, extra: bytes = b"") -> bytes:
    return b"%s %s 0 %d %d%s\r\n%s\r\n" % (verb, key.encode(), expire, len(value), extra, value)


def _raise_error(line: bytes) -> None:
    error = replied_error(line)
    if error is not None:
        raise error


def _number(line: bytes) -> int | None:
    if line == b"NOT_FOUND":
        return None
    _raise_error(line)
    return int(line)
