"""One memcached server as the store sees it: idle connections and health.

A server that refuses or times out ``retry_attempts`` times in a row is marked dead for
``dead_timeout`` seconds, its keys served by the next server on the ring meanwhile. Then one
caller probes it; it rejoins flushed first (``flush_on_rejoin``), as the copies it still
holds may be older than those rewritten on its stand-in, unless it restarted empty.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from pymemcache.client.base import Client
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheError,
    MemcacheIllegalInputError,
    MemcacheServerError,
    MemcacheUnexpectedCloseError,
)

from mcache.clock import Clock, system_clock
from mcache.errors import ConfigError, InvalidKey, NotNumeric, StoreUnavailable, ValueTooLarge
from mcache.logs import FailureLog
from mcache.model.ring import Server
from mcache.stores.memcached.access import Access, NodeClient
from mcache.wording import counted

__all__ = ["Node", "NodeDown", "NodeOptions"]

T = TypeVar("T")
_CONNECTION_ERRORS = (OSError, MemcacheUnexpectedCloseError)


class NodeDown(StoreUnavailable):
    """A server did not answer; the caller may fail over to the next one."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeOptions:
    """Connection and failover settings shared by every node of a store, checked at start-up."""

    connect_timeout: float
    timeout: float
    max_pool_size: int
    retry_attempts: int
    dead_timeout: float
    flush_on_rejoin: bool
    failures: FailureLog
    access: Access = field(default_factory=Access)
    clock: Clock = system_clock
    """What ``dead_timeout`` is counted on (a simulation's clock moves it)."""

    def __post_init__(self) -> None:
        if self.connect_timeout <= 0 or self.timeout <= 0:
            raise ConfigError("memcached: connect_timeout and timeout must be > 0 seconds")
        for name, least in (("max_pool_size", 1), ("retry_attempts", 1), ("dead_timeout", 0)):
            value = getattr(self, name)
            if value < least:
                raise ConfigError(f"memcached: {name} must be >= {least}, got {value!r}")


class Node:
    """A server's idle clients (a lock-free ``deque``) and its health."""

    def __init__(
        self, server: Server, options: NodeOptions, on_health: Callable[[Node], int]
    ) -> None:
        """``on_health(node)`` is told of each change and answers how many servers are up."""
        self.server = server
        self.options = options
        self.idle: deque[Client] = deque()
        self.failures = 0
        self.dead_until = 0.0
        self._on_health = on_health
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<Node {self.server.name} {'dead' if self.dead_until else 'alive'}>"

    def _new_client(self) -> Client:
        options = self.options
        address = (self.server.host, self.server.port)
        return NodeClient(address, options.connect_timeout, options.timeout, options.access)

    def take(self) -> Client:
        """Return an idle client of this server, or a new one."""
        try:
            return self.idle.pop()
        except IndexError:
            return self._new_client()

    def answered(self) -> None:
        """Note that a call just succeeded: failures count in a row."""
        if self.failures:
            self.failures = 0

    def give_back(self, client: Client) -> None:
        """Return a client that just succeeded to the idle pool."""
        self.answered()
        if len(self.idle) < self.options.max_pool_size:
            self.idle.append(client)
        else:
            client.close()

    def broken(self, client: Client, error: Exception, key: str = "") -> Exception:
        """Close a client whose call failed; return the error to raise in its place."""
        client.close()
        return self.failure(error, key)

    def failure(self, error: Exception, key: str = "") -> Exception:
        """Return the error to raise for a call that failed, counting a lost connection:
        the blocking clients' and the asyncio connections' alike."""
        message = f"memcached {self.server.name}: {type(error).__name__}: {error}"
        if isinstance(error, _CONNECTION_ERRORS):
            self._failed(error)
            return NodeDown(message)
        # Anything else leaves the connection in an unknown state: it is closed, and the
        # caller sees a store failure, never a driver's ValueError.
        return _translate(error, self.server, key) or StoreUnavailable(message)

    def run(self, call: Callable[[Client], T], key: str = "") -> T:
        """Run ``call`` on a client of this server, translating driver errors."""
        client = self.take()
        try:
            result = call(client)
        except Exception as error:
            raise self.broken(client, error, key) from error
        self.give_back(client)
        return result

    def _failed(self, error: BaseException) -> None:
        with self._lock:
            self.failures += 1
            if self.failures < self.options.retry_attempts or self.dead_until:
                return
            self.dead_until = self.options.clock.monotonic() + self.options.dead_timeout
            # Before anything slow: until the store knows, its fast path keeps routing
            # here, and a call can burn every attempt on this server in that window.
            servers_up = self._on_health(self)
        self.close()
        self.options.failures.warning(
            f"memcached.dead.{self.server.name}",
            "memcached %s marked dead for %.1fs after %s (%s); %s",
            self.server.name,
            self.options.dead_timeout,
            counted(self.failures, "failure"),
            error,
            "its keys go to the next server up until it answers again"
            if servers_up
            else "no server of the pool is up: reads miss and writes are dropped, so"
            " every request builds its page from the backend, until a server answers again",
        )

    def usable(self) -> bool:
        """Return whether calls may go to this server now, probing it once it is due."""
        if not self.dead_until:
            return True
        if self.options.clock.monotonic() < self.dead_until or not self._lock.acquire(
            blocking=False
        ):
            return False
        try:
            return self._probe()
        finally:
            self._lock.release()

    def _probe(self) -> bool:
        client = self._new_client()
        away = self.options.clock.monotonic() - (self.dead_until - self.options.dead_timeout)
        try:
            uptime = int(client.stats().get(b"uptime", 0))
            # A server that restarted while away is empty: nothing old to flush.
            if self.options.flush_on_rejoin and uptime >= away:
                client.flush_all(noreply=False)
        except (*_CONNECTION_ERRORS, MemcacheError):
            self.dead_until = self.options.clock.monotonic() + self.options.dead_timeout
            return False
        finally:
            client.close()
        # An idle connection may still point at the old process, and failing would mark the
        # rejoined server dead again: it rejoins with fresh ones.
        self.close()
        self.failures = 0
        self.dead_until = 0.0
        self.options.failures.warning(
            f"memcached.rejoin.{self.server.name}",
            "memcached %s answers again and rejoins the pool%s",
            self.server.name,
            " (flushed first)" if self.options.flush_on_rejoin else "",
        )
        self._on_health(self)
        return True

    def close(self) -> None:
        """Close idle connections."""
        with contextlib.suppress(IndexError):  # another thread took the last one
            while True:
                self.idle.pop().close()


def _translate(error: Exception, server: Server, key: str) -> Exception | None:
    if isinstance(error, MemcacheIllegalInputError):
        return InvalidKey(f"memcached refused key {key!r}: {error}")
    if isinstance(error, MemcacheClientError) and "non-numeric" in str(error):
        return NotNumeric(f"cannot incr/decr {key!r}: its value is not a decimal integer")
    if isinstance(error, MemcacheServerError) and "too large" in str(error):
        return ValueTooLarge(f"memcached {server.name} refused {key!r}: {error}")
    return None
