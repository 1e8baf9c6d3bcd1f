"""Database transactions of the simulated site, and guarantee 4's checker.

A transactional write (``Config.transactions``) writes its row inside a transaction,
bumps the row's tag, reads the row's entry (or its page) from inside the transaction,
where the builder sees the uncommitted version, waits, then commits (the write, and the
tag bumped again, as an adapter's commit hook does) or rolls back. Each process's cache
is told, as a framework tells it (``Cache.may_store``), that a thread inside a
transaction may not store what it builds. The reads made inside a transaction are
recorded as ``tx-read`` calls: answered from the caller's own uncommitted data, they are
no other checker's business.
"""

from __future__ import annotations

import contextvars
import json
from typing import TYPE_CHECKING, Any

from tests.sim.history import Violation

if TYPE_CHECKING:
    from tests.sim.simulation import Simulation

IN_TRANSACTION: contextvars.ContextVar[dict[int, int] | None] = contextvars.ContextVar(
    "sim_in_transaction", default=None
)
"""The rows the thread's open transaction has written, each with its uncommitted version
(None: no transaction is open)."""


def may_store() -> bool:
    """What a framework answers ``Cache.may_store`` (see django_mcache): no while the
    caller's transaction holds uncommitted writes."""
    return not IN_TRANSACTION.get()


def row_version(committed: int, key: int) -> int:
    """The version of row ``key`` the calling thread sees: its own transaction's, if it has
    written the row, else the committed one."""
    written = IN_TRANSACTION.get()
    return written.get(key, committed) if written else committed


def provenances(data: bytes) -> list[list[Any]]:
    """Every value a store write carried (its entry's wire form, ``["mc1", value, …]``)."""
    found, at, decoder = [], 0, json.JSONDecoder()
    text = data.decode("utf-8", "replace")
    while (at := text.find('"mc1",', at)) >= 0:
        at += len('"mc1",')
        try:
            value, _ = decoder.raw_decode(text, at)
        except ValueError:
            continue
        if isinstance(value, list):
            found.append(value)
    return found


def made_by(value: list[Any], builds: dict[int, Any]) -> int | None:
    """The number of the build among ``builds`` whose work ``value`` carries (a page's
    value carries its own build's and its row's), or None."""
    return next((n for n in value[2:] if n in builds), None)


def uncommitted_never_stored(sim: Simulation) -> list[Violation]:
    """Guarantee 4: what a build inside a transaction made goes to its caller only, never
    to the store and never to another caller."""

    history = sim.history
    uncommitted = {
        b.number: b
        for b in history.builds
        if b.call >= 0 and history.calls[b.call].kind == "tx-read"
    }
    if not uncommitted:
        return []
    found = []
    for at, method, args, result, raised in history.applied:
        if raised or method not in ("set", "add", "cas") or not result or len(args) < 2:
            continue
        if not isinstance(args[1], bytes):
            continue
        for value in provenances(args[1]):
            number = made_by(value, uncommitted)
            if number is not None:
                found.append(
                    Violation(
                        "guarantee 4 (uncommitted data is never stored)",
                        f"{args[0]} was stored at {at:.4f} with build {number}'s value"
                        f" {value!r}, made inside process {uncommitted[number].process}'s"
                        " transaction",
                    )
                )
    for read in history.calls:
        if read.kind != "read" or read.outcome != "ok" or not isinstance(read.value, list):
            continue
        number = made_by(read.value, uncommitted)
        if number is not None:
            found.append(
                Violation(
                    "guarantee 4 (uncommitted data is never stored)",
                    f"call {read.number} (process {read.process}) got build {number}'s value"
                    f" {read.value!r}, made inside another caller's transaction",
                )
            )
    return found
