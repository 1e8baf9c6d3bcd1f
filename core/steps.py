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

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["Steps", "arun_steps", "run_steps"]

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
