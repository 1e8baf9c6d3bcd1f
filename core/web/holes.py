"""Holes: the per-visitor parts of a shared cached page, filled for each response.

A page is rendered once with a placeholder where each hole goes, and stored with
the list of its holes; every response, the one that built the page included, fills
each placeholder for its own request. A placeholder holds a nonce drawn for that
render (128 random bits), so content cannot contain one by chance or by design, and
a response that still holds one after filling is refused rather than sent.

A hole is named by a *recipe*, a short string an adapter knows how to fill
(``"csrf"``, a template's hole, …): recipes are stored, so they must read the same
in every process. The collector of the render under way is a context variable,
so a placeholder is only handed out inside a cached page's build, on any driver.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Final

from mcache.memo import BoundedMemo
from mcache.randomness import system_random

__all__ = [
    "FRAGMENT",
    "HoleCollector",
    "LeftoverHole",
    "check_uncompressed",
    "collecting",
    "current_collector",
    "fill_holes",
    "holes_in_headers",
    "suspended",
]

_PREFIX = "__mcache_hole_"


class LeftoverHole(RuntimeError):
    """A response still held a hole's placeholder after filling: it is never sent."""


class HoleCollector:
    """The holes of one render: its nonce and, in order, each placeholder's recipe."""

    __slots__ = ("nonce", "recipes")

    def __init__(self) -> None:
        self.nonce = system_random.token(16)
        self.recipes: list[str] = []

    def placeholder(self, recipe: str) -> str:
        """Return the placeholder standing for a hole ``recipe`` fills at response time
        (the same one for the same recipe: it fills the same for one request)."""
        if recipe not in self.recipes:
            self.recipes.append(recipe)
        return f"{_PREFIX}{self.nonce}_{self.recipes.index(recipe)}__"

    def stored(self) -> list[str]:
        """Return what the page stores about its holes: ``[]``, or the nonce and recipes."""
        return [self.nonce, *self.recipes] if self.recipes else []


FRAGMENT: Final = HoleCollector()
"""What :func:`suspended` collects into: adapters refuse a hole there, rather than place one."""
_CURRENT: ContextVar[HoleCollector | None] = ContextVar("mcache_holes", default=None)


def current_collector() -> HoleCollector | None:
    """Return the collector of the cached page being rendered here, or None."""
    return _CURRENT.get()


@contextlib.contextmanager
def collecting(collector: HoleCollector | None) -> Iterator[None]:
    """Hand out placeholders from ``collector`` (None: none) within the block."""
    token = _CURRENT.set(collector)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def suspended() -> contextlib.AbstractContextManager[None]:
    """Render a cached fragment in the block: it is stored on its own and shared, so it
    must hold no placeholder of the page around it (collected into :data:`FRAGMENT`)."""
    return collecting(FRAGMENT)


def check_uncompressed(headers: Iterable[tuple[str, str]]) -> None:
    """Refuse a page with holes whose body is compressed: no placeholder can be found
    in it, nor a leftover one, so it would go out unfilled."""
    for name, value in headers:
        if name.lower() == "content-encoding" and value.strip().lower() != "identity":
            raise LeftoverHole(
                f"a page with holes was compressed ({value}) before it was cached: compress"
                " outside the cache (Django's GZipMiddleware), not with gzip_page under"
                " cached_view"
            )


def holes_in_headers(
    headers: Iterable[tuple[str, str]], collector: HoleCollector | Sequence[str]
) -> bool:
    """Return whether a header value holds a placeholder of the render ``collector``
    collected (or of a stored hole list)."""
    nonce = collector.nonce if isinstance(collector, HoleCollector) else collector[0]
    return any(f"{_PREFIX}{nonce}" in value for _, value in headers)


def fill_holes(body: bytes, holes: Sequence[str], fill: Callable[[str], str]) -> bytes:
    """Return ``body`` with each placeholder of ``holes`` (a page's stored hole list)
    replaced by ``fill(recipe)``, encoded as UTF-8.

    Raises :class:`LeftoverHole` if a placeholder of this page's nonce is left, as a
    placeholder a filter changed would be (cut within its first 8 hex digits, it is
    no longer told from text, and holds nothing of any visitor's).
    """
    if not holes:
        return body
    nonce, recipes = holes[0], holes[1:]
    marker, leftover = _patterns(nonce)
    filled: dict[int, bytes] = {}

    def replace(match: re.Match[bytes]) -> bytes:
        index = int(match[1])
        if index >= len(recipes):
            raise LeftoverHole(f"a placeholder names hole {index} of {len(recipes)}")
        if index not in filled:
            filled[index] = fill(recipes[index]).encode()
        return filled[index]

    result = marker.sub(replace, body)
    if leftover.search(result):
        raise LeftoverHole("a hole's placeholder was changed by the page and cannot be filled")
    return result


_PATTERNS: BoundedMemo[str, tuple[re.Pattern[bytes], re.Pattern[bytes]]] = BoundedMemo(1024)
"""Each stored page's placeholder pattern and leftover check, by the page's nonce."""


def _patterns(nonce: str) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """Return a page's placeholder pattern and its leftover check, compiled once per page
    (each hit of the page fills with them)."""
    found = _PATTERNS.get(nonce)
    if found is None:
        placeholder = re.compile(rf"{_PREFIX}{nonce}_(\d+)__".encode())
        leftover = re.compile(rf"(?i){_PREFIX}{nonce[:8]}".encode())
        found = _PATTERNS.remember(nonce, (placeholder, leftover))
    return found
