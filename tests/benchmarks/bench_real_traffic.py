"""Pages real sites can cache: holes and declared cookies against ``cache_page``, on real traffic.

    python -m tests.benchmarks.bench_real_traffic [--seconds 6] [--rounds 3] [--visitors 200]
        [--views 4] [--connections 16] [--markdown] [--figures PATH]

A small blog (``tests/benchmarks/real_site``: a post list ``/posts/`` of the 20 newest
posts with their comment counts, post pages ``/posts/<n>/`` listing the post's comments
with their authors (0 to 12, 6 on average) above a comment form holding
``{% csrf_token %}``, and a header greeting the signed-in user, "Hello, <username>" or
"Sign in") served by gunicorn
(2 workers, gthread, 4 threads) in three configurations, each a gunicorn of its own
on the same memcached, SQLite file and middleware (Session with signed-cookie
sessions, CSRF, Auth):

1. **mcache, holes + cookies=[]**: ``@cached_view(60, hole_context={}, cookies=[])``,
   the greeting in ``{% nocache %}``, the ``django_mcache.holes.holes`` context
   processor on (the CSRF token is a hole);
2. **mcache, no holes**: ``@cached_view(60)``, the greeting in the page, no holes
   processor: signed-in visitors (``signed-in``) and form pages (``csrf``) are bypassed;
3. **cache_page**: Django's ``cache_page(60)`` on ``PyMemcacheCache``, with
   ``vary_on_cookie`` (and ``csrf_protect`` on the form page), as Django's docs say for
   pages that read the session or hold a token: without them it would store one
   visitor's greeting and token for everyone.

**The traffic mix** (printed with the table): 200 visitors browsing at once, each
for 4 page views, after which a new visitor takes its place (a new browser: no
cookies yet, a new ``_ga``), since on a real site most visits are a few pages and a
visitor making hundreds of requests would be a crawler; 30% of visitors signed in (the
signed-cookie session of one of 1,000 logins made in setup, for 100 users: each browser
that signs in has a session of its own); 60%
carry an analytics cookie (``_ga``, random per visitor), so ~60% of requests; 80% answer
the site's cookie banner on their first page (accept all, or only what is necessary),
whose script keeps the answer, with a stamp of the visitor's own as consent managers
keep, in a ``cookie_consent`` cookie they send from their second page on, as EU sites
ask every visitor; half of
the requests go to a post's page (one of 50, uniformly), the rest to the list; each
visitor keeps the cookies the site sets (``csrftoken``, ``sessionid``) as a browser
would, and keeps pages in its own HTTP cache as a browser does: for their ``max-age``
(``private`` included, not ``no-store`` or ``no-cache``), and, for a page that varies
on ``Cookie``, only while it sends the same cookies; a page view the browser can answer
itself sends no request (a visitor seeing the list twice in a visit, say), under every
configuration alike. Visitors take turns; page views are drawn from a generator seeded
with the round's number, so each configuration gets the same page views in a round
(which of them reach the server depends on the headers each configuration sends).

Figures, all from one run, configurations in alternating rounds (ABC CBA …),
nothing pinned to a CPU:

- **hit ratio** = 1 − renders ÷ requests, renders counted in the views themselves
  (a raw memcached ``incr``, the same for all three), misses at a cold start included;
- **requests/s** on the mix (16 keep-alive connections spread evenly over the two
  workers, as in bench_django; the load generator shares the machine);
- **a hit with one hole vs a plain hit**: the same page and decorator with its only
  hole the CSRF token, with a ``{% nocache %}`` welcome line instead (the hole's own
  cost, without Django's work for a token), and with neither, all pure hits for an
  anonymous visitor who has a CSRF cookie, in alternating rounds (twice as many, half
  as long); cost = plain requests/s ÷ hole requests/s.

Each ratio is the median of the rounds' own ratios (the requests/s shown beside it
are medians of their own), as rounds side by side share what else the machine does.

Before it is measured, each configuration must give each visitor their own greeting
and a form token their own cookie passes a POST with, on pages built for someone
else too: a configuration fast because it shows one visitor's page to the next is
not measured.

Targets: mcache with holes hits ≥ 90% where cache_page gets ≤ 10%;
a hit with one hole costs ≤ 1.2× a plain hit; ≥ 3× cache_page's requests/s on the
mix. A missed target is a finding, printed as such. Starts its own memcached and
gunicorns on free loopback ports and stops them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from pymemcache.client.base import Client

from tests.benchmarks.common import Figure, arguments, gunicorn, report, table
from tests.benchmarks.real_site.browsers import (
    POSTS,
    SESSIONS,
    USERS,
    Mix,
    OnePage,
    Visitor,
    exchange,
    load,
    mix_text,
    visit,
)
from tests.servers import memcached_process

ROOT = Path(__file__).resolve().parents[2]
SITE = "tests.benchmarks.real_site"
SITES = {
    "holes": "mcache, holes + cookies=[]",
    "plain": "mcache, no holes",
    "django": "cache_page (PyMemcacheCache)",
}


# -- the site: setup, servers, render counters -------------------------------------------------


def prepare(env: dict[str, str]) -> list[str]:
    """Create the tables, posts and users in the SQLite file; return the ``sessionid`` of
    each of ``SESSIONS`` logins, login ``n`` of user ``n % USERS`` (signed cookies: the
    servers share the SECRET_KEY)."""
    os.environ.update(env)
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.test import Client as TestClient

    from tests.benchmarks.real_site.models import Comment, Post

    call_command("migrate", run_syncdb=True, verbosity=0)
    paragraph = "Caching a page that greets its reader and holds a form is the hard part. " * 5
    Post.objects.bulk_create(
        Post(title=f"Post {n}: pages real sites can cache", body=f"<p>{paragraph}</p>" * 6)
        for n in range(1, POSTS + 1)
    )
    User.objects.bulk_create(User(username=f"reader{n}", password="!") for n in range(USERS))
    readers = list(User.objects.order_by("pk"))
    Comment.objects.bulk_create(  # 0 to 12 under each post (6 on average), by various readers
        Comment(post=post, author=readers[(post.pk + i) % USERS], text=f"Comment {i}.\n" * 3)
        for post in Post.objects.all()
        for i in range(post.pk * 7 % 13)
    )
    sessions = []
    for login in range(SESSIONS):  # login n signs in user n % USERS
        browser = TestClient()
        browser.force_login(readers[login % USERS])
        session = browser.session
        session["login"] = login  # each login a session of its own, as a browser's is
        session.save()
        sessions.append(session.session_key)
    return sessions


def start(site: str, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    """Serve one configuration with gunicorn; return the process and its port."""
    return gunicorn(f"{SITE}.wsgi", {**env, "MCACHE_BENCH_SITE": site}, str(ROOT), ("/ping/",))


def renders(counter: Client, site: str) -> int:
    """Return how many times a view of ``site`` has rendered (see real_site/views.py)."""
    return int(counter.get(f"real_site:renders:{site}") or 0)


@dataclass
class Tally:
    """One configuration's rounds on the mix."""

    rps: list[float] = field(default_factory=list)
    renders: int = 0
    from_browser: int = 0
    """Page views the visitors' browsers answered from their own caches (no request)."""
    outcomes: Counter[str] = field(default_factory=Counter)

    @property
    def requests(self) -> int:
        """Every request answered, hit or not (the load generator's count)."""
        return sum(self.outcomes.values())

    @property
    def hit_ratio(self) -> float:
        """1 − renders ÷ requests: a request the view did not render for was a hit."""
        return 1 - self.renders / self.requests

    def answered(self) -> str:
        """Return how mcache answered (X-Cache and reason), most frequent first."""
        if "" in self.outcomes:
            return "no X-Cache (renders are the only measure)"
        common = self.outcomes.most_common(4)
        return ", ".join(f"{name} {count / self.requests:.1%}" for name, count in common)


def on_the_mix(
    ports: dict[str, int], counter: Client, args: argparse.Namespace, sessions: list[str]
) -> dict[str, Tally]:
    """Run the mix against each configuration in alternating rounds; return their tallies."""
    tallies = {site: Tally() for site in SITES}
    order = list(SITES)
    for number in range(args.rounds):
        for site in order:
            before = renders(counter, site)
            mix = Mix(number, args.visitors, args.views, sessions)
            rps, outcomes = load(ports[site], mix, args.seconds, args.connections)
            tallies[site].renders += renders(counter, site) - before
            tallies[site].rps.append(rps)
            tallies[site].from_browser += mix.from_browser
            tallies[site].outcomes += outcomes
        order.reverse()
    return tallies


def hole_cost(port: int, args: argparse.Namespace) -> dict[str, tuple[list[float], Counter[str]]]:
    """Return requests/s of the page whose one hole is the CSRF token, of the same page
    with one ``{% nocache %}`` hole instead, and of the page without either, with how each
    was answered (all should be hits): twice as many rounds as the mix, half as long,
    alternating, so the machine's drift falls on every page alike."""
    visitor = Visitor()  # anonymous; its first response gives it a CSRF cookie, kept after
    pages = {path: OnePage(visitor, path) for path in ("/token/", "/hole/", "/no-token/")}
    for path in pages:
        visit(port, visitor, path)  # builds the page (and gives the visitor its CSRF cookie)
    results: dict[str, tuple[list[float], Counter[str]]] = {p: ([], Counter()) for p in pages}
    order = list(pages)
    for _round in range(2 * args.rounds):
        for path in order:
            rps, outcomes = load(port, pages[path], args.seconds / 2, args.connections)
            results[path][0].append(rps)
            results[path][1].update(outcomes)
        order.reverse()
    return results


def check(port: int, site: str, sessions: list[str]) -> None:
    """Fail unless every visitor gets their own greeting, and a form token their own cookie
    accepts, on a page built for them or for someone else: a configuration fast because it
    shows one visitor's page to the next would not be worth measuring."""
    token = re.compile(rb'name="csrfmiddlewaretoken" value="([^"]+)"')

    async def run() -> None:
        connection = await asyncio.open_connection("127.0.0.1", port)
        ann, bo, anonymous = Visitor({"sessionid": sessions[1]}), Visitor(), Visitor()
        bo.cookies["sessionid"] = sessions[2]
        greetings = [(ann, b"Hello, reader1"), (anonymous, b"Sign in"), (bo, b"Hello, reader2")]
        try:
            for path in ("/posts/", "/posts/7/", "/posts/", "/posts/7/"):
                for visitor, greeting in greetings:
                    fields, body = await exchange(connection, visitor, path)
                    if greeting not in body or body.count(b"Hello, ") > (b"Hello" in greeting):
                        raise AssertionError(f"{site}{path}: not {greeting!r}: {fields}")
                    found = token.search(body)
                    if found is None:
                        continue
                    form = f"csrfmiddlewaretoken={found[1].decode()}&text=hi"
                    posted, _ = await exchange(connection, visitor, path, form)
                    if posted["status"] != "200":
                        raise AssertionError(f"{site}{path}: POST refused {posted['status']}")
        finally:
            connection[1].close()

    asyncio.run(run())


# -- the run ------------------------------------------------------------------------------------


def paired(mine: list[float], theirs: list[float]) -> float:
    """Return the median of each round's ratio: rounds measured side by side share the
    machine's state, so a load spike from elsewhere moves a ratio less than a median."""
    return statistics.median(m / t for m, t in zip(mine, theirs, strict=True))


def figures(
    tallies: dict[str, Tally], cost: dict[str, tuple[list[float], Counter[str]]]
) -> list[Figure]:
    """Return the headline figures, each against its anchor from the same run."""
    holes, plain, django = (tallies[site] for site in SITES)
    rps = {site: statistics.median(tally.rps) for site, tally in tallies.items()}
    token_rps, hole_rps, plain_rps = (
        statistics.median(cost[path][0]) for path in ("/token/", "/hole/", "/no-token/")
    )
    speedup = paired(tallies["holes"].rps, tallies["django"].rps)
    plain_speedup = paired(tallies["plain"].rps, tallies["django"].rps)
    token_cost = paired(cost["/no-token/"][0], cost["/token/"][0])
    nocache_cost = paired(cost["/no-token/"][0], cost["/hole/"][0])
    met = holes.hit_ratio >= 0.90 and django.hit_ratio <= 0.10
    return [
        Figure("hit ratio on the mix: mcache with holes vs cache_page",
               f"{holes.hit_ratio:.1%}", f"{django.hit_ratio:.1%}",
               f"{holes.hit_ratio:.1%} vs {django.hit_ratio:.1%}",
               "≥ 90% where cache_page ≤ 10%", met),
        Figure("hit ratio on the mix: mcache without holes vs cache_page",
               f"{plain.hit_ratio:.1%}", f"{django.hit_ratio:.1%}",
               f"{plain.hit_ratio:.1%} vs {django.hit_ratio:.1%}", "", None),
        Figure("requests/s on the mix: mcache with holes ÷ cache_page",
               f"{rps['holes']:,.0f}/s", f"{rps['django']:,.0f}/s", f"{speedup:.2f}×",
               "≥ 3×", speedup >= 3),
        Figure("requests/s on the mix: mcache without holes ÷ cache_page",
               f"{rps['plain']:,.0f}/s", f"{rps['django']:,.0f}/s", f"{plain_speedup:.2f}×",
               "", None),
        Figure("a hit with one hole (CSRF token) ÷ a plain hit, cost",
               f"{token_rps:,.0f}/s", f"{plain_rps:,.0f}/s", f"{token_cost:.2f}×",
               "≤ 1.2×", token_cost <= 1.2),
        Figure("a hit with one {% nocache %} hole ÷ a plain hit, cost",
               f"{hole_rps:,.0f}/s", f"{plain_rps:,.0f}/s", f"{nocache_cost:.2f}×",
               "≤ 1.2×", nocache_cost <= 1.2),
    ]  # fmt: skip


def print_tables(
    args: argparse.Namespace,
    tallies: dict[str, Tally],
    cost: dict[str, tuple[list[float], Counter[str]]],
) -> None:
    """Print the mix, the table of the three configurations and the hole-cost pair."""
    head = "### " if args.markdown else ""
    each = f"{args.rounds} × {args.seconds:g} s"
    print(f"{head}1. The mix: gunicorn 2 workers (gthread, 4 threads) per configuration,")
    print(f"{args.connections} keep-alive connections, {each} per configuration (ABC CBA)\n")
    print(mix_text(args.visitors, args.views) + "\n")
    rows = [
        [
            SITES[site],
            f"{statistics.median(tally.rps):,.0f}",
            " / ".join(f"{r:,.0f}" for r in tally.rps),
            f"{tally.hit_ratio:.1%}",
            f"{tally.renders:,} / {tally.requests:,}",
            f"{tally.from_browser:,}",
            tally.answered(),
        ]
        for site, tally in tallies.items()
    ]
    header = ["configuration", "requests/s (median)", "rounds", "hit ratio", "renders / requests"]
    header += ["views the browsers answered"]
    print(table([*header, "answered (X-Cache)"], rows, args.markdown))
    print(f"\n{head}2. A hit with one hole vs a plain hit: the same page and decorator, with")
    print("its CSRF token, with a {% nocache %} welcome line instead, and with neither, for an")
    print(f"anonymous visitor with a CSRF cookie, {args.rounds * 2} × {args.seconds / 2:g} s per")
    print("page (ABC CBA)\n")
    names = {
        "/token/": "CSRF token as a hole",
        "/hole/": "a {% nocache %} hole",
        "/no-token/": "neither (plain hit)",
    }
    rows = [
        [
            names[path],
            f"{statistics.median(got):,.0f}",
            " / ".join(f"{r:,.0f}" for r in got),
            ", ".join(f"{name} {n:,}" for name, n in outcomes.most_common()),
        ]
        for path, (got, outcomes) in cost.items()
    ]
    print(table(["page", "requests/s (median)", "rounds", "answered"], rows, args.markdown))


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--seconds", type=float, default=6.0, help="length of one load round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--visitors", type=int, default=200, help="visitors browsing at once")
    parser.add_argument("--views", type=int, default=4, help="page views of one visit")
    parser.add_argument("--connections", type=int, default=16)
    args = parser.parse_args()
    node = memcached_process(memory_mb=256).start()
    servers: list[subprocess.Popen[bytes]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "MCACHE_BENCH_MEMCACHED": node.address,
                   "MCACHE_BENCH_DB": str(Path(tmp) / "site.sqlite3"),
                   "DJANGO_SETTINGS_MODULE": f"{SITE}.settings",
                   "PYTHONPATH": str(ROOT)}  # fmt: skip
            sessions = prepare(env)
            host, port = node.address.rsplit(":", 1)
            counter = Client((host, int(port)), default_noreply=False, no_delay=True)
            ports = {}
            try:
                for site in SITES:
                    counter.set(f"real_site:renders:{site}", b"0")
                    server, ports[site] = start(site, env)
                    servers.append(server)
                    check(ports[site], site, sessions)
                tallies = on_the_mix(ports, counter, args, sessions)
                cost = hole_cost(ports["holes"], args)
            finally:
                for server in servers:
                    server.terminate()
                    server.wait(10)
    finally:
        node.kill()
    print_tables(args, tallies, cost)
    report(figures(tallies, cost), args.figures)


if __name__ == "__main__":
    main()
