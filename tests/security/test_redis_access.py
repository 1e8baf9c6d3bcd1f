"""Redis with an ACL user and over TLS (``rediss://``), on real servers the tests configure.

One redis-server has its default user switched off and one ACL user; another listens with
TLS only, with a certificate of the session's authority. The store works through both,
blocking and asyncio; a refused password or an untrusted certificate fails at start-up with
``ConfigError`` naming the option, never showing the password.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from mcache import Cache, Codec
from mcache.errors import ConfigError
from mcache.stores import from_url
from tests.security.certificates import Certificates, make_certificates
from tests.security.running import running
from tests.security.test_memcached_access import exercise, exercise_async
from tests.servers import ServerProcess, redis_process

USER, PASSWORD = "shop", "s3cret:@"
ENCODED = "s3cret%3A%40"
ACL = ("--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all", "--user", "default", "off")
AUTH_PING = (f"AUTH {USER} {PASSWORD}\r\nPING\r\n".encode(), b"+OK")


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certificates"))


@pytest.fixture(scope="module")
def acl_server() -> Iterator[ServerProcess]:
    """A redis-server whose only user is the site's ACL user."""
    yield from running(redis_process(options=ACL, ping=AUTH_PING))


@pytest.fixture(scope="module")
def tls_server(certificates: Certificates) -> Iterator[ServerProcess]:
    """A redis-server with TLS only, and the ACL user as well."""
    files = (str(certificates.server_cert), str(certificates.server_key), str(certificates.ca))
    server = redis_process(options=ACL, tls=files, ping=AUTH_PING, connect=certificates.connect)
    yield from running(server)


def test_an_acl_user_sync_and_async(acl_server: ServerProcess) -> None:
    url = f"redis://{USER}:{ENCODED}@{acl_server.address}/0"
    cache = Cache(url, namespace="acl", codec=Codec(signing_key="k"))
    exercise(cache, "acl")
    asyncio.run(exercise_async(cache, "acl"))


def test_rediss_with_the_sites_ca_sync_and_async(
    tls_server: ServerProcess, certificates: Certificates
) -> None:
    url = f"rediss://{USER}:{ENCODED}@{tls_server.address}/0?ssl_ca_certs={certificates.ca}"
    cache = Cache(url, namespace="tls", codec=Codec(signing_key="k"))
    exercise(cache, "tls")
    asyncio.run(exercise_async(cache, "tls"))


def test_a_wrong_password_fails_at_start_up_without_showing_it(acl_server) -> None:
    with pytest.raises(ConfigError, match=r"refused the user and password") as refused:
        from_url(f"redis://{USER}:not-it@{acl_server.address}/0")
    assert "not-it" not in str(refused.value)


def test_an_untrusted_certificate_fails_at_start_up_naming_the_option(
    tls_server: ServerProcess, certificates: Certificates
) -> None:
    url = f"rediss://{USER}:{ENCODED}@{tls_server.address}/0"
    with pytest.raises(ConfigError, match=r"certificate failed verification.*ssl_ca_certs"):
        from_url(f"{url}?ssl_ca_certs={certificates.other_ca}")
    store = from_url(f"{url}?ssl_cert_reqs=none")  # said knowingly: encrypted, unverified
    store.set("k", b"v", 60)
    assert store.get("k") == b"v"


def test_tls_options_without_rediss_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"need TLS: write rediss://"):
        from_url("redis://127.0.0.1:6379/0?ssl_ca_certs=/etc/ssl/ca.pem")


def test_a_server_down_at_start_up_is_left_to_degrade() -> None:
    store = from_url("rediss://user:pw@127.0.0.1:1/0?socket_connect_timeout=0.2")
    cache = Cache(store, codec=Codec(signing_key="k"))
    assert cache.get_or_build("k", lambda: "from the backend") == "from the backend"
