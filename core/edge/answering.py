"""The edge's decision for one request: whom it may answer, with which page and headers.

A request is answered only when nothing about it can make its page someone's own:
a GET or HEAD with no credentials (``Authorization``, a server-set ``REMOTE_USER``,
headers the site names), no session cookie (the adapter's), nothing conditional or
partial (``If-None-Match``, ``If-Modified-Since``, ``Range``: the application's
middleware answers those), at an address whose page the edge has learned
(:mod:`mcache.edge.learning`), and whose entry is fresh: a stale or missing page goes
to the application, which serves it stale and refreshes it once (single flight), as
``@cached_view`` always does, and the edge learns the new page from that response.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from mcache.edge.learning import Learned, Recipe
from mcache.web.page import as_page

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["Answer", "Edge", "Plan"]

FORWARDED_ENVIRON = (
    "HTTP_AUTHORIZATION",
    "HTTP_IF_NONE_MATCH",
    "HTTP_IF_MODIFIED_SINCE",
    "HTTP_RANGE",
)
"""A request carrying one of these goes to the application, whatever its page."""


class Plan(NamedTuple):
    """The page a request would be answered with, if its entry is fresh."""

    recipe: Recipe
    key: tuple[Any, ...]
    head: bool

    @property
    def cache(self) -> Cache:
        return self.recipe.record.cache


class Answer(NamedTuple):
    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Edge:
    """The framework-neutral half of :class:`~mcache.edge.WSGIEdge` and ``ASGIEdge``."""

    def __init__(self, cache: Callable[[], Cache | None], private_headers: Iterable[str]) -> None:
        names = [f"HTTP_{h.upper().replace('-', '_')}" for h in private_headers]
        self.forwarded = (*FORWARDED_ENVIRON, *names)
        self.learned = Learned(cache)

    def plan(self, environ: Mapping[str, Any]) -> Plan | None:
        """Return how the request would be answered here, or None: to the application."""
        method = environ.get("REQUEST_METHOD")
        if method != "GET" and method != "HEAD":
            return None
        if environ.get("REMOTE_USER") or any(n in environ for n in self.forwarded):
            return None
        recipe = self.learned.recipes.get(self.learned.signature(environ))
        if recipe is None:
            return None
        record, header = recipe.record, environ.get("HTTP_COOKIE")
        cookies = record.parse_cookies(header) if header else {}
        if cookies and not record.private_cookies.isdisjoint(cookies):
            return None  # a session: the visitor may be signed in
        return Plan(recipe, recipe.key_for(environ, cookies), method == "HEAD")

    @staticmethod
    def answer(plan: Plan, found: Any) -> Answer | None:
        """Return the answer for a fresh entry ``found`` under the plan's key, or None."""
        made = _made(plan, found)
        return None if made is None else made.sent(plan.head)

    @staticmethod
    def near_answer(plan: Plan) -> Answer | None:
        """Return the answer from the near tier's copy of the plan's page, or None (no near
        tier, no copy, not a hit there, or a page not learned): made once per copy and
        kept with it, so a near hit copies no value, decodes no page and builds no
        header list but an ``Age`` the page had."""
        copy = plan.cache.near_copy(plan.key, plan.recipe.record.tags)
        if copy is None:
            return None
        made = copy.derived
        if (
            type(made) is not Made
            or plan.recipe.sent.get((plan.key, made.built)) is not made.learned
        ):
            made = _made(plan, copy.entry.value)
            if made is None:
                return None
            copy.derived = made
        return made.sent(plan.head)


class Made(NamedTuple):
    """An answer made for one stored page and the headers learned with it."""

    learned: list[tuple[str, str]]
    built: float
    answer: Answer
    aged: bool
    """Whether its headers hold an ``Age``, said anew for each response."""

    def sent(self, head: bool) -> Answer:
        """Return the answer to send now: its ``Age`` brought up to date, no body to a HEAD."""
        answer = self.answer
        if self.aged:
            age = str(max(0, int(time.time() - self.built)))
            headers = [(n, age) if n.lower() == "age" else (n, v) for n, v in answer.headers]
            answer = answer._replace(headers=headers)
        return answer._replace(body=b"") if head else answer


def _made(plan: Plan, found: Any) -> Made | None:
    """Return the answer for the stored page ``found``, if the edge may send it."""
    page = as_page(found, 1)
    if page is None or page[3]:
        return None
    learned = plan.recipe.sent.get((plan.key, page[4]))
    if learned is None:
        return None  # rebuilt since: the application's answer teaches the new one
    header = plan.recipe.record.header
    headers = list(learned)
    if header:
        headers += [(header, "HIT"), ("Cache-Status", "mcache; hit; detail=edge")]
    aged = any(name.lower() == "age" for name, _ in learned)
    return Made(learned, page[4], Answer(page[0], headers, page[2]), aged)
