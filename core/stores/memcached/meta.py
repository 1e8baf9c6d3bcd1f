"""memcached's meta protocol (1.6+): requests built, replies parsed, support probed.

The meta commands carry in the read and the write what the text protocol needs
separate requests for (a lock's ``add``, a second ``get``, a ``gets`` + ``cas``):
the server's own leases (Facebook's, NSDI 2013). Which flags do what, and what
each path costs: see docs/explanation/memcached-protocols.md.

As :mod:`mcache.stores.memcached.wire`, the parser is pure, so the blocking and the asyncio
clients feed it alike; :func:`read_reply` and :func:`speaks_meta` are the blocking socket's side.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import NamedTuple

from pymemcache.exceptions import MemcacheError, MemcacheUnknownCommandError

from mcache.stores.memcached.wire import Parsed, ProtocolError, parse_values, receive, replied_error

__all__ = [
    "MetaReply",
    "arithmetic",
    "delete",
    "get",
    "noop",
    "parse_replies",
    "parse_reply",
    "parse_reply_and_values",
    "probe",
    "read_reply",
    "set_",
    "speaks_meta",
]

NOOP = b"mn\r\n"
"""Answered ``MN``; a server without the meta protocol answers ``ERROR``."""


class MetaReply(NamedTuple):
    """One meta reply: its code, its value (``VA`` only) and its flags; a named tuple, made
    at a third of a frozen dataclass's cost, as one is made for every hit."""

    code: bytes
    """``VA`` (a value follows), ``HD`` (done), ``EN`` (miss), ``NS`` (not stored),
    ``EX`` (the cas no longer matches), ``NF`` (not found) or ``MN`` (the no-op)."""
    value: bytes | None = None
    flags: tuple[bytes, ...] = ()

    @property
    def hit(self) -> bool:
        return self.code in (b"VA", b"HD") and not self.won_placeholder

    @property
    def won(self) -> bool:
        """This client holds the lease: it should build and store (``W``)."""
        return b"W" in self.flags

    @property
    def other_won(self) -> bool:
        """Another client holds the lease (``Z``): serve the stale value, or wait."""
        return b"Z" in self.flags

    @property
    def stale(self) -> bool:
        """The item was marked stale by ``md … I`` (``X``): its value is the old one."""
        return b"X" in self.flags

    @property
    def won_placeholder(self) -> bool:
        """A miss this client won: the value is the empty placeholder ``N`` created."""
        return self.won and self.ttl == -1

    @property
    def cas(self) -> int | None:
        return self._number(b"c")

    @property
    def ttl(self) -> int | None:
        """Seconds left (``-1``: none), when the request asked with ``t``."""
        return self._number(b"t")

    def _number(self, flag: bytes) -> int | None:
        for token in self.flags:
            if token[:1] == flag and len(token) > 1:
                return int(token[1:])
        return None


def get(
    key: str, *, lease_ttl: int | None = None, early_ttl: int | None = None, quiet: bool = False
) -> bytes:
    """Return an ``mg`` reading the value, its cas and its TTL. ``lease_ttl``: on a miss,
    create a placeholder living that long and win it (``N``). ``early_ttl``: win a rebuild
    while that many seconds or fewer are left (``R``). ``quiet``: no reply on a miss (``q``;
    end a batch with :data:`NOOP`)."""
    request = [b"mg", key.encode(), b"v", b"c", b"t"]
    if lease_ttl is not None:
        request.append(b"N%d" % lease_ttl)
    if early_ttl is not None:
        request.append(b"R%d" % early_ttl)
    if quiet:
        request.append(b"q")
    return b" ".join(request) + b"\r\n"


def set_(key: str, value: bytes, ttl: int, *, cas: int | None = None, mode: bytes = b"") -> bytes:
    """Return an ``ms`` storing ``value`` for ``ttl`` seconds (0: no expiry). ``cas``: only
    if the item's cas is still this one (``C``), so a build that lost its lease stores
    nothing. ``mode``: ``E`` add, ``A`` append, ``P`` prepend, ``R`` replace; set by default."""
    request = [b"ms", key.encode(), b"%d" % len(value), b"T%d" % ttl]
    if cas is not None:
        request.append(b"C%d" % cas)
    if mode:
        request.append(b"M" + mode)
    return b" ".join(request) + b"\r\n" + value + b"\r\n"


def delete(
    key: str, *, stale: bool = False, stale_ttl: int | None = None, cas: int | None = None
) -> bytes:
    """Return an ``md``; with ``stale``, mark the item stale instead (``I``), for ``stale_ttl``
    more seconds if given (``T``). ``cas``: only if the item's cas is still this one."""
    request = [b"md", key.encode()]
    if stale or stale_ttl is not None:
        request.append(b"I")
    if stale_ttl is not None:
        request.append(b"T%d" % stale_ttl)
    if cas is not None:
        request.append(b"C%d" % cas)
    return b" ".join(request) + b"\r\n"


def arithmetic(
    key: str, delta: int, *, create_ttl: int | None = None, initial: int = 0, down: bool = False
) -> bytes:
    """Return an ``ma`` adding ``delta`` and returning the new value; with ``create_ttl``, a
    missing counter is created at ``initial`` (``N``, ``J``): incr → add → incr in one."""
    request = [b"ma", key.encode(), b"D%d" % delta, b"v"]
    if create_ttl is not None:
        request += [b"N%d" % create_ttl, b"J%d" % initial]
    if down:
        request.append(b"MD")
    return b" ".join(request) + b"\r\n"


def noop() -> bytes:
    """Return an ``mn``: it ends a batch of quiet requests, and probes for meta support."""
    return NOOP


def parse_reply(buf: bytes, start: int = 0) -> Parsed | int:
    """Parse one meta reply at ``buf[start:]``: ``(MetaReply, end)``, or the length ``buf``
    must reach first. A value is read by its announced size: it may hold any bytes."""
    eol = buf.find(b"\r\n", start)
    if eol < 0:
        return len(buf) + 1
    line = buf[start:eol]
    parts = line.split(b" ")
    code = parts[0]
    if code == b"VA":
        try:
            size = int(parts[1])
        except (IndexError, ValueError):
            raise ProtocolError(f"bad VA line {line[:200]!r}") from None
        end = eol + 2 + size
        if len(buf) < end + 2:
            return end + 2
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("a value is not followed by CRLF")
        return MetaReply(code, buf[eol + 2 : end], tuple(parts[2:])), end + 2
    if code in (b"HD", b"EN", b"NS", b"EX", b"NF", b"MN"):
        return MetaReply(code, None, tuple(parts[1:])), eol + 2
    raise replied_error(line) or ProtocolError(f"unexpected meta reply {line[:200]!r}")


def parse_replies(buf: bytes, count: int) -> Parsed | int:
    """Parse ``count`` meta replies in a row (a pipelined batch) into a list."""
    replies: list[MetaReply] = []
    pos = 0
    while len(replies) < count:
        parsed = parse_reply(buf, pos)
        if type(parsed) is int:
            return parsed
        reply, pos = parsed  # type: ignore[misc]
        replies.append(reply)
    return replies, pos


def parse_reply_and_values(buf: bytes) -> Parsed | int:
    """Parse an ``mg`` reply and a text ``get``'s after it: ``((MetaReply, {key: value}),
    end)``, an entry with its lease and the tag versions beside it in one round trip."""
    parsed = parse_reply(buf)
    if type(parsed) is int:
        return parsed
    reply, end = parsed  # type: ignore[misc]
    values = parse_values(buf[end:])
    if type(values) is int:
        return end + values  # type: ignore[operator]
    found, rest = values  # type: ignore[misc]
    return (reply, found), end + rest


def read_reply(sock: socket.socket, buf: bytes = b"") -> tuple[MetaReply, bytes]:
    """Read one reply from ``sock`` (after what ``buf`` already holds); return it and
    the bytes received past its end (the next replies of a pipelined batch)."""
    return receive(sock, parse_reply, buf)  # type: ignore[return-value]


def speaks_meta(sock: socket.socket) -> bool:
    """Return whether the server on ``sock`` answers meta commands (memcached 1.6+):
    asked once per server, so a pool of older servers keeps the text protocol."""
    sock.sendall(NOOP)
    try:
        reply, _rest = read_reply(sock)
    except MemcacheUnknownCommandError:  # ``ERROR``: no such command
        return False
    if reply.code != b"MN":
        raise ProtocolError(f"unexpected answer to mn: {reply.code!r}")
    return True


def probe(connect: Callable[[], socket.socket]) -> bool | None:
    """Ask a server on a connection of its own (``connect()``) whether it speaks the meta
    protocol; None when it cannot be reached (ask again later)."""
    try:
        with connect() as sock:
            return speaks_meta(sock)
    except (OSError, ProtocolError, MemcacheError):
        return None
