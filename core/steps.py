"""Sans-I/O steps: logic written once as a generator that yields the I/O it needs.

A step function does no I/O of its own. It yields an operation (a store
command, a pause) and receives that operation's result, or has its failure
raised where it yielded, so its ``try`` blocks see I/O errors as they would
in plain code. Two drivers run the same steps: :func:`run_steps` performs
each operation by calling, :func:`arun_steps` by awaiting. That is how a sync
and an async store (and the algorithm above them) share one implementation
instead of keeping twin copies in step.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = [
    "Blocking",
    "Steps",
    "StoreCall",
    "aperform",
    "arun_steps",
    "perform",
    "run_steps",
]

T = TypeVar("T")

Steps = Generator[Any, Any, T]
"""Steps that yield operations and return a ``T``."""


def run_steps(steps: Steps[T], perform: Callable[[Any], Any]) -> T:
    """Run ``steps`` to their end, performing each operation with ``perform(operation)``."""
    try:
        operation = next(steps)
        while True:
            try:
                result = perform(operation)
            except Exception as error:
                operation = steps.throw(error)
            else:
                operation = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun_steps(steps: Steps[T], perform: Callable[[Any], Awaitable[Any]]) -> T:
    """Run ``steps`` to their end, awaiting ``perform(operation)`` for each operation."""
    try:
        operation = next(steps)
        while True:
            try:
                result = await perform(operation)
            except Exception as error:
                operation = steps.throw(error)
            else:
                operation = steps.send(result)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


@dataclass(slots=True)
class StoreCall:
    """An operation on a store: ``store.<method>(*args)``, or its async twin's, awaited."""

    store: Any
    method: str
    args: tuple[Any, ...]


@dataclass(slots=True)
class Blocking:
    """Work that still blocks (not yet written as steps): ``function(*args)``.

    The async driver runs it in a worker thread: each one left is a thread hop.
    """

    function: Callable[..., Any]
    args: tuple[Any, ...]


def perform(operation: StoreCall | Blocking) -> Any:
    """Perform an operation of the algorithm's steps by calling (the sync driver's)."""
    if type(operation) is StoreCall:
        return getattr(operation.store, operation.method)(*operation.args)
    return operation.function(*operation.args)


async def aperform(operation: StoreCall | Blocking) -> Any:
    """Perform an operation of the algorithm's steps by awaiting (the async driver's).

    A store with an async twin is awaited on the running loop; one without
    (memcached, tiered, a third party's) is called in a worker thread.
    """
    if type(operation) is StoreCall:
        twin_of = getattr(operation.store, "asynchronous", None)
        twin = None if twin_of is None else twin_of()
        if twin is not None:
            return await getattr(twin, operation.method)(*operation.args)
        blocking = getattr(operation.store, operation.method)
        return await asyncio.to_thread(blocking, *operation.args)
    return await asyncio.to_thread(operation.function, *operation.args)
