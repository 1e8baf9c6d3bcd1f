"""The memcached text protocol's replies, parsed once for the blocking and the asyncio client.

A hit is the library's hot path, and pymemcache's generic command machinery costs about a
third of a loopback round trip: sending ``get k1 k2 …`` and parsing its reply here, on a
pymemcache client's socket, brings a hit close to the bare-socket cost, and lets a
multi-server read send every request first. The parsers are pure (the bytes so far in; the
reply and where it ended, or the length needed first, out), so the blocking reader
(:func:`read_values`) and the asyncio connection (:mod:`mcache.stores.memcached.aio_connection`)
feed them alike.
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
    "receive",
    "replied_error",
    "send_get",
]


class ProtocolError(Exception):
    """The server answered something other than VALUE/END (e.g. an error line)."""


Parsed = tuple[object, int]
"""A whole reply and the offset just past it."""


def parse_values(buf: bytes, with_cas: bool = False) -> Parsed | int:
    """Parse a ``get``/``gets`` reply into ``{key: value}`` (``{key: (value, cas)}`` with
    ``with_cas``), by the announced sizes, never by searching for ``END``: a value may hold
    any bytes, ``END\\r\\n`` included."""
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
    reply, rest = receive(sock, parse, sock.recv(65536))
    if rest:
        raise ProtocolError("bytes after the reply")
    return reply


def receive(
    sock: socket.socket, parse: Callable[[bytes], Parsed | int], buf: bytes = b""
) -> tuple[object, bytes]:
    """Read from a blocking ``sock``, after what ``buf`` holds, until ``parse`` finds a
    whole reply; return it and the bytes received past its end."""
    while True:
        parsed = parse(buf)
        if type(parsed) is tuple:
            reply, end = parsed
            return reply, buf[end:]
        while len(buf) < parsed:  # type: ignore[operator]
            chunk = sock.recv(max(65536, len(buf)))
            if not chunk:
                raise ConnectionResetError("memcached closed the connection mid-reply")
            buf += chunk
