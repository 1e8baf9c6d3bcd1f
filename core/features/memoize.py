"""``@cache.cached``: memoize a function through ``get_or_build``.

The key is the function's qualified name plus its arguments *bound to its
signature* with defaults applied, so ``f(1)``, ``f(x=1)`` and ``f()`` with a
default of 1 all share one entry, while ``f(1)`` and ``f("1")`` never do.
Functions made by a factory share a qualified name (``make.<locals>.f``): give
each a ``key_prefix`` or their results mix.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

from mcache.engine.options import CALL_OPTIONS, tag_list
from mcache.errors import ConfigError, NotMemoizable
from mcache.wording import a

if TYPE_CHECKING:
    from mcache.observe.stats import CacheStats

__all__ = ["LateBound", "Memoized", "check_options", "memoize", "refuse_instances_of"]

TagsSpec = Iterable[str] | str | Callable[..., Iterable[str] | str | None] | None
Refusal = Callable[[Any], str | None]
"""Given a result, say why it must not be memoized (a framework's response), or None."""


class MemoizingCache(Protocol):
    """What a memoized function asks of its cache: the public calls of a :class:`mcache.Cache`
    (named by this protocol, so this module need not import the cache that imports it)."""

    counts: CacheStats

    def key(self, *parts: object, **named: object) -> str: ...

    def get_or_build(self, key: str, build: Callable[[], Any], **options: Any) -> Any: ...

    def aget_or_build(
        self, key: str, build: Callable[[], Any], **options: Any
    ) -> Awaitable[Any]: ...

    def refresh(self, key: str, build: Callable[[], Any], **options: Any) -> Any: ...

    def delete(self, key: str) -> bool: ...


class Memoized:
    """A cached function: call it as before, or ``invalidate`` one set of arguments."""

    def __init__(
        self,
        cache: MemoizingCache,
        function: Callable[..., Any],
        ttl: float | None,
        tags: TagsSpec,
        key_prefix: str | None,
        options: dict[str, Any],
        refuse: Refusal | None = None,
    ) -> None:
        """``refuse``: an adapter's check of each result (see :func:`memoize`)."""
        self.cache = cache
        self.refuse = refuse
        self.uncached = function
        self.ttl = ttl
        self.tags = tags
        self.options = options
        self.name = key_prefix or f"{function.__module__}.{function.__qualname__}"
        self.signature = inspect.signature(function)
        self.is_async = inspect.iscoroutinefunction(function)
        functools.update_wrapper(self, function)
        self.__mcache_uncached__ = function  # what a queue worker calls (see mcache.model.jobs)
        if self.is_async:
            _mark_coroutine_function(self)

    def key(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Return the cache key parts for a call with these arguments."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return (self.name, bound.args, bound.kwargs)

    def _tags(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.tags(*args, **kwargs) if callable(self.tags) else self.tags

    def tag_list(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[str]:
        """Return the tags of the entry for these arguments."""
        return tag_list(self._tags(args, kwargs))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        key = self.key(*args, **kwargs)
        tags = self._tags(args, kwargs)
        # a partial of the function, so a queue worker can name it (see mcache.model.jobs)
        build = functools.partial(self.uncached, *args, **kwargs)
        if self.is_async:
            read = self.cache.aget_or_build(key, build, ttl=self.ttl, tags=tags, **self.options)
            return read if self.refuse is None else self._checked_later(key, read)
        result = self.cache.get_or_build(key, build, ttl=self.ttl, tags=tags, **self.options)
        if self.refuse is not None:
            self._check(key, result)
        return result

    def _check(self, key: tuple[Any, ...], result: Any) -> None:
        """Raise :class:`~mcache.errors.NotMemoizable` for a result ``refuse`` names, and
        drop its entry: no caller, this one or the next, is ever handed it."""
        why = self.refuse(result) if self.refuse is not None else None
        if why is not None:
            self.cache.delete(key)
            raise NotMemoizable(f"{self.name} returned {why}")

    async def _checked_later(self, key: tuple[Any, ...], read: Awaitable[Any]) -> Any:
        result = await read
        self._check(key, result)
        return result

    def refresh(self, *args: Any, **kwargs: Any) -> Any:
        """Rebuild the result for these arguments now, whatever its state; return it."""
        build = functools.partial(self.uncached, *args, **kwargs)
        if self.is_async:
            build = functools.partial(_run_coroutine, build)
        key, tags = self.key(*args, **kwargs), self._tags(args, kwargs)
        return self.cache.refresh(key, build, ttl=self.ttl, tags=tags, **self.options)

    def invalidate(self, *args: Any, **kwargs: Any) -> bool:
        """Forget the cached result for these arguments; ``True`` when there was one."""
        return self.cache.delete(self.key(*args, **kwargs))

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        # Used as a method: bind like a function would, keeping invalidate reachable.
        return self if instance is None else _bound(self, instance)


def _bound(function: Memoized | LateBound, instance: Any) -> Any:
    """Return ``function`` bound to ``instance`` as a method, with its ``invalidate``,
    ``uncached`` and ``refresh`` bound too."""
    bound = functools.partial(function.__call__, instance)
    for name in ("invalidate", "uncached", "refresh"):
        setattr(bound, name, functools.partial(getattr(function, name), instance))
    return bound


def _run_coroutine(build: Callable[[], Any]) -> Any:
    return asyncio.run(build())


def _mark_coroutine_function(wrapper: Memoized) -> None:
    """Let frameworks that ask ``iscoroutinefunction`` see an async cached function as async."""
    mark = getattr(inspect, "markcoroutinefunction", None)  # Python 3.12+
    if mark is not None:
        mark(wrapper)
    else:  # what asyncio.iscoroutinefunction (and asgiref before 3.12) looks for
        wrapper._is_coroutine = asyncio.coroutines._is_coroutine  # type: ignore[attr-defined]


def refuse_instances_of(response_class: type, cached_view: str) -> Refusal:
    """Return a refusal (see :func:`memoize`) of results that are ``response_class``'s: a
    framework's response, whose adapter caches pages with ``cached_view``."""

    def refused(result: Any) -> str | None:
        if not isinstance(result, response_class):
            return None
        return (
            f"{a(type(result).__name__)}: memoized, one visitor's response (its Set-Cookie"
            f" included) would be handed to every later caller. Cache a view with {cached_view},"
            " which never stores a response that sets a cookie, or memoize the data the view"
            " renders"
        )

    return refused


def memoize(
    cache: MemoizingCache,
    ttl: float | None,
    tags: TagsSpec,
    key_prefix: str | None,
    options: dict[str, Any],
    refuse: Refusal | None = None,
) -> Callable[[Callable[..., Any]], Memoized]:
    """Return the decorator that ``Cache.cached`` hands out.

    ``refuse``: an adapter's check of each result, so that one visitor's response,
    cookies and all, is never handed to every later caller (:func:`refuse_instances_of`).
    """
    check_options(options)

    def decorate(function: Callable[..., Any]) -> Memoized:
        memoized = Memoized(cache, function, ttl, tags, key_prefix, options, refuse)
        origin = cache.counts.origin  # its entries are labelled by the function's name
        origin.add_function(origin.readable(cache.key(memoized.name, ())), memoized)
        return memoized

    return decorate


def tags_with(tags: TagsSpec, extra: Callable[[], Iterable[str]]) -> Callable[..., list[str]]:
    """A memoized function's tags: its own (names, or a callable of its arguments) and
    ``extra()`` (the tags of the models it depends on), for a decorator that takes both."""

    def all_tags(*args: Any, **kwargs: Any) -> list[str]:
        named = tags(*args, **kwargs) if callable(tags) else tags
        return [*([named] if isinstance(named, str) else (named or ())), *extra()]

    return all_tags


def check_options(options: dict[str, Any]) -> None:
    """Refuse a ``cached()`` option that is not one, where the decorator is written."""
    allowed = set(CALL_OPTIONS) - {"ttl"}
    unknown = set(options) - allowed
    if unknown:
        raise ConfigError(
            f"unknown option(s) for cached(): {', '.join(sorted(unknown))};"
            f" valid: ttl, tags, key_prefix, {', '.join(sorted(allowed))}"
        )


class LateBound:
    """A cached function whose cache is found at each call, not at decoration.

    A framework's cache exists only once its app or settings do, and may differ
    from call to call (Flask: the current app's; Django: the alias's cache of
    this process, rebuilt after a fork). Each cache gets its own
    :class:`Memoized`, made at its first call.
    """

    def __init__(
        self,
        function: Callable[..., Any],
        current_cache: Callable[[], MemoizingCache],
        ttl: float | None,
        tags: TagsSpec,
        key_prefix: str | None,
        options: dict[str, Any],
        refuse: Refusal | None = None,
    ) -> None:
        check_options(options)
        self.__wrapped__ = function
        self.__mcache_uncached__ = function  # what a queue worker calls (see mcache.model.jobs)
        self.__name__ = getattr(function, "__name__", "cached")
        self.__doc__ = function.__doc__
        self._current_cache = current_cache
        self._settings = (ttl, tags, key_prefix, options, refuse)
        self._memoized: dict[int, Memoized] = {}

    def for_cache(self) -> Memoized:
        """Return the cached function on the cache current now."""
        cache = self._current_cache()
        found = self._memoized.get(id(cache))
        if found is None:
            ttl, tags, key_prefix, options, refuse = self._settings
            found = memoize(cache, ttl, tags, key_prefix, options, refuse)(self.__wrapped__)
            self._memoized[id(cache)] = found
        return found

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.for_cache()(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        """Bind to an instance, so methods can be cached (the instance is an argument)."""
        return self if obj is None else _bound(self, obj)

    def invalidate(self, *args: Any, **kwargs: Any) -> Any:
        return self.for_cache().invalidate(*args, **kwargs)

    def uncached(self, *args: Any, **kwargs: Any) -> Any:
        return self.__wrapped__(*args, **kwargs)

    def refresh(self, *args: Any, **kwargs: Any) -> Any:
        """Rebuild the result for these arguments now (see ``Memoized.refresh``)."""
        return self.for_cache().refresh(*args, **kwargs)
