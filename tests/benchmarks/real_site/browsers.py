"""The load generator's side of bench_real_traffic: browsers with cookie jars, the mix.

A visitor is a cookie jar: it sends the cookies it came with and keeps those the
site sets (``csrftoken``, ``sessionid``), as a browser would, since what each
configuration can cache depends on exactly those cookies. Requests go over
keep-alive connections spread evenly over the gunicorn workers (asyncio, as
bench_django's load generator).
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "POSTS",
    "SESSIONS",
    "USERS",
    "Mix",
    "OnePage",
    "Visitor",
    "exchange",
    "load",
    "mix_text",
    "visit",
]

POSTS, USERS, SESSIONS = 50, 100, 1000
SIGNED_IN, ANALYTICS, DETAIL = 0.30, 0.60, 0.50
CONSENT = 0.80
"""Visitors who answer the site's cookie banner on their first page (accept or refuse):
its script stores the answer in a ``cookie_consent`` cookie, sent from the next page on."""
Connection = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def mix_text(visitors: int, views: int) -> str:
    """Return the traffic mix in words, as the table is printed with it."""
    return (
        f"Traffic mix: {visitors} visitors browsing at once, {views} page views each, then a"
        " new visitor takes the place (no cookies yet, a new _ga); "
        f"{SIGNED_IN:.0%} signed in (a signed-cookie session of one of {SESSIONS:,} logins"
        f" of {USERS} users); "
        f"{ANALYTICS:.0%} with an analytics cookie (_ga, random per visitor); "
        f"{CONSENT:.0%} answer the cookie banner on their first page, so carry its"
        " cookie_consent (a stamp of the visitor's own, all or necessary) from their"
        " second page on; "
        f"{DETAIL:.0%} of requests to a post's page ({POSTS} posts, each with a comment form"
        " and its CSRF token), the rest to the list; each visitor keeps the cookies the site"
        " sets (csrftoken, sessionid), and keeps pages in its own cache as a browser does"
        " (for their max-age, matching their Vary: Cookie), so a page view it can answer"
        " itself sends no request; seeded, the same page views for each configuration."
    )


@dataclass
class Visitor:
    """One browser: its cookies (those it came with, those the site set) and how many
    more pages it views before it leaves."""

    cookies: dict[str, str] = field(default_factory=dict)
    views_left: int = 0
    consent: str | None = None
    """The banner's answer this visitor gives on its first page, if any: a consent
    manager's cookie carries a stamp of its own per visitor (the proof of consent it
    keeps), so two visitors' answers are two values."""

    kept: dict[str, tuple[str | None, float]] = field(default_factory=dict)
    """The browser's own HTTP cache: per path, the ``Cookie`` header the page was fetched
    with (None: its response did not vary on cookies) and until when it is fresh."""

    def cookie_header(self) -> str:
        return "; ".join(f"{name}={value}" for name, value in self.cookies.items())

    def holds(self, path: str) -> bool:
        """Return whether this browser would show ``path`` from its own cache, asking
        nothing (a link to a page it holds fresh, fetched with the same cookies if the
        page varies on them)."""
        found = self.kept.get(path)
        if found is None or found[1] < time.monotonic():
            return False
        return found[0] is None or found[0] == self.cookie_header()

    def remember(self, path: str, cookie: str, fields: dict[str, str]) -> None:
        """Keep a page as a browser's cache would: for its ``max-age``, unless
        ``no-store`` or ``no-cache`` (``private`` is for exactly this cache)."""
        control = fields.get("cache-control", "").lower()
        age = re.search(r"max-age=(\d+)", control)
        if age is None or "no-store" in control or "no-cache" in control:
            self.kept.pop(path, None)
            return
        varies = "cookie" in fields.get("vary", "").lower()
        self.kept[path] = (cookie if varies else None, time.monotonic() + int(age[1]))

    def request(self, path: str, form: str = "") -> bytes:
        """Return a keep-alive GET of ``path`` (a POST of ``form``) with this visitor's cookies."""
        cookie = self.cookie_header()
        lines = [f"{'POST' if form else 'GET'} {path} HTTP/1.1", "Host: bench"]
        lines += [f"Cookie: {cookie}"] if cookie else []
        if form:
            lines += ["Content-Type: application/x-www-form-urlencoded"]
            lines += [f"Content-Length: {len(form)}"]
        return ("\r\n".join(lines) + "\r\n\r\n" + form).encode()

    def keep(self, set_cookie: str) -> None:
        """Store a ``Set-Cookie`` as a browser would (``Max-Age=0`` deletes the cookie)."""
        first, *attributes = set_cookie.split(";")
        name, _, value = first.strip().partition("=")
        if any(a.strip().lower() == "max-age=0" for a in attributes):
            self.cookies.pop(name, None)
        else:
            self.cookies[name] = value


class Source(Protocol):
    """Where :func:`load` takes its requests from: a :class:`Mix` or a :class:`OnePage`."""

    def next(self) -> tuple[Visitor, str]: ...


class Mix:
    """The stated mix as a stream of requests: :meth:`next` gives a visitor and a path."""

    def __init__(self, seed: int, visitors: int, views: int, sessions: list[str]) -> None:
        self.random, self.views, self.sessions = random.Random(seed), views, sessions
        self.slots = [self.newcomer() for _ in range(visitors)]
        self.turn = 0
        self.from_browser = 0
        """Page views the visitors' browsers answered from their own caches."""

    def newcomer(self) -> Visitor:
        """Return a new visitor: signed in or not, with a ``_ga`` or not, no other cookie
        yet, and whether (and how) it will answer the cookie banner."""
        cookies = {}
        if self.random.random() < SIGNED_IN:
            cookies["sessionid"] = self.random.choice(self.sessions)
        if self.random.random() < ANALYTICS:
            cookies["_ga"] = f"GA1.1.{self.random.getrandbits(31)}.{self.random.getrandbits(31)}"
        answers = self.random.random() < CONSENT
        choice = self.random.choice(("all", "necessary"))
        answer = f"stamp:{self.random.getrandbits(64):x}|{choice}" if answers else None
        return Visitor(cookies, self.views, answer)

    def next(self) -> tuple[Visitor, str]:
        """Return the next request: visitors take turns, one done browsing is replaced; a
        page view the visitor's browser answers from its own cache sends nothing."""
        while True:
            slot = self.turn % len(self.slots)
            self.turn += 1
            if self.slots[slot].views_left == 0:
                self.slots[slot] = self.newcomer()
            visitor = self.slots[slot]
            if visitor.consent and visitor.views_left < self.views:  # answered on page one
                visitor.cookies.setdefault("cookie_consent", visitor.consent)
            visitor.views_left -= 1
            if self.random.random() < DETAIL:
                path = f"/posts/{self.random.randint(1, POSTS)}/"
            else:
                path = "/posts/"
            if not visitor.holds(path):
                return visitor, path
            self.from_browser += 1


class OnePage:
    """One visitor asking for one page again and again (the hole-cost pair)."""

    def __init__(self, visitor: Visitor, path: str) -> None:
        self.visitor, self.path = visitor, path

    def next(self) -> tuple[Visitor, str]:
        """Return the same visitor and page: every request after the first is a hit."""
        return self.visitor, self.path


async def exchange(
    connection: Connection, visitor: Visitor, path: str, form: str = ""
) -> tuple[dict[str, str], bytes]:
    """Send one request for ``visitor`` and keep the cookies it sets, and the page as its
    browser's cache would; return the response's fields (lower-case names, ``status``
    among them) and body."""
    reader, writer = connection
    cookie = visitor.cookie_header()
    writer.write(visitor.request(path, form))
    head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
    status, *lines = head.rstrip("\r\n").split("\r\n")
    fields = {"status": status.split(" ", 2)[1]}
    for line in lines:
        name, _, value = line.partition(":")
        if name.lower() == "set-cookie":
            visitor.keep(value.strip())
        else:
            fields[name.lower()] = value.strip()
    body = await reader.readexactly(int(fields.get("content-length", 0)))
    if not form and fields["status"] == "200":
        visitor.remember(path, cookie, fields)
    return fields, body


def visit(port: int, visitor: Visitor, path: str) -> dict[str, str]:
    """Send one GET on a connection of its own (any worker: a warm-up needs no balance)."""

    async def run() -> dict[str, str]:
        connection = await asyncio.open_connection("127.0.0.1", port)
        try:
            return (await exchange(connection, visitor, path))[0]
        finally:
            connection[1].close()

    return asyncio.run(run())


def outcome(fields: dict[str, str]) -> str:
    """Return how mcache answered (``X-Cache`` and its reason; "" under cache_page)."""
    return " ".join(filter(None, (fields.get("x-cache"), fields.get("x-cache-reason"))))


async def balanced(port: int, count: int, workers: int = 2) -> list[Connection]:
    """Open ``count`` connections spread evenly over the gunicorn workers (bench_django's
    ``_balanced``: left alone, one worker may take every connection while the other idles)."""
    kept: list[Connection] = []
    per_worker: Counter[str] = Counter()
    for _attempt in range(count * 50):
        if len(kept) == count:
            return kept
        connection = await asyncio.open_connection("127.0.0.1", port)
        fields, _ = await exchange(connection, Visitor(), "/ping/")
        if per_worker[fields.get("x-worker", "?")] < count // workers:
            per_worker[fields.get("x-worker", "?")] += 1
            kept.append(connection)
        else:
            connection[1].close()
    raise RuntimeError(f"could not spread {count} connections over {workers} workers")


def load(port: int, source: Source, seconds: float, connections: int) -> tuple[float, Counter[str]]:
    """Send ``source``'s requests over balanced keep-alive connections for ``seconds``;
    return requests/s and the count of each outcome (their sum: the requests)."""
    outcomes: Counter[str] = Counter()

    async def client(connection: Connection, until: float) -> None:
        try:
            while time.monotonic() < until:
                visitor, path = source.next()
                fields, _ = await exchange(connection, visitor, path)
                if fields["status"] != "200":
                    raise RuntimeError(f"{path}: {fields['status']}")
                outcomes[outcome(fields)] += 1
        finally:
            connection[1].close()

    async def run() -> float:
        pool = await balanced(port, connections)
        started = time.monotonic()
        await asyncio.gather(*(client(c, started + seconds) for c in pool))
        return time.monotonic() - started

    elapsed = asyncio.run(run())
    return sum(outcomes.values()) / elapsed, outcomes
