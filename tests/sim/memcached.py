"""A simulated memcached 1.6 that speaks the protocol: bytes in, bytes out.

The real store's own code talks to it: pymemcache's client and the store's wire and meta
modules write their requests to a socket (:class:`SimSocket`) whose peer is this server,
and parse its replies, so what the simulation checks is the store as it runs, down to the
bytes. What it answers is what a real memcached 1.6 answers (``test_protocol_fidelity``
replays the same bytes on both): the text commands the store sends, and the meta commands
with their leases (``N`` vivify, ``R`` recache, ``W``/``Z``/``X``, ``md … I``, ``ms … C``,
``ma … N J``). Expiry counts whole seconds of the server's own clock; a value whose
exptime is over 30 days is a Unix time. No LRU: the simulation evicts what it aims at.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from tests.sim.memcached_commands import answer_one

THIRTY_DAYS = 30 * 24 * 3600
MAX_COUNTER = 1 << 64


@dataclass
class Item:
    value: bytes
    exptime: int
    """When it expires, in the server's whole seconds (0: never)."""
    cas: int
    flags: int = 0
    stale: bool = False
    """Marked stale by ``md … I``: its value is the old one, and its rebuild is leased."""
    token_sent: bool = False
    """A reader was handed the win (``W``): the others are told ``Z``."""


class SimMemcachedServer:
    """One memcached server: items, a whole-second clock, and the protocol's commands."""

    def __init__(self, now: Callable[[], float], name: str = "sim") -> None:
        """``now()``: the server's wall clock, in seconds since 1970."""
        self.now = now
        self.name = name
        self.items: dict[str, Item] = {}
        self.started = math.floor(now())
        self.last_cas = 0
        self.counts = {b"get_hits": 0, b"get_misses": 0}
        self.flushed: Callable[[], None] = lambda: None
        """Told of each ``flush_all`` a client sends."""

    # -- time and items ---------------------------------------------------------------------

    def current(self) -> int:
        """The server's whole-second clock, as its items' exptimes count it."""
        return math.floor(self.now())

    def realtime(self, exptime: int) -> int:
        """An exptime as a request gives it, as the server keeps it."""
        if exptime == 0:
            return 0
        if exptime < 0:
            return self.current() - 1  # already expired
        if exptime > THIRTY_DAYS:
            return exptime if exptime > self.started else self.current() - 1
        return self.current() + exptime

    def live(self, key: str) -> Item | None:
        item = self.items.get(key)
        if item is not None and item.exptime and item.exptime <= self.current():
            del self.items[key]
            return None
        return item

    def store(self, key: str, value: bytes, exptime: int, flags: int = 0) -> Item:
        self.last_cas += 1
        item = self.items[key] = Item(value, self.realtime(exptime), self.last_cas, flags)
        if item.exptime and item.exptime <= self.current():
            del self.items[key]
        return item

    def new_cas(self, item: Item) -> None:
        self.last_cas += 1
        item.cas = self.last_cas

    def ttl_left(self, item: Item) -> int:
        return -1 if not item.exptime else item.exptime - self.current()

    def flush(self) -> None:
        self.items.clear()

    def evict(self, key: str) -> bool:
        return self.items.pop(key, None) is not None

    # -- the protocol -----------------------------------------------------------------------

    def answer(self, data: bytes) -> tuple[bytes, bytes]:
        """Answer every whole request in ``data``; return the replies and what is left
        (a request not yet whole)."""
        replies = []
        while data:
            answered = answer_one(self, data)
            if answered is None:
                break
            reply, data = answered
            replies.append(reply)
        return b"".join(replies), data

    def counted(self, item: Item, delta: int, down: bool) -> bytes | None:
        """``incr``/``decr`` of ``item`` in place, as memcached does (a shorter result is
        padded with spaces to the old length); None if its value is no decimal number."""
        text = item.value.strip()
        if not text.isdigit() or len(text) > 20:
            return None
        number = int(text)
        number = max(0, number - delta) if down else (number + delta) % MAX_COUNTER
        result = b"%d" % number
        if len(result) < len(item.value):
            item.value = result + b" " * (len(item.value) - len(result))
        else:
            item.value = result
        self.new_cas(item)
        return result


class SimSocket:
    """A connection to a simulated server: what is sent is answered at once, and the
    reply waits to be received. ``failure`` is what connecting and sending fail with
    when the server cannot be reached (down, or cut off by a partition)."""

    def __init__(self, server: SimMemcachedServer) -> None:
        self.server = server
        self.pending = b""
        self.replies = b""
        self.failure: OSError | None = None

    def settimeout(self, timeout: float | None) -> None:
        pass

    def setsockopt(self, *args: object) -> None:
        pass

    def connect(self, address: object) -> None:
        if self.failure is not None:
            raise self.failure

    def sendall(self, data: bytes) -> None:
        if self.failure is not None:
            raise self.failure
        replies, self.pending = self.server.answer(self.pending + data)
        self.replies += replies

    def recv(self, size: int) -> bytes:
        if not self.replies:
            raise TimeoutError("timed out")  # no reply is coming: the client's timeout
        chunk, self.replies = self.replies[:size], self.replies[size:]
        return chunk

    def close(self) -> None:
        pass


class SimSocketModule:
    """What pymemcache's client asks of the ``socket`` module, connected to one server."""

    AF_UNIX = AF_UNSPEC = 0
    SOCK_STREAM = IPPROTO_TCP = TCP_NODELAY = 1

    def __init__(
        self, server: SimMemcachedServer, refuses: Callable[[], OSError | None] = lambda: None
    ) -> None:
        """``refuses()``: the error a connection made now fails with (None: it reaches)."""
        self.server = server
        self.refuses = refuses

    def getaddrinfo(self, *args: object) -> list[tuple[int, int, int, str, tuple[str, int]]]:
        return [(0, 1, 1, "", (self.server.name, 11211))]

    def socket(self, *args: object) -> SimSocket:
        sock = SimSocket(self.server)
        sock.failure = self.refuses()
        return sock
