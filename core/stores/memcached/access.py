"""How a connection to memcached is let in: TLS (``memcached -Z``) and ASCII authentication
(``memcached -Y``).

A managed memcached may require both: encryption in transit and the user and password of
the server's auth file, sent as the first command of every connection (a ``set`` whose key
the server ignores and whose value is ``user password``). pymemcache speaks TLS but not this
authentication, so :class:`NodeClient` sends it on each connection pymemcache opens, and
:meth:`Access.open` on the store's own connections (the meta-protocol probe, the metadump).
The ``set`` carries an expiry of ``-1``: a server without ``-Y`` stores the item already
expired, so the password is never left readable in a cache that did not ask for it.

A wrong certificate or password is a setting to fix, not a server to route around: the store
checks each server once at start-up (:func:`check_access`) and raises ``ConfigError`` naming
the option; a server that is merely down is left to the pool's failover. At run time, a
refusal (a password changed under a running site) is a failed connection like any other.
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field

from pymemcache.client.base import Client

from mcache.errors import ConfigError
from mcache.model.ring import Server
from mcache.stores.memcached.wire import Parsed, parse_lines, read_parsed

__all__ = [
    "Access",
    "AccessRefused",
    "NodeClient",
    "access_of",
    "auth_request",
    "authenticate",
    "check_access",
    "check_auth_reply",
    "tls_context",
]

_STORED = b"STORED\r\n"


class AccessRefused(ConnectionError):
    """The server refused the user and password (``CLIENT_ERROR authentication failure``)."""


_REFUSED = b"CLIENT_ERROR authentication failure"
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "UNKNOWN_PROTOCOL", "HTTP_REQUEST"})
"""What the TLS handshake reports when the server speaks plain text (memcached without -Z)."""


@dataclass(frozen=True, slots=True)
class Access:
    """What every connection to the pool's servers does before its first command."""

    tls: ssl.SSLContext | None = None
    credentials: bytes | None = field(default=None, repr=False)  # b"user password"

    @property
    def guarded(self) -> bool:
        """Return whether connections use TLS or authenticate: then start-up checks them."""
        return self.tls is not None or self.credentials is not None

    def open(self, server: Server, timeout: float) -> socket.socket:
        """Return a connected socket to ``server``, through TLS and authenticated as set."""
        sock = socket.create_connection((server.host, server.port), timeout=timeout)
        try:
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=server.host)
            if self.credentials is not None:
                authenticate(sock, self.credentials)
        except BaseException:
            sock.close()
            raise
        return sock


def auth_request(credentials: bytes) -> bytes:
    """Return the command that authenticates a connection as ``credentials``."""
    return b"set mcache-auth 0 -1 %d\r\n%s\r\n" % (len(credentials), credentials)


def authenticate(sock: socket.socket, credentials: bytes) -> None:
    """Send the user and password on a new connection; raise ``AccessRefused`` unless let in."""
    sock.sendall(auth_request(credentials))
    (line,) = read_parsed(sock, _one_line)  # type: ignore[misc]
    check_auth_reply(line)


def _one_line(buf: bytes) -> Parsed | int:
    return parse_lines(buf, 1)


def check_auth_reply(line: bytes) -> None:
    """Return if ``line`` lets the connection in; raise ``AccessRefused`` for a refused
    password, ``ConnectionError`` for anything else (a busy server: ``ERROR Too many open
    connections``), which the pool treats as a server down, not a setting to fix."""
    if line == _STORED.rstrip():
        return
    text = line.decode("ascii", "replace")
    if line.startswith(_REFUSED):
        raise AccessRefused(text)
    raise ConnectionError(f"memcached answered the authentication with {text!r}")


class NodeClient(Client):
    """A pymemcache client of one server of the pool, let in as the pool's ``access`` says:
    through TLS (pymemcache's own) and authenticated on each connection it opens."""

    def __init__(
        self, server: tuple[str, int], connect_timeout: float, timeout: float, access: Access
    ) -> None:
        super().__init__(
            server,
            connect_timeout=connect_timeout,
            timeout=timeout,
            no_delay=True,
            default_noreply=False,
            allow_unicode_keys=True,
            tls_context=access.tls,
        )
        self._credentials = access.credentials

    def _connect(self) -> None:
        super()._connect()
        if self._credentials is None:
            return
        try:
            authenticate(self.sock, self._credentials)
        except BaseException:
            self.close()
            raise


def tls_context(
    ca_file: str | None, cert_file: str | None, key_file: str | None, verify: bool
) -> ssl.SSLContext:
    """Return the client-side TLS context the ``tls_*`` options describe."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"memcached tls_ca_file={ca_file!r} cannot be read: {error}") from None
    if cert_file is not None:
        try:
            context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as error:
            raise ConfigError(
                f"memcached tls_cert_file={cert_file!r} / tls_key_file={key_file!r}: {error}"
            ) from None
    elif key_file is not None:
        raise ConfigError("memcached tls_key_file is the key of tls_cert_file: set both")
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def access_of(
    tls: bool,
    ca_file: str | None,
    cert_file: str | None,
    key_file: str | None,
    verify: bool,
    username: str | None,
    password: str | None,
) -> Access:
    """Return the access the store's options describe; refuse a half-given one."""
    tls_options = {"tls_ca_file": ca_file, "tls_cert_file": cert_file, "tls_key_file": key_file}
    given = [name for name, value in tls_options.items() if value is not None]
    if not tls and (given or not verify):
        named = ", ".join(given) or "tls_verify"
        raise ConfigError(f"memcached {named} without tls: write memcached+tls:// or ?tls=true")
    if (username is None) != (password is None):
        raise ConfigError(
            "memcached authentication needs a username and a password:"
            " memcached://user:password@host:11211"
        )
    if username is not None and not all(
        part and not any(c.isspace() for c in part) for part in (username, password)
    ):
        raise ConfigError(
            "memcached username and password must be non-empty with no whitespace"
            " (the server's auth command splits them at a space)"
        )
    credentials = None if username is None else f"{username} {password}".encode()
    context = tls_context(ca_file, cert_file, key_file, verify) if tls else None
    return Access(context, credentials)


def check_access(servers: list[Server], access: Access, timeout: float) -> None:
    """Connect to each server once; raise ``ConfigError`` for a certificate or password the
    server refuses. A server that cannot be reached is left to failover."""
    for server in servers:
        try:
            access.open(server, timeout).close()
        except AccessRefused as error:
            raise ConfigError(
                f"memcached {server.name} refused the user and password of the store URL"
                f" (memcached://user:password@host): {error}; write a user and password of"
                " the server's auth file (memcached -Y)"
            ) from None
        except ssl.SSLCertVerificationError as error:
            raise ConfigError(
                f"memcached {server.name}: its TLS certificate failed verification"
                f" ({error.verify_message}); set tls_ca_file to the CA that signed it"
                " (?tls_ca_file=/path/ca.pem), or tls_verify=false on a test server"
            ) from None
        except ssl.SSLError as error:
            if error.reason not in _NOT_TLS:
                continue  # cut off mid-handshake (a busy server, a proxy): down, not a setting
            raise ConfigError(
                f"memcached {server.name}: TLS failed ({error.reason}): a server"
                " started with TLS (memcached -Z) is needed, or a URL without tls"
            ) from None
        except OSError:
            continue  # down, busy or unreachable: the pool routes around it, as at run time
