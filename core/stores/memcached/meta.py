"""memcached's meta protocol (1.6+): requests built, replies parsed, support probed.

The text protocol needs a separate ``add`` for a lock, a ``get`` again, a
``gets`` + ``cas`` to let go: the meta commands carry all of that in the read
and the write. ``mg <key> … N<ttl>`` creates a placeholder on a miss and tells
exactly one client it won (``W``) and the others that a winner exists (``Z``);
``R<ttl>`` wins one client an early rebuild before the item expires;
``md <key> I`` marks an item stale instead of deleting it, so the next reader
gets the stale value with a win (``X`` and ``W``); ``ms <key> … C<cas>`` stores
only if the item is unchanged since that read. Together, the server's own leases
(Facebook's, NSDI 2013): no herd, and no stale set.

As :mod:`mcache.stores.memcached.wire`, the parser is pure: given the bytes received so far it
returns the reply and where it ended, or how many bytes it needs before it is
worth trying again, so the blocking and the asyncio clients feed it alike;
:func:`read_reply` and :func:`speaks_meta` are the blocking socket's side.
"""

from __future__ import annotations

import socket
from typing import NamedTuple

from mcache.stores.memcached.wire import Parsed, ProtocolError, parse_values, replied_error

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
    """One meta reply: its code, its value (``VA`` only) and its flags.

    A named tuple, not a frozen dataclass: one is made for every hit, and a
    tuple is made at a third of the cost.
    """

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
    key: str,
    *,
    lease_ttl: int | None = None,
    early_ttl: int | None = None,
    quiet: bool = False,
) -> bytes:
    """Return an ``mg`` reading the value, its cas and its TTL.

    ``lease_ttl``: on a miss, create a placeholder living that long and win it
    (``N``). ``early_ttl``: win a rebuild while that many seconds or fewer are
    left (``R``). ``quiet``: no reply on a miss (``q``; end a batch with :data:`NOOP`).
    """
    request = [b"mg", key.encode(), b"v", b"c", b"t"]
    if lease_ttl is not None:
        request.append(b"N%d" % lease_ttl)
    if early_ttl is not None:
        request.append(b"R%d" % early_ttl)
    if quiet:
        request.append(b"q")
    return b" ".join(request) + b"\r\n"


def set_(key: str, value: bytes, ttl: int, *, cas: int | None = None, mode: bytes = b"") -> bytes:
    """Return an ``ms`` storing ``value`` for ``ttl`` seconds (0: no expiry).

    ``cas``: only if the item's cas is still this one (``C``), the guard that
    keeps a build whose lease was lost from storing. ``mode``: ``E`` add, ``A``
    append, ``P`` prepend, ``R`` replace; set by default.
    """
    request = [b"ms", key.encode(), b"%d" % len(value), b"T%d" % ttl]
    if cas is not None:
        request.append(b"C%d" % cas)
    if mode:
        request.append(b"M" + mode)
    return b" ".join(request) + b"\r\n" + value + b"\r\n"


def delete(
    key: str, *, stale: bool = False, stale_ttl: int | None = None, cas: int | None = None
) -> bytes:
    """Return an ``md``; with ``stale``, mark the item stale instead (``I``), for
    ``stale_ttl`` more seconds if given (``T``): the next reader gets the old value
    and the win to rebuild it. ``cas``: only if the item's cas is still this one."""
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
    """Return an ``ma`` adding ``delta`` and returning the new value; with ``create_ttl``,
    a missing counter is created at ``initial`` (``N``, ``J``) in the same command:
    the text protocol's incr → add → incr becomes one round trip."""
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
    """Parse one meta reply at ``buf[start:]``: ``(MetaReply, end)``, or the length
    ``buf`` must reach before another try. A value is read by its announced size,
    never searched for: it may hold any bytes, a reply line's included."""
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
    """Parse an ``mg`` reply followed by a text ``get``'s ``VALUE``s up to ``END``:
    ``((MetaReply, {key: value}), end)``. One request reads an entry with its lease
    and the tag versions beside it on the same server, in one round trip."""
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
    while True:
        parsed = parse_reply(buf)
        if type(parsed) is tuple:
            reply, end = parsed
            return reply, buf[end:]  # type: ignore[return-value]
        while len(buf) < parsed:  # type: ignore[operator]
            chunk = sock.recv(max(65536, len(buf)))
            if not chunk:
                raise ConnectionResetError("memcached closed the connection mid-reply")
            buf += chunk


def speaks_meta(sock: socket.socket) -> bool:
    """Return whether the server on ``sock`` answers meta commands (memcached 1.6+):
    asked once per server, so a pool of older servers keeps the text protocol."""
    sock.sendall(NOOP)
    buf = b""
    while b"\r\n" not in buf:
        chunk = sock.recv(64)
        if not chunk:
            raise ConnectionResetError("memcached closed the connection during the probe")
        buf += chunk
    line = buf.split(b"\r\n", 1)[0]
    if line == b"MN":
        return True
    if line == b"ERROR":
        return False
    raise ProtocolError(f"unexpected answer to mn: {line[:200]!r}")


def probe(host: str, port: int, timeout: float) -> bool | None:
    """Ask the server at ``host:port`` on a connection of its own whether it speaks the
    meta protocol; None when it cannot be reached (ask again later)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return speaks_meta(sock)
    except (OSError, ProtocolError):
        return None
