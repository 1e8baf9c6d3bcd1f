"""memcached's own log of the storage commands it runs (``watch mutations``, memcached 1.6).

A connection that sends ``watch mutations`` receives a line for every ``set``, ``add``,
``cas``, ``ms`` … the server runs, with the key, the command and whether it stored: what
each caller's requests did on the server, not what a client believes it sent. Tests that
count the locks a build takes read them here. The server numbers the lines (``gid``) in
the order it ran the commands; a watcher too slow for them gets a ``skipped=`` line
instead, which fails the test rather than letting it count too few.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import NamedTuple
from urllib.parse import unquote

from tests.memcached_proxy import received

__all__ = ["Mutation", "MutationWatch"]


class Mutation(NamedTuple):
    """One storage command the server ran."""

    order: int
    key: str
    command: str
    stored: bool


class MutationWatch:
    """Watch the mutations of the memcached at ``address`` (``host:port``) from now on."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self._socket = socket.create_connection((host, int(port)), timeout=5)
        self._socket.sendall(b"watch mutations\r\n")
        self._buffer = b""
        while b"\r\n" not in self._buffer:
            self._buffer += self._socket.recv(4096)
        answer, self._buffer = self._buffer.split(b"\r\n", 1)
        if answer != b"OK":
            raise RuntimeError(f"memcached refused to watch mutations: {answer!r}")
        self._socket.settimeout(None)  # the reader waits as long as the test runs
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while chunk := received(self._socket):
            with self._lock:
                self._buffer += chunk

    def mutations(self, settle: float = 0.3) -> list[Mutation]:
        """Return every mutation logged so far, in the server's order, once ``settle``
        seconds have let the last lines arrive."""
        time.sleep(settle)
        with self._lock:
            lines = self._buffer.decode().splitlines()
        found = []
        for line in lines:
            if "skipped=" in line:
                raise AssertionError(f"memcached skipped mutations, the watcher too slow: {line}")
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
            if fields.get("type") == "item_store":
                stored = fields["status"] == "stored"
                key = unquote(fields["key"])
                found.append(Mutation(int(fields["gid"]), key, fields["cmd"], stored))
        return sorted(found)

    def close(self) -> None:
        self._socket.close()
