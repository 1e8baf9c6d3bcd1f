"""Sans-I/O steps: logic written once as a generator that yields the I/O it needs.

A step function yields each operation it needs (a store command, a pause, a call
of the builder) and receives its result, or has its failure raised where it
yielded, so its ``try``/``finally`` blocks see I/O errors and cancellations as
plain code would. :func:`run_steps` calls each operation, :func:`arun_steps`
awaits it: the sync and async code paths share one implementation
(docs/explanation/architecture.md).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from operator import methodcaller
from typing import Any, Protocol, TypeVar

from mcache.sansio.call_record import CURRENT_CALL

__all__ = [
    "BlockingOrAwaited",
    "CallBuilder",
    "Operation",
    "Pause",
    "Shielded",
    "Steps",
    "StoreCall",
    "Wait",
    "aperform",
    "arun_steps",
    "one",
    "perform",
    "run_steps",
    "settled",
    "twin_of",
]

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""Steps that yield operations and return a ``T``."""


_START = object()


def run_steps(steps: Steps[T], perform: Callable[[Any], Any], resume: Any = _START) -> T:
    """Run ``steps`` to their end, performing each operation with ``perform(operation)``.

    Whatever an operation raises, an interrupt included, is raised in the steps
    where they yielded it, so their ``finally`` blocks run (and may yield the
    operations that clean up) before it goes on up. ``resume``: steps already
    started, waiting for this operation's result (see :class:`Shielded`).
    """
    try:
        operation = next(steps) if resume is _START else resume
        while True:
            try:
                result = perform(operation)
            except BaseException as error:
                operation = steps.throw(error)
            else:
                operation = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun_steps(
    steps: Steps[T], perform: Callable[[Any], Awaitable[Any]], finish: bool = False
) -> T:
    """Run ``steps`` to their end, awaiting ``perform(operation)`` for each operation.

    A cancellation is raised in the steps too, so they free what they hold;
    with ``finish`` it is not, and the steps are finished by calling instead
    (see :func:`_finish`).
    """
    try:
        operation = next(steps)
        while True:
            try:
                result = await perform(operation)
            except BaseException as error:
                if finish and isinstance(error, asyncio.CancelledError):
                    return run_steps(steps, _call, resume=operation)
                operation = steps.throw(error)
            else:
                operation = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def one(operation: Any) -> Steps[Any]:
    """Steps that yield ``operation`` and return its result."""
    return (yield operation)


class Operation(Protocol):
    """What the algorithm's steps yield: I/O the sync driver calls and the async one awaits."""

    def run(self) -> Any: ...

    def arun(self) -> Awaitable[Any]: ...


perform: Callable[[Operation], Any] = methodcaller("run")
"""Perform an operation of the algorithm's steps by calling (the sync driver's):
``operation.run()``, with no Python frame of its own (it runs on every hit)."""

_call = perform  # for arun_steps, whose own ``perform`` is the async one

aperform: Callable[[Operation], Awaitable[Any]] = methodcaller("arun")
"""Perform an operation by awaiting ``operation.arun()`` (the async driver's)."""


def twin_of(store: Any) -> Any:
    """Return ``store``'s async twin, or None for a store without one (it is called in a
    thread): what its declared traits say (``async_twin``), not a probe for a method."""
    return store.asynchronous() if store.traits.async_twin else None


@dataclass(slots=True)
class StoreCall:
    """``store.<method>(*args)``; awaited on the store's async twin where it has one,
    else called in a worker thread by the async driver (each such call a thread hop)."""

    store: Any
    method: str
    args: tuple[Any, ...]

    def run(self) -> Any:
        record = CURRENT_CALL.get()
        if record is not None:  # an observer counts this call's round trips
            record.round_trips += 1
        return getattr(self.store, self.method)(*self.args)

    async def arun(self) -> Any:
        record = CURRENT_CALL.get()
        if record is not None:
            record.round_trips += 1
        twin = twin_of(self.store)
        if twin is not None:
            return await getattr(twin, self.method)(*self.args)
        return await asyncio.to_thread(getattr(self.store, self.method), *self.args)


@dataclass(slots=True)
class Shielded:
    """Steps run as one operation that a cancellation cannot cut short.

    For what wins something (a lock, a lease) or frees it. The async driver runs
    them as a shielded task of their own: a caller cancelled meanwhile (anyio cancels
    again and again) leaves them to finish, and what they won goes to ``let_go``'s
    steps to be freed. If the loop closes first, a won lock frees within its timeout.
    """

    steps: Steps[Any]
    let_go: Callable[[Any], Steps[Any]] | None = None

    def run(self) -> Any:
        return run_steps(self.steps, perform)

    async def arun(self) -> Any:
        task = asyncio.ensure_future(_finish(self.steps))
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            let_go = self.let_go
            if let_go is not None:

                def when_done(done: asyncio.Future[Any]) -> None:
                    if not done.cancelled() and done.exception() is None:
                        won = done.result()
                        if won is not None:
                            _background(_finish(let_go(won)))

                task.add_done_callback(when_done)
            raise


def _finish(steps: Steps[T]) -> Awaitable[T]:
    """Run ``steps`` on the loop; if the loop cancels them (it is closing), finish by calling.

    Only the loop's shutdown cancels a shielded task. The sync driver then does the
    operation in flight again, and the rest, so a release is never cut off half-way;
    repeating it is harmless (a ``cas`` at worst finds its work done; an ``add`` that
    had landed is taken for lost, and its lock frees within its timeout).
    """
    return arun_steps(steps, aperform, finish=True)


_freeing: set[asyncio.Future[Any]] = set()


def _background(work: Awaitable[Any]) -> None:
    """Run ``work`` on the running loop, held until done (a loop keeps tasks weakly)."""
    task = asyncio.ensure_future(work)
    _freeing.add(task)
    task.add_done_callback(_freeing.discard)


@dataclass(slots=True)
class Pause:
    """Wait ``seconds`` (polling for what another caller builds): a sleep, or an await."""

    seconds: float

    def run(self) -> None:
        time.sleep(self.seconds)

    async def arun(self) -> None:
        await asyncio.sleep(self.seconds)


class Outcome(Protocol):
    """An in-process outcome others wait for (:class:`mcache.engine.flight.Flight`)."""

    def wait(self, timeout: float) -> bool: ...

    def await_for(self, timeout: float) -> Awaitable[bool]: ...


@dataclass(slots=True)
class Wait:
    """Wait up to ``timeout`` for ``flight``'s outcome; the result says whether it came."""

    flight: Outcome
    timeout: float

    def run(self) -> bool:
        return self.flight.wait(self.timeout)

    def arun(self) -> Awaitable[bool]:
        return self.flight.await_for(self.timeout)


@dataclass(slots=True)
class CallBuilder:
    """Call the caller's builder: ``build()``; the async driver awaits what it returns
    when that is awaitable (a coroutine builder), and takes it as it is otherwise."""

    build: Callable[[], Any]

    def run(self) -> Any:
        return self.build()

    async def arun(self) -> Any:
        return await settled(self.build())


@dataclass(slots=True)
class BlockingOrAwaited:
    """A call written twice by the library it calls (``get``/``aget``): the sync driver
    calls ``blocking()``, the async one awaits ``awaited()``."""

    blocking: Callable[[], Any]
    awaited: Callable[[], Awaitable[Any]]

    def run(self) -> Any:
        return self.blocking()

    def arun(self) -> Awaitable[Any]:
        return self.awaited()


async def settled(result: Any) -> Any:
    """Return ``result``, awaited first if it is awaitable."""
    return await result if inspect.isawaitable(result) else result
