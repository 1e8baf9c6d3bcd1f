"""Sans-I/O steps: logic written once as a generator that yields the I/O it needs.

A step function does no I/O of its own. It yields an operation (a store
command, a pause, a call of the caller's builder) and receives that
operation's result, or has its failure raised where it yielded, so its
``try``/``finally`` blocks see I/O errors, and cancellations, as they would in
plain code. Two drivers run the same steps: :func:`run_steps` with
:func:`perform` (each operation's ``run``: a call), :func:`arun_steps` with
:func:`aperform` (its ``arun``: an await). That is how the sync and the async
``get_or_build`` (and the stores below them) share one implementation instead
of keeping twin copies in step.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import os
import threading
import time
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

__all__ = [
    "Blocking",
    "CallBuilder",
    "Operation",
    "Pause",
    "Release",
    "Steps",
    "StoreCall",
    "Wait",
    "Win",
    "aperform",
    "arun_steps",
    "one",
    "perform",
    "run_steps",
    "settled",
]

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""Steps that yield operations and return a ``T``."""


def run_steps(steps: Steps[T], perform: Callable[[Any], Any]) -> T:
    """Run ``steps`` to their end, performing each operation with ``perform(operation)``.

    Whatever an operation raises, an interrupt included, is raised in the steps
    where they yielded it, so their ``finally`` blocks run (and may yield the
    operations that clean up) before it goes on up.
    """
    try:
        operation = next(steps)
        while True:
            try:
                result = perform(operation)
            except BaseException as error:
                operation = steps.throw(error)
            else:
                operation = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun_steps(steps: Steps[T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """Run ``steps`` to their end, awaiting ``perform(operation)`` for each operation.

    A cancellation is raised in the steps too, so they free what they hold.
    """
    try:
        operation = next(steps)
        while True:
            try:
                result = await perform(operation)
            except BaseException as error:
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


def perform(operation: Operation) -> Any:
    """Perform an operation of the algorithm's steps by calling (the sync driver's)."""
    return operation.run()


def aperform(operation: Operation) -> Awaitable[Any]:
    """Perform an operation of the algorithm's steps by awaiting (the async driver's)."""
    return operation.arun()


@dataclass(slots=True)
class StoreCall:
    """``store.<method>(*args)``; awaited on the store's async twin where it has one.

    A store without a twin (memcached, tiered, a third party's) is called in a
    worker thread by the async driver: each such call is a thread hop.
    """

    store: Any
    method: str
    args: tuple[Any, ...]

    def run(self) -> Any:
        return getattr(self.store, self.method)(*self.args)

    async def arun(self) -> Any:
        twin_of = getattr(self.store, "asynchronous", None)
        twin = None if twin_of is None else twin_of()
        if twin is not None:
            return await getattr(twin, self.method)(*self.args)
        return await asyncio.to_thread(getattr(self.store, self.method), *self.args)


@dataclass(slots=True)
class Blocking:
    """Work that still blocks (not yet written as steps): ``function(*args)``.

    The async driver runs it in a worker thread: each one left is a thread hop.
    """

    function: Callable[..., Any]
    args: tuple[Any, ...]

    def run(self) -> Any:
        return self.function(*self.args)

    async def arun(self) -> Any:
        return await asyncio.to_thread(self.function, *self.args)


@dataclass(slots=True)
class Win:
    """Blocking work that may win something (a lock, a lease): ``function(*args)``.

    If an async caller is cancelled while it runs, the thread goes on (and
    ``asyncio.run`` may close the loop meanwhile), so the thread itself hands
    what it won to ``let_go`` once done: nothing won for a caller that is gone
    stays held, or renewed, for the life of the process.
    """

    function: Callable[..., Any]
    args: tuple[Any, ...]
    let_go: Callable[[Any], None]

    def run(self) -> Any:
        return self.function(*self.args)

    async def arun(self) -> Any:
        outcome = hops().submit(contextvars.copy_context().run, self.function, *self.args)
        try:
            return await asyncio.shield(asyncio.wrap_future(outcome))
        except asyncio.CancelledError:
            let_go = self.let_go

            def when_done(done: Future[Any]) -> None:
                if not done.cancelled() and done.exception() is None and done.result() is not None:
                    let_go(done.result())

            outcome.add_done_callback(when_done)
            raise


@dataclass(slots=True)
class Release:
    """Blocking work that must finish even if the caller is cancelled: ``function(*args)``.

    Handed to a thread at once and shielded: a cancellation that lands during
    it (anyio cancels again and again) must not leave a lock held.
    """

    function: Callable[..., Any]
    args: tuple[Any, ...]

    def run(self) -> Any:
        return self.function(*self.args)

    async def arun(self) -> Any:
        done = hops().submit(self.function, *self.args)
        return await asyncio.shield(asyncio.wrap_future(done))


@dataclass(slots=True)
class Pause:
    """Wait ``seconds`` (polling for what another caller builds): a sleep, or an await."""

    seconds: float

    def run(self) -> None:
        time.sleep(self.seconds)

    async def arun(self) -> None:
        await asyncio.sleep(self.seconds)


class Outcome(Protocol):
    """An in-process outcome others wait for (:class:`mcache.flight.Flight`)."""

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


async def settled(result: Any) -> Any:
    """Return ``result``, awaited first if it is awaitable."""
    return await result if inspect.isawaitable(result) else result


_executor: tuple[int, ThreadPoolExecutor] | None = None
_executor_lock = threading.Lock()


def hops() -> ThreadPoolExecutor:
    """Return this process's pool for the store calls that win or free something.

    Its futures are not tied to any event loop, so a cancellation can never
    drop what they won; the interpreter waits for its threads at exit.
    """
    global _executor, _executor_lock
    if _executor is not None and _executor[0] == os.getpid():
        return _executor[1]
    if _executor is not None:  # a forked child: the parent's lock may have been held at the fork
        _executor_lock = threading.Lock()
    with _executor_lock:
        if _executor is None or _executor[0] != os.getpid():  # a forked child has no threads
            _executor = (os.getpid(), ThreadPoolExecutor(32, "mcache-async"))
        return _executor[1]
