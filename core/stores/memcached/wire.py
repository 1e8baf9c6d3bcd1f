"""The memcached text protocol's replies, parsed once for the blocking and the asyncio client.

A cache hit is the hot path of the whole library, and pymemcache's generic
command machinery costs about a third of a loopback round trip on top of the
network. Sending ``get k1 k2 …`` and parsing the ``VALUE``/``END`` reply here,
on the socket of a pymemcache client (which keeps owning connect, timeouts and
close), brings a hit close to the bare-socket cost, and lets a multi-server read
send every server its request before reading any reply.

The parsers are pure: given the bytes received so far, each returns the reply
and where it ended, or how many bytes it needs before it is worth trying again.
The blocking reader (:func:`read_values`) and the asyncio connection
(:mod:`mcache.stores.memcached.aio_connection`) feed them as bytes arrive, so a reply split at any
boundary parses the same way in both.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from pymemcache.client.base import Client
from pymemcache.exceptions import (
    MemcacheClientError,
    MemcacheServerError,
    MemcacheUnknownCommandError,
)

__all__ = [
    "ProtocolError",
    "parse_lines",
    "parse_stats",
    "parse_values",
    "read_parsed",
    "read_values",
    "replied_error",
    "send_get",
]


class ProtocolError(Exception):
    """The server answered something other than VALUE/END (e.g. an error line)."""


Parsed = tuple[object, int]
"""A whole reply and the offset just past it."""


def parse_values(buf: bytes, with_cas: bool = False) -> Parsed | int:
    """Parse a ``get``/``gets`` reply: every ``VALUE`` up to ``END``.

    Returns ``({key: value}, end)`` (``{key: (value, cas)}`` with ``with_cas``),
    or the length ``buf`` must reach before another try. Parsed header by
    header with the announced sizes, never by searching for ``END``: a value
    may contain any bytes, ``END\\r\\n`` included.
    """
    found: dict[str, object] = {}
    pos = 0
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return len(buf) + 1
        if eol == pos + 3 and buf[pos:eol] == b"END":
            return found, eol + 2
        header = buf[pos:eol]
        parts = header.split(b" ")
        try:
            if parts[0] != b"VALUE" or len(parts) != (5 if with_cas else 4):
                raise ValueError
            start, end = eol + 2, eol + 2 + int(parts[3])
        except ValueError:
            raise replied_error(header) or ProtocolError(_shown(header)) from None
        if len(buf) < end + 2:
            return end + 2
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("a value is not followed by CRLF")
        value = buf[start:end]
        found[parts[1].decode()] = (value, parts[4]) if with_cas else value
        pos = end + 2


def parse_lines(buf: bytes, count: int) -> Parsed | int:
    """Parse ``count`` one-line replies (``STORED``, ``DELETED``, a number…) into a list."""
    lines: list[bytes] = []
    pos = 0
    while len(lines) < count:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return len(buf) + 1
        lines.append(buf[pos:eol])
        pos = eol + 2
    return lines, pos


def parse_stats(buf: bytes) -> Parsed | int:
    """Parse a ``stats`` reply into ``{name: value}`` (bytes, as pymemcache's before typing)."""
    found: dict[bytes, bytes] = {}
    pos = 0
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return len(buf) + 1
        line = buf[pos:eol]
        pos = eol + 2
        if line == b"END":
            return found, pos
        parts = line.split(b" ", 2)
        if parts[0] != b"STAT":
            raise replied_error(line) or ProtocolError(_shown(line))
        found[parts[1]] = parts[2] if len(parts) > 2 else b""


def replied_error(line: bytes) -> Exception | None:
    """Return the error a memcached error line stands for (as pymemcache raises it), or None."""
    if line == b"ERROR":
        return MemcacheUnknownCommandError(line.decode())
    if line.startswith(b"CLIENT_ERROR"):
        return MemcacheClientError(_shown(line))
    if line.startswith(b"SERVER_ERROR"):
        return MemcacheServerError(_shown(line))
    return None


def _shown(line: bytes) -> str:
    return line[:200].decode(errors="replace")


def socket_of(client: Client) -> socket.socket:
    """Return the client's socket, connecting it first if needed."""
    if client.sock is None:
        client._connect()
    return client.sock  # type: ignore[no-any-return]


def send_get(client: Client, keys: list[str]) -> None:
    """Send one ``get`` for ``keys`` on the client's socket, connecting if needed."""
    socket_of(client).sendall(b"get " + " ".join(keys).encode() + b"\r\n")


def read_values(client: Client) -> dict[str, bytes]:
    """Read the reply to :func:`send_get` from the client's socket."""
    return read_parsed(client.sock, parse_values)  # type: ignore[return-value]


def read_parsed(sock: socket.socket, parse: Callable[[bytes], Parsed | int]) -> object:
    """Read one whole reply from a blocking ``sock``, as ``parse`` tells its end;
    nothing may follow it (one request at a time on a connection)."""
    buf = sock.recv(65536)  # an empty buffer never holds a reply: no parse for it
    while True:
        parsed = parse(buf)
        if type(parsed) is tuple:
            reply, end = parsed
            if end != len(buf):
                raise ProtocolError("bytes after the reply")
            return reply
        while len(buf) < parsed:  # type: ignore[operator]
            chunk = sock.recv(max(65536, len(buf)))
            if not chunk:
                raise ConnectionResetError("memcached closed the connection mid-reply")
            buf += chunk
