"""memcached over TLS (``-Z``) and with ASCII authentication (``-Y``), on real servers.

The servers are started here with a certificate authority the session makes; the store
talks to them through the text and the meta protocol, blocking and asyncio, one server and
a pool of two. A wrong certificate or password fails at start-up with ``ConfigError``
naming the option; a password changed under a running store degrades like a server down.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcache import Cache, Codec
from mcache.contract.store import NO_VALUE
from mcache.errors import ConfigError
from mcache.stores import from_url
from mcache.stores.memcached.access import AccessRefused, access_of, check_auth_reply
from mcache.stores.redaction import redacted_url
from mcache.stores.url import memcached_replicas
from tests.security.certificates import Certificates, make_certificates
from tests.security.running import running
from tests.servers import HOST, ServerProcess, memcached_process

USER, PASSWORD = "alice", "wonder:land@"  # a colon and an at sign: percent-encoded in a URL
ENCODED = "wonder%3Aland%40"
PROTOCOLS = ["text", "meta"]


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def auth_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "users"
    path.write_text(f"{USER}:{PASSWORD}\n")
    return path


def tls_options(certificates: Certificates) -> tuple[str, ...]:
    files = f"ssl_chain_cert={certificates.server_cert},ssl_key={certificates.server_key}"
    return ("-Z", "-o", files)


def auth_ping(password: str = PASSWORD) -> tuple[bytes, bytes]:
    secret = f"{USER} {password}".encode()
    return b"set ping 0 -1 %d\r\n%s\r\n" % (len(secret), secret), b"STORED"


@pytest.fixture(scope="module")
def tls_servers(certificates: Certificates) -> Iterator[list[ServerProcess]]:
    """Two memcached speaking TLS only."""
    servers = [
        memcached_process(options=tls_options(certificates), connect=certificates.connect)
        for _ in range(2)
    ]
    started = [running(server) for server in servers]
    yield [next(each) for each in started]
    for each in started:
        next(each, None)


@pytest.fixture(scope="module")
def auth_server(auth_file: Path) -> Iterator[ServerProcess]:
    """A memcached that lets in only the users of its auth file."""
    yield from running(memcached_process(options=("-Y", str(auth_file)), ping=auth_ping()))


@pytest.fixture(scope="module")
def tls_auth_server(certificates: Certificates, auth_file: Path) -> Iterator[ServerProcess]:
    """TLS and authentication together, as a managed memcached may require."""
    options = (*tls_options(certificates), "-Y", str(auth_file))
    server = memcached_process(options=options, ping=auth_ping(), connect=certificates.connect)
    yield from running(server)


def tls_url(servers: list[ServerProcess], certificates: Certificates, protocol: str) -> str:
    hosts = ",".join(server.address for server in servers)
    return f"memcached+tls://{hosts}?tls_ca_file={certificates.ca}&protocol={protocol}"


def exercise(cache: Cache, label: str) -> None:
    """What a site does: a set and a get, a build under a lease or lock, tags, a counter."""
    cache.set("plain", {"label": label})
    assert cache.get("plain") == {"label": label}
    built = []
    for _ in range(3):
        value = cache.get_or_build("page", lambda: built.append(1) or label, tags=["t"])
        assert value == label
    assert built == [1], "built once, then read"
    cache.invalidate("t")
    assert cache.get_or_build("page", lambda: "rebuilt", tags=["t"]) == "rebuilt"
    assert cache.counter("visits").incr(2) == 2


async def exercise_async(cache: Cache, label: str) -> None:
    await cache.aset("plain", {"label": label})
    assert await cache.aget("plain") == {"label": label}
    assert await cache.aget_or_build("apage", lambda: label, tags=["t"]) == label
    assert await cache.aget_or_build("apage", lambda: "not again", tags=["t"]) == label


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_pool_of_two_servers_over_tls_sync_and_async(
    tls_servers: list[ServerProcess], certificates: Certificates, protocol: str
) -> None:
    store = from_url(tls_url(tls_servers, certificates, protocol))
    cache = Cache(store, namespace=f"tls-{protocol}", codec=Codec(signing_key="k"))
    exercise(cache, protocol)
    assert store.speaks_meta() is (protocol == "meta")
    asyncio.run(exercise_async(cache, protocol))
    keys = [f"spread-{i}" for i in range(40)]
    cache.set_many(dict.fromkeys(keys, 1))
    assert cache.get_many(keys) == dict.fromkeys(keys, 1)
    stats = store.stats()
    assert all(int(s.get("curr_items", 0)) > 0 for s in stats.values()), "both servers hold keys"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_authenticated_connections_sync_and_async(auth_server: ServerProcess, protocol) -> None:
    url = f"memcached://{USER}:{ENCODED}@{auth_server.address}?protocol={protocol}"
    cache = Cache(url, namespace=f"auth-{protocol}", codec=Codec(signing_key="k"))
    exercise(cache, protocol)
    asyncio.run(exercise_async(cache, protocol))


def test_tls_and_authentication_together(
    tls_auth_server: ServerProcess, certificates: Certificates
) -> None:
    url = (
        f"memcached+tls://{USER}:{ENCODED}@{tls_auth_server.address}?tls_ca_file={certificates.ca}"
    )
    cache = Cache(url, namespace="tls-auth", codec=Codec(signing_key="k"))
    exercise(cache, "both")
    asyncio.run(exercise_async(cache, "both"))
    assert cache.shared.metadump(), "the store's own connections (metadump) get in as well"


def test_a_wrong_password_fails_at_start_up_naming_the_setting(auth_server) -> None:
    url = f"memcached://{USER}:not-it@{auth_server.address}"
    with pytest.raises(ConfigError, match=r"refused the user and password") as refused:
        from_url(url)
    assert "not-it" not in str(refused.value), "the password is never shown"


def test_a_certificate_from_another_authority_fails_at_start_up(
    tls_servers: list[ServerProcess], certificates: Certificates
) -> None:
    url = f"memcached+tls://{tls_servers[0].address}?tls_ca_file={certificates.other_ca}"
    with pytest.raises(ConfigError, match=r"certificate failed verification.*tls_ca_file"):
        from_url(url)
    unverified = f"memcached+tls://{tls_servers[0].address}?tls_verify=false"
    store = from_url(unverified)  # said knowingly: encrypted, not authenticated
    store.set("k", b"v", 60)
    assert store.get("k") == b"v"


def test_tls_to_a_plain_server_fails_at_start_up(memcached_url: str) -> None:
    address = memcached_url.removeprefix("memcached://")
    with pytest.raises(ConfigError, match=r"TLS failed.*memcached -Z"):
        from_url(f"memcached+tls://{address}?tls_verify=false")


def test_a_server_down_at_start_up_is_not_a_setting_to_fix(certificates: Certificates) -> None:
    with socket.socket() as unused:
        unused.bind((HOST, 0))
        port = unused.getsockname()[1]
    store = from_url(f"memcached+tls://{HOST}:{port}?tls_ca_file={certificates.ca}")
    cache = Cache(store, codec=Codec(signing_key="k"))
    assert cache.get_or_build("k", lambda: "from the backend") == "from the backend"


def test_a_password_changed_under_a_running_store_degrades_to_the_backend(
    auth_file: Path, tmp_path: Path
) -> None:
    users = tmp_path / "users"
    users.write_text(f"{USER}:{PASSWORD}\n")
    server = memcached_process(options=("-Y", str(users)), ping=auth_ping())
    for _ in running(server):
        url = f"memcached://{USER}:{ENCODED}@{server.address}?retry_attempts=1"
        cache = Cache(url, codec=Codec(signing_key="k"))
        assert cache.get_or_build("k", lambda: "cached") == "cached"
        users.write_text(f"{USER}:rotated\n")
        server.restart_with_ping(*auth_ping("rotated"))
        assert cache.get_or_build("k2", lambda: "from the backend") == "from the backend"
        assert cache.get("k", "a miss") == "a miss"


def test_authenticating_to_a_server_without_auth_leaves_no_password_readable(
    memcached_url: str,
) -> None:
    address = memcached_url.removeprefix("memcached://")
    store = from_url(f"memcached://{USER}:{ENCODED}@{address}")
    store.set("k", b"v", 60)
    assert store.get("k") == b"v"
    assert store.get("mcache-auth") is NO_VALUE, "the credentials were stored already expired"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("memcached://127.0.0.1:1?tls_ca_file=/x", "without tls"),
        ("memcached://alice@127.0.0.1:1", "user without a password"),
        ("memcached+tls://127.0.0.1:1?tls_ca_file=/no/such/ca.pem", "cannot be read"),
        ("memcached+tls://127.0.0.1:1?tls_key_file=/k", "set both"),
        ("memcached://alice:two%20words@127.0.0.1:1", "no whitespace"),
    ],
)
def test_half_given_access_settings_are_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        from_url(url)


def test_only_a_refused_password_is_a_setting_to_fix() -> None:
    check_auth_reply(b"STORED")
    with pytest.raises(AccessRefused):
        check_auth_reply(b"CLIENT_ERROR authentication failure")
    for busy in (b"ERROR Too many open connections", b"SERVER_ERROR out of memory"):
        with pytest.raises(ConnectionError) as down:
            check_auth_reply(busy)
        assert not isinstance(down.value, AccessRefused), "a busy server is down, not refused"


def test_no_password_in_reprs_or_errors() -> None:
    access = access_of(False, None, None, None, True, USER, "hunter2-secret")
    assert "hunter2" not in repr(access)
    for url in (
        "memcached://alice:hunter2-secret@127.0.0.1:11211?hashing=nope&timeout=x",
        "memcached://127.0.0.1:11211?password=hunter2-secret&timeout=x",
        "redis://:hunter2-secret@127.0.0.1:6379/zero",
        "nosuch://alice:hunter2-secret@127.0.0.1:1",
    ):
        with pytest.raises(ConfigError) as refused:
            from_url(url)
        assert "hunter2" not in str(refused.value) and "***" in str(refused.value)
    assert redacted_url("memcached://a:1@127.0.0.1:11211") == "memcached://a:***@127.0.0.1:11211"


def test_sessions_keep_their_replicas_on_a_tls_pool() -> None:
    assert memcached_replicas("memcached+tls://a:b@10.0.0.1:11211,10.0.0.2:11211", 3) == 2
    assert memcached_replicas("memcached://10.0.0.1:11211", 2) == 1
    assert memcached_replicas("redis://10.0.0.1:6379/0", 2) is None
