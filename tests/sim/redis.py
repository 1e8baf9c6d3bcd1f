"""A simulated Redis: the commands the Redis store sends, and its Lua scripts, by their effect.

The real :class:`~mcache.stores.redis.store.RedisStore` reaches it through redis-py's own
client, pool and RESP parser (:mod:`tests.sim.redis_store`): what redis-py writes is parsed
here as RESP and answered in RESP, at once, on the simulation's clock. Keys expire to the
millisecond, as Redis's do. Each script of :mod:`mcache.stores.redis.lua` is run by what it
does, looked up by its SHA-1 (``EVALSHA``, after ``SCRIPT LOAD``) or by its text (``EVAL``):
a script runs whole, between two commands of any other client, as Redis runs one
(:mod:`tests.sim.redis_commands`). A replica follows its primary a replication lag
behind (:func:`replicated`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.sim.redis_commands import COMMANDS, SCRIPTS, Error, Reply, Status, sha


class SimRedisServer:
    """One Redis server: its keys, their expiry times, and whether it answers."""

    def __init__(self, now: Callable[[], float], name: str = "redis0") -> None:
        """``now()``: the server's time in seconds (the simulation's world clock)."""
        self.now = now
        self.name = name
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, float] = {}
        self.scripts: dict[str, str] = {sha(source): source for source in SCRIPTS}
        self.loaded: set[str] = set()
        self.commands = 0
        self.hits = self.misses = 0
        self.serial = threading.Lock()
        self.replicate: Callable[[list[bytes] | None], None] = lambda keys: None
        """Told of the keys each command may have changed (None: all of them), to send on
        to a replica (:func:`replicated`)."""

    # -- the keyspace ---------------------------------------------------------------------

    def live(self, key: bytes) -> Any:
        """``key``'s value, or None once it expired (then it goes, as Redis's lazy expiry)."""
        until = self.expires.get(key)
        if until is not None and until <= self.now():
            self.data.pop(key, None)
            self.expires.pop(key, None)
        return self.data.get(key)

    def put(self, key: bytes, value: Any, expires_in: float | None, keep_ttl: bool = False) -> None:
        self.data[key] = value
        if expires_in is not None:
            self.expires[key] = self.now() + expires_in
        elif not keep_ttl:
            self.expires.pop(key, None)

    def remove(self, key: bytes) -> bool:
        existed = self.live(key) is not None
        self.data.pop(key, None)
        self.expires.pop(key, None)
        return existed

    def flush(self) -> None:
        self.data.clear()
        self.expires.clear()

    def pttl(self, key: bytes) -> int:
        if self.live(key) is None:
            return -2
        until = self.expires.get(key)
        return -1 if until is None else max(0, round((until - self.now()) * 1000))

    # -- RESP -----------------------------------------------------------------------------

    def answer(self, data: bytes) -> tuple[bytes, bytes]:
        """Answer every whole command in ``data``; return the replies and what is left.
        One command at a time, whatever the threads sending them (as Redis runs them)."""
        with self.serial:
            return self._answer(data)

    def _answer(self, data: bytes) -> tuple[bytes, bytes]:
        replies = b""
        while True:
            parsed = parse_command(data)
            if parsed is None:
                return replies, data
            words, data = parsed
            self.commands += 1
            try:
                reply = self.run(words)
            except Error as error:
                reply = error
            self.replicate(touched(words))
            replies += encode(reply)

    def run(self, words: list[bytes]) -> Reply:
        """Run one command (its name and arguments)."""
        name = words[0].upper().decode()
        command = COMMANDS.get(name)
        if command is None:
            raise Error(f"ERR unknown command '{name}'")
        return command(self, words[1:])


def touched(words: list[bytes]) -> list[bytes] | None:
    """The keys a command may change ([] for a read; None: every key)."""
    name = words[0].upper()
    if name in WRITES:
        return words[1:] if name in (b"DEL", b"UNLINK") else words[1:2]
    if name in (b"EVAL", b"EVALSHA"):
        return words[3 : 3 + int(words[2])]
    return None if name in (b"FLUSHDB", b"FLUSHALL") else []


WRITES = {b"SET", b"DEL", b"UNLINK", b"EXPIRE", b"PEXPIRE", b"PERSIST", b"INCRBY", b"DECRBY"}
WRITES |= {b"PFADD"}


def replicated(primary: SimRedisServer, replica: SimRedisServer, send: Callable[..., None]) -> None:
    """Make ``replica`` follow ``primary``, asynchronously: each command's changes reach it
    when ``send(apply)`` runs ``apply`` (a replication lag later), as the keys' states
    then were on the primary, their expiry times absolute (Redis 7 replicates ``SET … EX``
    as ``PXAT``)."""

    def replicate(keys: list[bytes] | None) -> None:
        if keys == []:
            return
        if keys is None:
            send(replica.flush)
            return
        states = [(key, copy(primary.live(key)), primary.expires.get(key)) for key in keys]

        def apply() -> None:
            for key, value, until in states:
                replica.data.pop(key, None)
                replica.expires.pop(key, None)
                if value is not None:
                    replica.data[key] = value
                    if until is not None:
                        replica.expires[key] = until

        send(apply)

    primary.replicate = replicate


def copy(value: Any) -> Any:
    return set(value) if isinstance(value, set) else value


def parse_command(data: bytes) -> tuple[list[bytes], bytes] | None:
    """One RESP array of bulk strings off the front of ``data`` (None: not all here yet)."""
    if not data.startswith(b"*"):
        return None
    end = data.find(b"\r\n")
    if end < 0:
        return None
    count, at, words = int(data[1:end]), end + 2, []
    for _ in range(count):
        end = data.find(b"\r\n", at)
        if end < 0:
            return None
        size = int(data[at + 1 : end])
        start = end + 2
        if len(data) < start + size + 2:
            return None
        words.append(data[start : start + size])
        at = start + size + 2
    return words, data[at:]


def encode(reply: Reply) -> bytes:
    """``reply`` in RESP 2."""
    if isinstance(reply, Status):
        return b"+" + bytes(reply) + b"\r\n"
    if isinstance(reply, Error):
        return b"-" + str(reply).encode() + b"\r\n"
    if reply is None:
        return b"$-1\r\n"
    if isinstance(reply, bool):
        return b":%d\r\n" % int(reply)
    if isinstance(reply, int):
        return b":%d\r\n" % reply
    if isinstance(reply, bytes):
        return b"$%d\r\n%s\r\n" % (len(reply), reply)
    if isinstance(reply, list):
        return b"*%d\r\n" % len(reply) + b"".join(encode(item) for item in reply)
    raise TypeError(f"no RESP for {reply!r}")
