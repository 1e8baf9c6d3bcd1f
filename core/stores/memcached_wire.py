"""The memcached text protocol's ``get``, spoken directly on a client's socket.

A cache hit is the hot path of the whole library, and pymemcache's generic
command machinery costs about a third of a loopback round trip on top of the
network. Sending ``get k1 k2 …`` and parsing the ``VALUE``/``END`` reply here,
on the socket of a pymemcache client (which keeps owning connect, timeouts and
close), brings a hit close to the bare-socket cost, and lets a multi-server read
send every server its request before reading any reply.
"""

from __future__ import annotations

from pymemcache.client.base import Client

__all__ = ["ProtocolError", "read_values", "send_get"]


class ProtocolError(Exception):
    """The server answered something other than VALUE/END (e.g. an error line)."""


def send_get(client: Client, keys: list[str]) -> None:
    """Send one ``get`` for ``keys`` on the client's socket, connecting if needed."""
    if client.sock is None:
        client._connect()
    client.sock.sendall(b"get " + " ".join(keys).encode() + b"\r\n")


def read_values(client: Client) -> dict[str, bytes]:
    """Read the reply to :func:`send_get`: every ``VALUE`` up to ``END``.

    Parsed header by header with the announced sizes, never by searching for
    ``END``: a value may contain any bytes, ``END\\r\\n`` included.
    """
    sock = client.sock
    buf = sock.recv(65536)
    found: dict[str, bytes] = {}
    pos = 0
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            buf = _more(sock, buf)
            continue
        if eol == pos + 3 and buf[pos:eol] == b"END":
            if eol + 2 != len(buf):
                raise ProtocolError("bytes after END")
            return found
        header = buf[pos:eol]
        try:
            verb, key, _flags, size = header.split(b" ", 3)
            start, end = eol + 2, eol + 2 + int(size)
        except ValueError:
            verb = b""
        if verb != b"VALUE":
            raise ProtocolError(header[:200].decode(errors="replace"))
        while len(buf) < end + 2:
            buf = _more(sock, buf)
        if buf[end : end + 2] != b"\r\n":
            raise ProtocolError("a value is not followed by CRLF")
        found[key.decode()] = buf[start:end]
        pos = end + 2


def _more(sock: object, buf: bytes) -> bytes:
    chunk = sock.recv(max(65536, len(buf)))  # type: ignore[attr-defined]
    if not chunk:
        raise ConnectionResetError("memcached closed the connection mid-reply")
    return buf + chunk
