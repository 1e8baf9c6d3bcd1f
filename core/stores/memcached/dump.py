"""memcached's ``lru_crawler metadump all``: every item's key, expiry, last access and size.

pymemcache has no call for it, so it is spoken here over a socket of its own (the pool's
connections stay free for requests). The stats commands use it for ``--top``.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable, Iterator
from urllib.parse import unquote

__all__ = ["Item", "metadump"]

Item = dict[str, str]
"""One item's fields as memcached names them: ``key`` (decoded), ``exp``, ``la``, ``fetch``,
``size``, ``cls``, ``cas``."""

_BUSY_RETRIES = 20


def metadump(
    connect: Callable[[], socket.socket], name: str, limit: int = 1_000_000
) -> Iterator[Item]:
    """Yield the items of the memcached server ``name`` (at most ``limit``) on a connection
    of its own (``connect()``), waiting out the crawler's ``BUSY`` a while. Raises ``OSError``
    (the server is unreachable) or ``RuntimeError`` (too old, or ``-o no_lru_crawler``)."""
    for _ in range(_BUSY_RETRIES):
        with connect() as connection:
            connection.sendall(b"lru_crawler metadump all\r\n")
            lines = _lines(connection)
            first = next(lines, b"END")
            if first.startswith(b"BUSY"):
                time.sleep(0.1)
                continue
            if first.startswith((b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR")):
                raise RuntimeError(f"{name} refused lru_crawler metadump: {first.decode()}")
            for count, line in enumerate(itertools.chain([first], lines)):
                if line == b"END" or count >= limit:
                    return
                yield _item(line)
            return
    raise RuntimeError(f"{name}: the LRU crawler stayed busy; try again")


def _lines(connection: socket.socket) -> Iterator[bytes]:
    pending = b""
    while True:
        chunk = connection.recv(65536)
        if not chunk:
            return
        pending += chunk
        *complete, pending = pending.split(b"\n")  # items end in \n, END in \r\n
        for line in complete:
            yield line.rstrip(b"\r")


def _item(line: bytes) -> Item:
    fields = dict(
        pair.split("=", 1) for pair in line.decode(errors="replace").split() if "=" in pair
    )
    fields["key"] = unquote(fields.get("key", ""))
    return fields
