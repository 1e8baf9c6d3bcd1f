"""The dashboard's buttons: invalidate a tag, refresh a cached function, flush a store.

Each is asked for twice: a form names it, a confirmation page shows what it will do, and
only the confirmation's POST does it (a flush also wants the cache's name typed). What
was done is logged on the ``mcache.dashboard`` logger with the user who did it. The
frameworks add their own targets by turning them into tags first: a Django model, a
SQLAlchemy table.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mcache.cache import Cache

__all__ = ["KINDS", "Action", "ActionError", "perform", "plan"]

logger = logging.getLogger("mcache.dashboard")

KINDS = ("invalidate", "refresh", "flush")


class ActionError(ValueError):
    """A form the dashboard cannot act on, said so the operator can correct it."""


@dataclass(frozen=True)
class Action:
    """One confirmed-to-be operation on one cache."""

    kind: str
    cache: str
    target: str = ""
    """The tag to invalidate, or the function to refresh."""
    arguments: str = ""
    """A refresh's arguments as the form gave them (JSON)."""
    label: str = ""
    """What the operator named, when a framework turned it into ``target`` (a model)."""

    def describe(self) -> str:
        """Say what the action does, in the words of the confirmation page."""
        if self.kind == "invalidate":
            named = f"{self.label} (tag {self.target!r})" if self.label else f"tag {self.target!r}"
            return f"Invalidate {named} on cache {self.cache!r}: every entry carrying it is stale"
        if self.kind == "refresh":
            return f"Refresh {self.target}({self._shown_arguments()}) on cache {self.cache!r} now"
        return (
            f"Flush the whole store of cache {self.cache!r}: every entry on its servers (every"
            " namespace) is gone"
        )

    def fields(self) -> dict[str, str]:
        """Return the form fields that ask for this action again (on the confirmation)."""
        return {
            "kind": self.kind,
            "cache": self.cache,
            "target": self.target,
            "arguments": self.arguments,
            "label": self.label,
        }

    def _shown_arguments(self) -> str:
        args, kwargs = parse_arguments(self.arguments)
        shown = [repr(value) for value in args]
        shown += [f"{name}={value!r}" for name, value in kwargs.items()]
        return ", ".join(shown)


def plan(
    form: Mapping[str, str],
    caches: Mapping[str, Cache],
    tag_of: Callable[[str], tuple[str, str]] | None = None,
) -> Action:
    """Return the action ``form`` asks for, checked against ``caches`` (by name).

    ``tag_of``: what a framework invalidates besides tags (a Django model, a SQLAlchemy
    table), named in the form's ``label``: it returns the tag and the words the page shows,
    or raises :class:`ActionError`. Raises :class:`ActionError` saying what is wrong with
    the form.
    """
    kind, name = form.get("kind", ""), form.get("cache", "")
    if kind not in KINDS:
        raise ActionError(f"unknown action {kind!r}: one of {', '.join(KINDS)}")
    if name not in caches:
        raise ActionError(f"there is no cache {name!r} here (there are {', '.join(caches)})")
    target, arguments = form.get("target", "").strip(), form.get("arguments", "").strip()
    label = form.get("label", "").strip()
    if kind == "invalidate" and not target:
        if not (label and tag_of):
            raise ActionError("name the tag to invalidate")
        target, label = tag_of(label)
    if kind == "refresh":
        functions = caches[name].counts.origin.cached_functions
        if target not in functions:
            known = ", ".join(sorted(functions)) or "none in this process"
            raise ActionError(f"{target!r} is not a @cached function of cache {name!r} ({known})")
        parse_arguments(arguments)
    return Action(kind, name, target, arguments if kind == "refresh" else "", label)


def parse_arguments(text: str) -> tuple[list[Any], dict[str, Any]]:
    """Return a refresh's positional and named arguments from JSON: a list, an object, or
    ``{"args": [...], "kwargs": {...}}``; empty text is no arguments."""
    if not text:
        return [], {}
    try:
        value = json.loads(text)
    except ValueError as error:
        raise ActionError(f'arguments are JSON, e.g. [42] or {{"slug": "a"}}: {error}') from None
    if isinstance(value, list):
        return value, {}
    if isinstance(value, dict) and set(value) <= {"args", "kwargs"} and value:
        args, kwargs = value.get("args", []), value.get("kwargs", {})
        if isinstance(args, list) and isinstance(kwargs, dict):
            return args, kwargs
    if isinstance(value, dict):
        return [], value
    raise ActionError("arguments are a JSON list (positional) or object (named)")


def perform(action: Action, caches: Mapping[str, Cache], user: str, typed: str = "") -> str:
    """Do ``action`` for ``user``; return what was done. A flush needs ``typed`` to be the
    cache's name. Raises :class:`ActionError` when the confirmation does not match."""
    cache = caches[action.cache]
    if action.kind == "flush" and typed.strip() != action.cache:
        raise ActionError(f"type the cache's name ({action.cache}) to flush it")
    if action.kind == "invalidate":
        cache.invalidate(action.target)
        done = f"invalidated {action.label or 'tag ' + repr(action.target)}"
    elif action.kind == "refresh":
        args, kwargs = parse_arguments(action.arguments)
        cache.counts.origin.cached_functions[action.target].refresh(*args, **kwargs)
        done = f"refreshed {action.target}({action._shown_arguments()})"
    else:
        flushed = cache.clear()
        done = "flushed the store" if flushed else "could not flush the store (see the log)"
    logger.warning("dashboard: %s on cache %r, by %s", done, action.cache, user)
    return f"{done} on cache {action.cache!r}"
