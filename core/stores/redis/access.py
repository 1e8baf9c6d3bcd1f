"""How a connection to Redis is let in: an ACL user (``redis://user:password@…``) and TLS
(``rediss://`` with the ``ssl_*`` options redis-py takes).

redis-py does both; what it leaves to the application is telling a setting to fix from a
server that is down. A store with a password or TLS pings its server once at start-up, so
a refused password or an untrusted certificate raises ``ConfigError`` naming the option,
while a server that does not answer is left to fail (and degrade) like any other at run time.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import redis
from redis.exceptions import AuthenticationError, ConnectionError, RedisError, ResponseError

from mcache.errors import ConfigError

__all__ = ["check_access", "tls_options"]

_CERT_REQS = ("required", "optional", "none")


def tls_options(url: str, given: dict[str, Any]) -> dict[str, Any]:
    """Return the TLS options ``given`` that are set, refused unless the URL is ``rediss://``."""
    chosen = {name: value for name, value in given.items() if value is not None}
    if chosen and urlsplit(url).scheme != "rediss":
        named = ", ".join(sorted(chosen))
        raise ConfigError(f"redis {named} need TLS: write rediss:// instead of redis://")
    reqs = chosen.get("ssl_cert_reqs")
    if reqs is not None and reqs not in _CERT_REQS:
        raise ConfigError(f"redis ssl_cert_reqs must be one of {', '.join(_CERT_REQS)}: {reqs!r}")
    return chosen


def guarded(url: str) -> bool:
    """Return whether connections authenticate or use TLS: then start-up checks them."""
    parts = urlsplit(url)
    return parts.scheme == "rediss" or parts.password is not None


def check_access(client: redis.Redis, shown_url: str) -> None:
    """Ping once; raise ``ConfigError`` for a password or certificate the server refuses."""
    try:
        client.ping()
    except AuthenticationError as error:
        raise ConfigError(
            f"redis {shown_url} refused the user and password of the URL"
            f" (redis://user:password@host): {error}; write an ACL user's (ACL SETUSER)"
        ) from None
    except ResponseError as error:
        if "NOAUTH" in str(error):  # NOPERM: logged in, only PING is not granted; fine
            raise ConfigError(f"redis {shown_url}: {error}; set the URL's user:password") from None
    except ConnectionError as error:
        text = str(error)
        if "CERTIFICATE_VERIFY_FAILED" in text:
            raise ConfigError(
                f"redis {shown_url}: its TLS certificate failed verification ({text}); set"
                " ssl_ca_certs to the CA that signed it (?ssl_ca_certs=/path/ca.pem), or"
                " ssl_cert_reqs=none on a test server"
            ) from None
        if "WRONG_VERSION_NUMBER" in text:
            raise ConfigError(
                f"redis {shown_url}: TLS failed ({text}): a server with a TLS port"
                " (redis-server --tls-port) is needed, or redis:// without TLS"
            ) from None
    except RedisError:
        pass  # down or slow: the store degrades at run time, as for any server
