"""Server processes the harness does not hold: a daemon found by its port, and leftovers.

A daemon a test starts by command (``memcached -d`` forks and its parent exits)
is no child of the test: it is found by the port it listens on, which is where
the test told it to listen, whatever a pid file says. And every pytest session
(each xdist worker runs one) marks its environment when it starts, so every
process it starts, by any route, inherits the mark: the harness's servers
(:mod:`tests.servers`), such daemons, the servers its subprocesses start. A
memcached, redis-server, postgres or varnishd alive with the session's mark
after its teardown was left behind by it, not by another worker or another run.
Linux's ``/proc`` only: elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

__all__ = ["MARK", "left_running", "listening_on", "mark_session", "stop"]

MARK = "MCACHE_TEST_SESSION"
"""The environment variable that carries a session's mark."""
SERVERS = frozenset({"memcached", "redis-server", "postgres", "varnishd"})
"""The servers' executables (Sentinel is redis-server; Varnish's child is varnishd)."""
PROC = Path("/proc")


def mark_session() -> str:
    """Put a mark of this process's own in its environment, and return it."""
    mark = f"{os.getpid()}-{time.time_ns()}"
    os.environ[MARK] = mark
    return mark


def listening_on(port: int) -> set[int]:
    """Return the pids of the processes listening on TCP ``port`` (IPv4 or IPv6)."""
    sockets = set()
    for table in ("tcp", "tcp6"):
        try:
            rows = (PROC / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # local address, remote address, state, …, inode
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # LISTEN
                sockets.add(f"socket:[{fields[9]}]")
    return {pid for pid, entry in _processes() if sockets & _open_files(entry)}


def left_running(mark: str, grace: float = 0.0) -> dict[int, str]:
    """Return pid → command line of each server process alive with the session ``mark``,
    once none is, or after ``grace`` seconds (a server just killed may take a moment)."""
    deadline = time.monotonic() + grace
    found = _marked(mark)
    while found and time.monotonic() < deadline:
        time.sleep(0.1)
        found = _marked(mark)
    return found


def _marked(mark: str) -> dict[int, str]:
    found = {}
    wanted = f"{MARK}={mark}".encode()
    for pid, entry in _processes():
        try:
            if os.path.basename(os.readlink(entry / "exe")) not in SERVERS or _zombie(entry):
                continue
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found[pid] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return found


def stop(pids: set[int], timeout: float = 10.0) -> None:
    """SIGTERM ``pids`` and wait until they are gone, SIGKILLing those still there at the end."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.05)
        if not any(_alive(pid) for pid in pids):
            return


def _processes() -> list[tuple[int, Path]]:
    try:
        return [(int(entry.name), entry) for entry in PROC.iterdir() if entry.name.isdigit()]
    except OSError:
        return []


def _open_files(entry: Path) -> set[str]:
    try:
        descriptors = list((entry / "fd").iterdir())
    except OSError:  # gone, or not ours to read
        return set()
    files = set()
    for descriptor in descriptors:
        try:
            files.add(os.readlink(descriptor))
        except OSError:  # closed meanwhile
            continue
    return files


def _zombie(entry: Path) -> bool:
    return (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"


def _alive(pid: int) -> bool:
    try:
        return not _zombie(PROC / str(pid))
    except OSError:
        return False
