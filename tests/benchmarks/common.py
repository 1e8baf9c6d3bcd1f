"""What every benchmark script shares: alternating timing, percentiles, tables, figures."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import NamedTuple

__all__ = [
    "Call",
    "Figure",
    "Load",
    "answering",
    "arguments",
    "cpu_seconds",
    "gunicorn",
    "interleaved",
    "latency_row",
    "measure",
    "p99",
    "report",
    "table",
    "uvicorn",
    "wrk",
]

Call = Callable[[], object]


def _sample(call: Call, calls: int) -> list[float]:
    timings = []
    clock = time.perf_counter_ns
    for _ in range(calls):
        start = clock()
        call()
        timings.append((clock() - start) / 1000)
    return timings


def measure(
    subject: Call, anchor: Call, rounds: int, calls: int
) -> tuple[list[float], list[float]]:
    """Time ``subject`` and ``anchor`` alternately; return their samples in µs.

    Alternating in rounds makes drift on a busy machine (another process, CPU
    frequency, the VM's neighbours) hit both sides alike, so the ratio holds;
    the order flips every round (ABBA), so neither side always goes first.
    """
    mine, theirs = interleaved([subject, anchor], rounds, calls)
    return mine, theirs


def interleaved(subjects: list[Call], rounds: int, calls: int) -> list[list[float]]:
    """Time each of ``subjects`` for ``calls`` calls in turn, ``rounds`` times; return
    each one's samples in µs. The order is reversed every round (ABC CBA …)."""
    for subject in subjects:
        _sample(subject, calls // 4)
    samples: list[list[float]] = [[] for _ in subjects]
    order = list(range(len(subjects)))
    for _round in range(rounds):
        for index in order:
            samples[index] += _sample(subjects[index], calls)
        order.reverse()
    return samples


def p99(samples: list[float]) -> float:
    """Return the 99th percentile."""
    return statistics.quantiles(samples, n=100, method="inclusive")[98]


def latency_row(name: str, mine: list[float], theirs: list[float]) -> list[str]:
    """Return ``[name, p50, anchor p50, ratio]`` for a measured pair."""
    ratio = statistics.median(mine) / statistics.median(theirs)
    return [
        name,
        f"{statistics.median(mine):.1f}",
        f"{statistics.median(theirs):.1f}",
        f"{ratio:.2f}×",
    ]


def table(header: list[str], rows: list[list[str]], markdown: bool) -> str:
    """Format rows as a Markdown table, or as aligned plain text."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
    widths = [max(len(c) for c in col) for col in zip(header, *rows, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [header, *rows])


@dataclass
class Figure:
    """One headline figure of a benchmark: mcache, its anchor in the same run, the target.

    ``met`` is None for a figure reported without a target. Each script prints
    its figures last and, given ``--figures PATH``, writes them there as JSON
    for ``python -m tests.benchmarks`` to gather into one table.
    """

    name: str
    mcache: str
    anchor: str
    ratio: str
    target: str
    met: bool | None


def arguments(doc: str | None) -> argparse.ArgumentParser:
    """Return a parser with the options every benchmark script takes."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="print tables as Markdown")
    parser.add_argument("--figures", metavar="PATH", help="also write the figures as JSON")
    return parser


def report(figures: list[Figure], path: str | None) -> None:
    """Print one line per figure (meets / MISSES its target); write them to ``path``."""
    print()
    for f in figures:
        shown = f.ratio or f.mcache
        if f.met is None:
            print(f"{f.name}: {shown}")
        else:
            print(f"{f.name}: {shown} ({'meets' if f.met else 'MISSES'} {f.target})")
    if path:
        with open(path, "w", encoding="utf-8") as out:
            json.dump([asdict(f) for f in figures], out, indent=2)


def gunicorn(
    wsgi: str,
    env: dict[str, str],
    cwd: str,
    paths: tuple[str, ...] = ("/",),
    *,
    sync_workers: int = 0,
) -> tuple[subprocess.Popen[bytes], int]:
    """Serve ``wsgi`` with gunicorn on a free loopback port: 2 gthread workers × 4 threads,
    or ``sync_workers`` sync workers (one request at a time each, no keep-alive).

    Returns once every one of ``paths`` answers (which also warms them), with
    the process and its port; the caller terminates it.
    """
    from tests.servers import free_port

    port = free_port()
    workers = (["-w", str(sync_workers), "-k", "sync"] if sync_workers
               else ["-w", "2", "-k", "gthread", "--threads", "4"])  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", wsgi, *workers,
         "-b", f"127.0.0.1:{port}", "--log-level", "warning"],
        env=env, cwd=cwd,
    )  # fmt: skip
    return answering(server, port, paths, f"gunicorn serving {wsgi}")


def uvicorn(
    asgi: str,
    env: dict[str, str],
    cwd: str,
    paths: tuple[str, ...] = ("/",),
    stderr: int | None = None,
) -> tuple[subprocess.Popen[str], int]:
    """Serve ``asgi`` with one uvicorn worker on a free loopback port (as :func:`gunicorn`).

    ``stderr=subprocess.PIPE`` keeps what the server says, for a caller that checks it.
    """
    from tests.servers import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", asgi, "--port", str(port), "--host", "127.0.0.1",
         "--workers", "1", "--log-level", "warning", "--no-access-log"],
        env=env, cwd=cwd, stderr=stderr, text=True,
    )  # fmt: skip
    return answering(server, port, paths, f"uvicorn serving {asgi}")


def answering(
    server: subprocess.Popen, port: int, paths: tuple[str, ...], name: str
) -> tuple[subprocess.Popen, int]:
    """Return ``(server, port)`` once every one of ``paths`` answers; kill it after 30 s."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            for path in paths:
                urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
            return server, port
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError(f"{name} did not answer within 30 s")


class Load(NamedTuple):
    """What one wrk run measured."""

    rate: float
    """Requests per second."""
    p99: float
    """The 99th percentile latency, in ms."""
    requests: int


def wrk(port: int, path: str, seconds: float, connections: int) -> Load:
    """Run wrk (1 thread, ``connections`` connections) on ``path`` for ``seconds``.

    wrk is written in C, so the load it makes costs the machine little next to a
    Python load generator; a benchmark that needs it says so (``apt-get install wrk``).
    """
    out = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", "--latency",
         f"http://127.0.0.1:{port}{path}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    if "Non-2xx" in out or "Socket errors" in out:
        raise RuntimeError(f"wrk saw errors on {path}:\n{out}")
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    value, unit = re.search(r"99%\s+([\d.]+)(us|ms|s)", out).groups()  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    return Load(rate, float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit], requests)


def cpu_seconds(pid: int) -> float:
    """Return the CPU seconds (user and system) process ``pid`` and its children used so
    far, from ``/proc`` (Linux): a server's own cost, whatever else shares the machine."""
    pids = [pid]
    for thread in os.listdir(f"/proc/{pid}/task"):
        pids += [int(child) for child in _proc_text(f"/proc/{pid}/task/{thread}/children").split()]
    ticks = 0
    for each in pids:
        fields = _proc_text(f"/proc/{each}/stat").rsplit(")", 1)[-1].split()
        if fields:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def _proc_text(path: str) -> str:
    """Return a ``/proc`` file's text, or "" for a thread or process gone meanwhile."""
    try:
        with open(path, encoding="ascii") as file:
            return file.read()
    except (FileNotFoundError, ProcessLookupError):
        return ""
