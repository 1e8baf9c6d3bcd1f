"""A TCP proxy in front of a real memcached that counts requests, or refuses meta commands.

With ``meta=False`` it stands for a memcached older than 1.6: every meta command
(``mg``, ``ms``, ``md``, ``ma``, ``mn``) is answered ``ERROR``, as such a server answers
a command it does not know, and never reaches the server. ``answers`` injects a race the
server would only show by chance: a request starting with one of its prefixes
(``b"incr "``) gets the given reply and never reaches the server. ``reply_delay`` holds every
reply that long on its way back (the server has applied the request: a caller cancelled
meanwhile never reads its answer). ``cut_next`` cuts the connection at the next request
starting with it, once (a connection reset on a server that stays up). Everything else
is passed through untouched. Either way it counts what the client sent, a request (or a
pipelined batch) at a time: the round trips a call cost, as the benchmark reports them
and the tests check them.
"""

from __future__ import annotations

import socket
import threading
import time

from tests.servers import HOST

META_VERBS = (b"mg ", b"ms ", b"md ", b"ma ", b"mn\r\n", b"me ")


class MemcachedProxy:
    """Listens on a free loopback port and forwards to ``upstream`` (host, port)."""

    def __init__(
        self,
        upstream: tuple[str, int],
        meta: bool = True,
        answers: dict[bytes, bytes] | None = None,
    ) -> None:
        self.upstream = upstream
        self.meta = meta
        self.answers = answers or {}
        self.listener = socket.create_server((HOST, 0))
        self.port = self.listener.getsockname()[1]
        self.refused = 0
        self.forwarded = 0
        self.reply_delay = 0.0
        self.cut_next: bytes | None = None
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream)
            except OSError:  # the server is gone (the session is ending): drop the client
                client.close()
                continue
            threading.Thread(target=self._from_client, args=(client, server), daemon=True).start()
            threading.Thread(target=self._to_client, args=(server, client), daemon=True).start()

    def _from_client(self, client: socket.socket, server: socket.socket) -> None:
        with client, server:
            while chunk := received(client):
                if not self.meta and chunk.startswith(META_VERBS):
                    self.refused += 1
                    client.sendall(b"ERROR\r\n" * chunk.count(b"\r\n"))
                    continue
                if self.cut_next is not None and chunk.startswith(self.cut_next):
                    self.cut_next = None
                    return  # both connections closed: the client's request is cut off
                answer = next((a for p, a in self.answers.items() if chunk.startswith(p)), None)
                if answer is not None:
                    self.refused += 1
                    client.sendall(answer)
                    continue
                self.forwarded += 1
                server.sendall(chunk)

    def _to_client(self, server: socket.socket, client: socket.socket) -> None:
        while chunk := received(server):
            if self.reply_delay:
                time.sleep(self.reply_delay)
            try:
                client.sendall(chunk)
            except OSError:
                return

    def counted(self) -> int:
        """Requests forwarded so far (a pipelined batch counts one)."""
        return self.forwarded

    def close(self) -> None:
        self._closing = True
        self.listener.close()

    def __enter__(self) -> MemcachedProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def upstream_of(memcached_url: str) -> tuple[str, int]:
    """Return the (host, port) a ``memcached://host:port`` URL names, for a proxy before it."""
    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    return host, int(port)


def received(sock: socket.socket) -> bytes:
    """Return what ``sock`` received next, or ``b""`` once it is closed."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""
