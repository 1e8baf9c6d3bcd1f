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
    """Read the reply to :func:`send_get`: every ``VALUE`` up to ``END``."""
    sock = client.sock
    buf = sock.recv(65536)
    while not buf.endswith(b"END\r\n"):  # a reply always ends so; a value may too, so parse
        buf = _more(sock, buf)
    found: dict[str, bytes] = {}
    pos = 0
    end_of_reply = len(buf) - 5
    while pos < end_of_reply:
        eol = buf.find(b"\r\n", pos)
        if eol < 0 or buf[pos : pos + 6] != b"VALUE ":
            if eol < 0:  # the END seen above was inside a value: the reply goes on
                buf = _more(sock, buf)
                end_of_reply = len(buf) - 5
                continue
            raise ProtocolError(buf[pos:eol].decode(errors="replace"))
        _, key, _flags, size = buf[pos:eol].split(b" ", 3)
        start = eol + 2
        end = start + int(size)
        if end + 7 > len(buf):
            buf = _more(sock, buf)
            end_of_reply = len(buf) - 5
            continue
        found[key.decode()] = buf[start:end]
        pos = end + 2
    if pos != end_of_reply:
        raise ProtocolError("reply does not end with END")
    return found


def _more(sock: object, buf: bytes) -> bytes:
    if buf.startswith((b"SERVER_ERROR", b"CLIENT_ERROR", b"ERROR")) and buf.endswith(b"\r\n"):
        raise ProtocolError(buf.decode(errors="replace").strip())
    chunk = sock.recv(max(65536, len(buf)))  # type: ignore[attr-defined]
    if not chunk:
        raise ConnectionResetError("memcached closed the connection mid-reply")
    return buf + chunk
