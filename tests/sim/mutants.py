"""Bugs the simulation must find: the simulator's teeth.

Each mutant rewrites one line of one function of the library, from its own source, for
the length of a block; the run then plays seeds until a checker reports a violation.
A mutant no seed catches within its budget is a rule the simulator does not hold.
"""

from __future__ import annotations
import __future__

import importlib
import inspect
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from tests.sim.simulation import Result, run_seed


@dataclass(frozen=True)
class Mutant:
    """``old`` replaced by ``new`` in ``module``'s ``qualname`` (``Class.method``, or a
    function of the module, which its callers reach as ``module.function``)."""

    name: str
    module: str
    qualname: str
    old: str
    new: str
    store: str | None = None
    """The seeds it is played on reach memcached this way (None: as each seed chose)."""
    refresh: str | None = None
    """The seeds it is played on rebuild stale keys this way (None: as each seed chose)."""


CATALOGUE = (
    Mutant(
        "a lock waiter takes a peeked entry without checking its tags",
        "mcache.engine.build",
        "Builder.current_entry_steps",
        "entry is not None and entry.tags_current(declared, others)",
        "entry is not None and entry.is_fresh(self.parts.clock.time_ms())",
    ),
    Mutant(
        "no tag check on a hit",
        "mcache.engine.build",
        "Builder.is_hit",
        "and (entry.tags == declared if not others else entry.tags_current(declared, others))",
        "and True",
    ),
    Mutant(
        "a stale value not marked stale",
        "mcache.engine.build",
        "Builder.serve_stale",
        "STALE_SERVED.set(True)",
        "STALE_SERVED.set(False)",
    ),
    Mutant(
        "a build's entry written with set, not cas against its lease",
        "mcache.engine.write_lease",
        "write_steps",
        "lease.stored = yield StoreCall(store, method, (key, data, lease.token, ttl))",
        'lease.stored = (yield StoreCall(store, "set", (key, data, ttl))) or True',
    ),
    Mutant(
        "the lock taken with set",
        "mcache.engine.lock",
        "Lock.try_acquire_steps",
        'self.held = yield StoreCall(self.store, "add", (self.key, self.token, self.expiry()))',
        'self.held = (yield StoreCall(self.store, "set", (self.key, self.token, self.expiry())))'
        " is None",
    ),
    Mutant(
        "a lost tag recreated by another process at the millisecond alone (no low bits drawn)",
        "mcache.model.tags",
        "Tags._fresh",
        "return max(now, floor) + self.draws.randint(0, (1 << VERSION_BITS) - 1)",
        "return max(now, floor)",
    ),
    Mutant(
        "a lock attempt the store failed taken for a lock found held",
        "mcache.engine.writing",
        "Writer.try_stale_lock_steps",
        "if lock is None and not call.lock_refused:",
        "if lock is None:",
    ),
    Mutant(
        "a cancelled async caller's won lock never let go",
        "mcache.engine.building",
        "Building.let_go",
        "return lambda won: self.writer.let_go(call.key, won, lock)",
        "return None",
    ),
    Mutant(
        "a lock waiter takes an entry stored already stale as fresh",
        "mcache.engine.build",
        "Builder.lead_missing_steps",
        "if current and entry.is_fresh(self.parts.clock.time_ms()):",
        "if current:",
        store="memory",
    ),
    Mutant(
        "a lock waiter served stale by the build it waited on, freeing its lock",
        "mcache.engine.build",
        "Builder.lead_missing_steps",
        "if now - arrived[1] < BUSY_SECONDS:",
        "if False:",
        store="memory",
    ),
    Mutant(
        "a build inside a transaction stored (may_store not asked)",
        "mcache.engine.build",
        "Builder.get_or_build_steps",
        "if not parts.may_store():",
        "if False:",
    ),
    Mutant(
        "a dependency read inside a build not recorded",
        "mcache.engine.building",
        "Building.run_build_steps",
        "call.depends = merged(call.versions, found.versions)",
        "call.depends = dict(call.versions)",
    ),
    Mutant(
        "a stale value read inside a build consumed silently",
        "mcache.engine.building",
        "Building.run_build_steps",
        "call.stale = found.stale",
        "call.stale = False",
    ),
    Mutant(
        "stale_ttl ignored (a stale entry kept until evicted)",
        "mcache.engine.writing",
        "Writer.write_steps",
        "store_ttl = math.ceil(fresh + o.stale_ttl)",
        "store_ttl = 0",
    ),
    Mutant(
        "a rebuild that stores nothing leaves a stale entry the life its lease gave it",
        "mcache.engine.write_lease",
        "abandon_steps",
        "left = own_life_left(lease, now)",
        "left = None",
    ),
    Mutant(
        "a forced refresh's lock taken unshielded (a cancelled caller never lets it go)",
        "mcache.engine.rebuild",
        "Rebuilds.try_lock_steps",
        "lock: Lock | None = yield Shielded(attempt, self.builder.building.let_go(call, None))",
        "lock = yield from attempt",
    ),
    Mutant(
        "a keep-alive takes the token of what replaced its placeholder",
        "mcache.engine.write_lease",
        "keep_steps",
        "return False  # replaced meanwhile",
        "pass  # replaced meanwhile",
    ),
    Mutant(
        "a dead holder's lease on a stale entry never taken over (holder_gone not asked)",
        "mcache.engine.writing",
        "Writer.try_stale_lock_steps",
        "(claim.outcome is None or holder_gone(claim))",
        "(claim.outcome is None)",
    ),
    Mutant(
        "no lock renewal (a renewal sends nothing and reports the lock still held)",
        "mcache.engine.lock",
        "Lock.extend_steps",
        "self.held = yield from self._compare_and_steps(self.expiry(timeout))",
        "self.held = (yield from ()) is None",
    ),
    Mutant(
        "a job delivered twice built twice (its worker extends the handed token, not its own)",
        "mcache.engine.rebuild",
        "Rebuilds.run_job_steps",
        "(yield from lock.take_over_steps(mine))",
        "(yield from lock.extend_steps())",
        refresh="queue",
    ),
    Mutant(
        "a job delivered twice built twice on memcached's lease (no copy claims it)",
        "mcache.engine.server_lease",
        "ServerLease.take_over_steps",
        'if not (yield StoreCall(self.store, "add", claim)):',
        'if not (yield StoreCall(self.store, "add", claim)) and False:',
        store="meta",
        refresh="queue",
    ),
    Mutant(
        "a copy of a job delivered a lock's life later claims memcached's lease again",
        "mcache.engine.server_lease",
        "ServerLease.extend_steps",
        "if self.claim is not None:",
        "if False:",
        store="meta",
        refresh="queue",
    ),
    Mutant(
        "a hand-off the store failed takes the lock back, and nobody rebuilds",
        "mcache.engine.rebuild",
        "Rebuild.hand_off_steps",
        "yield from self.give_up_steps()",
        "yield from self.take_back_steps()",
        refresh="queue",
    ),
    Mutant(
        "a queue worker holding a server lease skips the tag read (its entry records none)",
        "mcache.engine.building",
        "Building.build_and_store_steps",
        "not (lease.native and call.claim)",
        "not lease.native",
        store="meta",
        refresh="queue",
    ),
    Mutant(
        "the refresher's circuit reopened by a send under way when it opened",
        "mcache.refreshers.queued",
        "QueueRefresher._open_circuit",
        "if self.broken() or started < self._opened_at:",
        "if self.broken():",
        refresh="queue",
    ),
    Mutant(
        "a stale entry's rebuild another reader claimed in its read taken as won (Redis)",
        "mcache.engine.writing",
        "Writer.try_stale_lock_steps",
        "if claim is not None and claim.outcome:",
        "if claim is not None and claim.outcome is not None:",
        store="redis",
    ),
    Mutant(
        "a lock claimed in a read never renewed (Redis)",
        "mcache.engine.writing",
        "Writer.try_stale_lock_steps",
        "return self._held(Lock(self.parts.shared, claim.lock_key, timeout, token=claim.token))",
        "return Lock(self.parts.shared, claim.lock_key, timeout, token=claim.token)",
        store="redis",
    ),
    Mutant(
        "a tag's copy read back from the replica after its add failed (Redis, replica reads)",
        "mcache.model.tags",
        "Tags._recreate_steps",
        'found, _ = yield StoreCall(store, "gets", (key,))',
        'found = yield StoreCall(store, "get", (key,))',
        store="redis",
    ),
    Mutant(
        "a forced refresh that waited for the lock records the versions read before its wait",
        "mcache.engine.rebuild",
        "Rebuilds.force_steps",
        "value = yield from self.builder.build_after_wait_steps(call)",
        "value = yield from self.builder.building.build_and_store_steps(call, None, None)",
    ),
    Mutant(
        "locks renewed too late (after their timeout)",
        "mcache.engine.renewal",
        "LockRenewer.interval",
        "return max(lock.timeout / 3, 0.1)",
        "return lock.timeout * 2.0",
    ),
)


@contextmanager
def applied(mutant: Mutant) -> Iterator[None]:
    """Run the block with ``mutant``'s function in place of the library's."""
    module = importlib.import_module(mutant.module)
    owner_name, _, name = mutant.qualname.rpartition(".")
    owner = getattr(module, owner_name) if owner_name else module
    original = owner.__dict__[name]
    function = original.__func__ if isinstance(original, staticmethod) else original
    source = textwrap.dedent(inspect.getsource(function))
    if source.count(mutant.old) != 1:
        raise LookupError(f"{mutant.name}: {mutant.old!r} is not once in {mutant.qualname}")
    flags = __future__.annotations.compiler_flag
    code = compile(
        source.replace(mutant.old, mutant.new),
        f"<mutant: {mutant.name}>",
        "exec",
        flags=flags,
        dont_inherit=True,
    )
    namespace: dict[str, object] = {}
    exec(code, module.__dict__, namespace)
    setattr(owner, name, namespace[name])
    try:
        yield
    finally:
        setattr(owner, name, original)


def played(mutant: Mutant, seed: int) -> Result:
    """Run ``seed`` as the mutant's seeds are played: with its store and its refresher,
    where it names them (a bug of the task queue's, say, is looked for in runs with one)."""
    return run_seed(seed, store=mutant.store, refresh=mutant.refresh)
