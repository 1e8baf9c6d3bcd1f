"""What every benchmark script shares: alternating timing, percentiles, tables, figures."""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = [
    "Call",
    "Figure",
    "answering",
    "arguments",
    "gunicorn",
    "interleaved",
    "latency_row",
    "measure",
    "p99",
    "report",
    "table",
    "uvicorn",
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
    wsgi: str, env: dict[str, str], cwd: str, paths: tuple[str, ...] = ("/",)
) -> tuple[subprocess.Popen[bytes], int]:
    """Serve ``wsgi`` with gunicorn (2 gthread workers × 4 threads) on a free loopback port.

    Returns once every one of ``paths`` answers (which also warms them), with
    the process and its port; the caller terminates it.
    """
    from tests.servers import free_port

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", wsgi, "-w", "2", "-k", "gthread", "--threads", "4",
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
