"""Which store the example's commands use when ``MCACHE_URL`` does not say.

The Django blog and its Flask twin are two processes over one database. On
``memory://`` each has a cache of its own, so an edit made in the Django admin
refreshes the Django pages only; on a memcached both use, it refreshes both. So
the commands look for a memcached on its usual address before they fall back to
``memory://``, and say which they took and why.
"""

from __future__ import annotations

import os
import socket

__all__ = ["LOCAL_MEMCACHED", "choose_store", "memcached_answers", "shared"]

LOCAL_MEMCACHED = ("127.0.0.1", 11211)
"""Where a memcached installed from a package listens."""


def memcached_answers(address: tuple[str, int] = LOCAL_MEMCACHED, timeout: float = 0.3) -> bool:
    """Return whether a memcached answers ``version`` at ``address``."""
    try:
        with socket.create_connection(address, timeout=timeout) as connection:
            connection.sendall(b"version\r\n")
            return connection.recv(64).startswith(b"VERSION ")
    except OSError:
        return False


def choose_store(address: tuple[str, int] = LOCAL_MEMCACHED) -> str:
    """Set ``MCACHE_URL`` for this process (and the settings) if unset, to the memcached at
    ``address`` if one answers there, else ``memory://``; return why, for the banner."""
    if os.environ.get("MCACHE_URL"):
        return "from MCACHE_URL"
    host, port = address
    if memcached_answers(address):
        os.environ["MCACHE_URL"] = f"memcached://{host}:{port}"
        return "a memcached found running there; MCACHE_URL=memory:// for one of this process"
    os.environ["MCACHE_URL"] = "memory://"
    return f"this process's own: no memcached on {host}:{port}"


def shared(url: str) -> bool:
    """Return whether a store at ``url`` is seen by other processes (not ``memory://``)."""
    return not url.startswith("memory://")
