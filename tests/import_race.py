"""Run in a fresh interpreter: import each pair of modules from 8 threads at once.

``python -m tests.import_race [package ...] < pairs.json`` prints, as JSON, what went
wrong with each pair (an empty object: nothing); the packages, if named, are the ones
the parent must not import (by default mcache's three). Each pair is imported in a
child forked from this interpreter before it has imported any module of mcache,
django_mcache or flask_mcache (only the libraries they use, and Django set up without
them), so the child imports the pair as a first request's threads would: none of it
loaded yet. Four threads import the first module of a pair, and four the second a
moment later: a test gives each pair in both orders.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import threading
import time
import traceback

OURS = ["mcache", "django_mcache", "flask_mcache"]
THREADS = 8
HANG_SECONDS = 30.0
HEAD_START = 0.002
AT_ONCE = 1  # one child at a time: the suite's other worker keeps a core of its own


def ours(name: str) -> bool:
    return name.partition(".")[0] in OURS


def set_up_django() -> None:
    """Django configured and set up without mcache's app, so that setting it up imports
    nothing of ours (Django imports an installed app's modules itself, at start-up)."""
    import django
    from django.conf import settings

    settings.configure(
        SECRET_KEY="import-race",
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
    )
    django.setup()


def in_child(work: object, report: int) -> int:
    """Fork; in the child run ``work()`` and write what it returns to ``report``."""
    pid = os.fork()
    if pid == 0:
        try:
            os.write(report, json.dumps(work()).encode())  # type: ignore[operator]
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(0)
    return pid


def libraries_used(names: list[str]) -> list[str]:
    """The modules, none of ours, that importing ``names`` loads (found in a child)."""

    def scout() -> list[str]:
        for name in names:
            importlib.import_module(name)  # a module that cannot import alone fails here
        return sorted(name for name in sys.modules if not ours(name))

    read, write = os.pipe()
    pid = in_child(scout, write)
    os.close(write)
    data = b"".join(iter(lambda: os.read(read, 65536), b""))
    _, status = os.waitpid(pid, 0)
    if not data:
        raise SystemExit(f"importing the modules one by one failed (status {status})")
    return json.loads(data)


def race(pair: list[str]) -> str:
    """Import the two modules from ``THREADS`` threads, half of them each, the first
    module's a moment ahead (so that it holds its first locks when the second module's
    imports begin, as in a server's first two requests); say what failed, or ''."""
    errors: list[str] = []

    def importer(name: str) -> None:
        try:
            importlib.import_module(name)
        except BaseException:
            errors.append(traceback.format_exc(limit=3))

    threads = [
        threading.Thread(target=importer, args=(pair[i * 2 // THREADS],), daemon=True)
        for i in range(THREADS)
    ]
    for i, thread in enumerate(threads):
        if i == THREADS // 2:
            time.sleep(HEAD_START)
        thread.start()
    for thread in threads:
        thread.join(HANG_SECONDS)
    if any(thread.is_alive() for thread in threads):
        return f"hung: still importing after {HANG_SECONDS:.0f} s"
    return errors[0] if errors else ""


def main() -> int:
    # Some 1,300 interpreters' imports: at the lowest priority, so the suite's other worker
    # (and the servers its timing-bound tests talk to) never wait for this one's CPU.
    os.nice(19)
    if sys.argv[1:]:
        OURS[:] = sys.argv[1:]
    pairs: list[list[str]] = json.load(sys.stdin)
    set_up_django()
    for library in libraries_used(sorted({name for pair in pairs for name in pair})):
        try:
            importlib.import_module(library)
        except Exception:
            continue
    assert not any(ours(name) for name in sys.modules), "the parent imported a module of ours"
    failures: dict[str, str] = {}
    running: dict[int, tuple[list[str], int]] = {}
    todo = list(pairs)
    while todo or running:
        while todo and len(running) < AT_ONCE:
            pair = todo.pop()
            read, write = os.pipe()
            running[in_child(lambda pair=pair: race(pair), write)] = (pair, read)
            os.close(write)
        pid, status = os.wait()
        pair, read = running.pop(pid)
        told = b"".join(iter(lambda read=read: os.read(read, 65536), b""))
        os.close(read)
        outcome = json.loads(told) if told else f"the child died (status {status})"
        if outcome:
            failures[" + ".join(pair)] = outcome
    json.dump(failures, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
