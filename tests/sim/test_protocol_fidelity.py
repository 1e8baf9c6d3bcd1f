"""The simulated memcached answers as memcached 1.6 does: the real store, both protocols,
passes the store contract on it; and the same requests, replayed on a real memcached and
on a simulated one, get the same answers (cas numbers aside, each server counting its own)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from mcache import FakeClock
from mcache.stores.memcached import meta
from mcache.stores.memcached.access import Access, NodeClient
from mcache.stores.memcached.store import _on_client
from mcache.testing import StoreContract
from tests.sim.memcached import SimMemcachedServer, SimSocketModule
from tests.sim.pool import SimPool

Run = Callable[[str, tuple[Any, ...]], Any]


@pytest.mark.parametrize("protocol", ["meta", "text"])
class TestTheRealStoreOnSimulatedServers(StoreContract):
    @pytest.fixture
    def store(self, protocol: str) -> object:
        self.clock = FakeClock(time.time())  # the servers' time, moved by wait()
        servers = {
            f"sim{n}:11211": SimMemcachedServer(self.clock.time, f"sim{n}") for n in range(2)
        }
        return SimPool(servers, self.clock, protocol=protocol)

    @pytest.fixture
    def store_factory(self) -> None:
        return None

    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)


def script(run: Run) -> list[Any]:
    """Requests the store sends, each answer kept; later ones use earlier answers' cas."""
    out: list[Any] = [run("get_many", (["a", "b"],))]
    out.append(run("set", ("a", b"1", 0)))
    out.append(run("add", ("a", b"x", 0)))
    out.append(run("add", ("b", b"10", 100)))
    value, token = run("gets", ("a",))
    out += [value, run("cas", ("a", b"2", token, 0)), run("cas", ("a", b"3", token, 0))]
    out += [run("incr", ("b", 5)), run("decr", ("b", 10)), run("incr", ("a", 1))]
    out += [run("incr_many", (["a", "b", "c"], {"a": 1, "b": 2, "c": 3}))]
    out += [run("get_many", (["a", "b"],)), run("touch", ("a", 100)), run("touch", ("z", 1))]
    out += [run("delete", ("a",)), run("delete", ("a",)), run("get_many", (["a", "b"],))]
    lease = meta.get("p", lease_ttl=30, early_ttl=100)
    first = run("leased_get", (lease + b"get b\r\n", ["b"]))
    second = run("leased_get", (lease, []))
    out += [first, second]
    token = first[0].cas
    out += run("meta", ([meta.set_("p", b"page", 60, cas=token + 1)],))  # not its lease
    out += run("meta", ([meta.set_("p", b"page", 60, cas=token)],))
    out += [run("leased_get", (lease, [])), run("leased_get", (lease, []))]
    plain = meta.get("p")
    marked = run("leased_get", (plain, []))[0]
    out += run("meta", ([meta.delete("p", stale_ttl=60, cas=marked.cas), lease],))
    out += [run("leased_get", (lease, []))]
    again = run("leased_get", (plain, []))[0]
    out += run("meta", ([meta.delete("p", stale=True, cas=again.cas)],))
    out += [run("leased_get", (lease, []))]
    out += run("meta", ([b"mg p c\r\n", b"mg nothing c\r\n", b"mg p c T50\r\n"],))
    counters = [meta.arithmetic("n", 5, create_ttl=0, initial=100)] * 2
    out += run("meta", ([*counters, meta.arithmetic("n", 1, down=True)],))
    out += run("meta", ([meta.set_("gone", b"x", -1), meta.noop()],))
    out += [run("get_many", (["p", "n", "gone"],))]
    return out


def normal(answer: Any) -> Any:
    """An answer with each server's own cas numbers and exact seconds left taken out."""
    if isinstance(answer, meta.MetaReply):
        flags = tuple(re.sub(rb"^c\d+$", b"c", re.sub(rb"^t\d+$", b"t+", f)) for f in answer.flags)
        return (answer.code, answer.value, flags)
    if isinstance(answer, tuple):
        return tuple(normal(part) for part in answer)
    if isinstance(answer, list):
        return [normal(part) for part in answer]
    if isinstance(answer, bytes) and answer.isdigit() and len(answer) > 3:
        return b"cas"
    return answer


def test_a_simulated_memcached_answers_as_a_real_one(memcached_url: str) -> None:
    host, port = memcached_url.split("//")[1].split("?")[0].rsplit(":", 1)
    real = NodeClient((host, int(port)), 0.5, 1.0, Access())
    real.flush_all(noreply=False)
    simulated_server = SimMemcachedServer(time.time)
    simulated = NodeClient(("sim", 11211), 0.5, 1.0, Access())
    simulated.socket_module = SimSocketModule(simulated_server)
    try:
        expected = script(lambda command, args: _on_client(real, command, args))
        got = script(lambda command, args: _on_client(simulated, command, args))
    finally:
        real.flush_all(noreply=False)
        real.close()
    for number, (theirs, ours) in enumerate(zip(expected, got, strict=True)):
        assert normal(ours) == normal(theirs), f"answer {number}"
