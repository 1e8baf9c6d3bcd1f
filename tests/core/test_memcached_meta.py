"""memcached's meta protocol against a real memcached 1.6: leases, stale marking, guarded
writes and auto-created counters, as ``mcache.stores.memcached.meta`` speaks them."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest

from mcache.stores.memcached.store import meta
from mcache.stores.memcached.wire import ProtocolError

Ask = Callable[[bytes], meta.MetaReply]


@pytest.fixture
def connect(memcached_url: str):
    """Return a function opening a client connection; each returns an ``ask(request)``."""
    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    sockets: list[socket.socket] = []

    def open_client() -> Ask:
        sock = socket.create_connection((host, int(port)), timeout=2)
        sockets.append(sock)

        def ask(request: bytes) -> meta.MetaReply:
            sock.sendall(request)
            reply, rest = meta.read_reply(sock)
            assert rest == b""
            return reply

        return ask

    yield open_client
    for sock in sockets:
        sock.close()


def test_the_server_speaks_meta(memcached_url: str) -> None:
    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        assert meta.speaks_meta(sock) is True


def test_a_server_answering_error_to_mn_keeps_the_text_protocol() -> None:
    ours, server = socket.socketpair()
    with ours, server:
        server.sendall(b"ERROR\r\n")  # what memcached before 1.6 answers an unknown command
        assert meta.speaks_meta(ours) is False
        assert server.recv(16) == b"mn\r\n"


def test_a_miss_leases_the_build_to_exactly_one_client(connect) -> None:
    first, second = connect(), connect()
    won = first(meta.get("page", lease_ttl=30))
    assert won.won and won.won_placeholder and not won.hit and won.value == b""
    lost = second(meta.get("page", lease_ttl=30))
    assert lost.other_won and not lost.won
    stored = first(meta.set_("page", b"<html>", 300, cas=won.cas))
    assert stored.code == b"HD"
    hit = second(meta.get("page", lease_ttl=30))
    assert (hit.hit, hit.value, hit.won, hit.other_won) == (True, b"<html>", False, False)


def test_a_build_whose_lease_an_invalidation_took_cannot_store(connect) -> None:
    builder, invalidator, reader = connect(), connect(), connect()
    lease = builder(meta.get("listing", lease_ttl=30))
    assert lease.won
    assert invalidator(meta.delete("listing", stale_ttl=30)).code == b"HD"
    late = builder(meta.set_("listing", b"built from old rows", 300, cas=lease.cas))
    assert late.code == b"EX", "the stale set is refused"
    after = reader(meta.get("listing", lease_ttl=30))
    assert after.stale and after.won, "the next reader rebuilds"


def test_marking_stale_serves_the_old_value_and_hands_one_reader_the_rebuild(connect) -> None:
    writer, first, second = connect(), connect(), connect()
    assert writer(meta.set_("sidebar", b"v1", 300)).code == b"HD"
    assert writer(meta.delete("sidebar", stale_ttl=60)).code == b"HD"
    rebuild = first(meta.get("sidebar", lease_ttl=30))
    assert (rebuild.value, rebuild.stale, rebuild.won) == (b"v1", True, True)
    served = second(meta.get("sidebar", lease_ttl=30))
    assert (served.value, served.stale, served.won, served.other_won) == (b"v1", True, False, True)
    assert first(meta.set_("sidebar", b"v2", 300, cas=rebuild.cas)).code == b"HD"
    fresh = second(meta.get("sidebar", lease_ttl=30))
    assert (fresh.value, fresh.stale, fresh.won) == (b"v2", False, False)


def test_an_early_rebuild_is_won_by_one_client_before_expiry(connect) -> None:
    writer, first, second = connect(), connect(), connect()
    writer(meta.set_("feed", b"rss", 60))
    assert not first(meta.get("feed", early_ttl=30)).won, "60 s left: not yet"
    early = first(meta.get("feed", early_ttl=90))
    assert early.won and early.value == b"rss" and 0 < early.ttl <= 60
    assert second(meta.get("feed", early_ttl=90)).other_won


def test_a_counter_is_created_and_counted_in_one_command_each(connect) -> None:
    ask = connect()
    created = ask(meta.arithmetic("views", 1, create_ttl=0, initial=41))
    assert (created.code, created.value) == (b"VA", b"41")
    assert ask(meta.arithmetic("views", 1, create_ttl=0, initial=41)).value == b"42"
    assert ask(meta.arithmetic("views", 5, down=True)).value == b"37"
    assert ask(meta.arithmetic("absent", 1)).code == b"NF"


def test_quiet_misses_say_nothing_and_a_noop_ends_the_batch(connect, memcached_url) -> None:
    connect()(meta.set_("a", b"1", 60))
    host, port = memcached_url.removeprefix("memcached://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        sock.sendall(meta.get("a", quiet=True) + meta.get("b", quiet=True) + meta.noop())
        replies, rest = [], b""
        while not replies or replies[-1].code != b"MN":
            reply, rest = meta.read_reply(sock, rest)
            replies.append(reply)
    assert [(r.code, r.value) for r in replies] == [(b"VA", b"1"), (b"MN", None)]
    assert replies[0].ttl == 60 and replies[0].cas is not None


def test_replies_parse_the_same_split_at_any_byte() -> None:
    stream = b"VA 5 c7 t-1 kx W\r\nhe\r\nl\r\nHD\r\nEN\r\nMN\r\n"
    whole = []
    pos = 0
    while pos < len(stream):
        reply, pos = meta.parse_reply(stream, pos)  # type: ignore[misc]
        whole.append(reply)
    assert [r.code for r in whole] == [b"VA", b"HD", b"EN", b"MN"]
    assert whole[0].value == b"he\r\nl" and whole[0].cas == 7 and whole[0].won_placeholder
    for cut in range(len(stream)):
        needed = meta.parse_reply(stream[:cut])
        if type(needed) is int:
            assert needed > cut
        else:
            assert needed[1] <= cut
    with pytest.raises(ProtocolError, match="unexpected meta reply"):
        meta.parse_reply(b"VALUE x 0 1\r\n")
