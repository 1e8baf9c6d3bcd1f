"""Server-side Flask sessions on mcache, replicated: ``MCACHE_SESSIONS = True``.

Flask's own session is a signed cookie its visitor can read and the server cannot end;
this one lives in the cache under a random id, the cookie carrying only the id, signed.
A lost session signs its user out, so on a memcached pool each is written to
``MCACHE_SESSION_REPLICAS`` servers, as with ``django_mcache.sessions``. Cookie settings
are Flask's own. See docs/how-to/sessions.md.
"""

from __future__ import annotations

import secrets
from typing import Any

from flask import Flask, Request, Response
from flask.sessions import SecureCookieSession, SessionInterface
from itsdangerous import BadSignature, Signer

from mcache import Cache
from mcache.errors import ConfigError
from mcache.stores.url import memcached_replicas

from .config import cache_from_config

__all__ = ["MCacheSession", "MCacheSessionInterface"]

SALT = "flask_mcache.sessions"


class MCacheSession(SecureCookieSession):
    """A session whose data lives in the cache under ``sid``; Flask tracks reads and writes."""

    def __init__(self, initial: Any = None, sid: str = "", new: bool = False) -> None:
        super().__init__(initial)
        self.sid = sid
        self.new = new
        self.retired: list[str] = []

    def regenerate(self) -> None:
        """Move the data to a new id (call it at sign-in: session fixation fails)."""
        self.retired.append(self.sid)
        self.sid = _new_sid()
        self.modified = True


class MCacheSessionInterface(SessionInterface):
    """Flask's session interface on an mcache cache with replicas (see the module)."""

    def __init__(self, app: Flask) -> None:
        self.cache = session_cache(app)

    def open_session(self, app: Flask, request: Request) -> MCacheSession | None:
        if not app.secret_key:
            return None  # Flask then says a secret key is needed, as for its own sessions
        signed = request.cookies.get(self.get_cookie_name(app))
        sid = self._unsigned(app, signed) if signed else None
        if sid is not None:
            data = self.cache.get(("session", sid), None)
            if isinstance(data, dict):
                return MCacheSession(data, sid)
        return MCacheSession(sid=_new_sid(), new=True)

    def save_session(self, app: Flask, session: Any, response: Response) -> None:
        name, domain = self.get_cookie_name(app), self.get_cookie_domain(app)
        path = self.get_cookie_path(app)
        for sid in session.retired:
            self.cache.delete(("session", sid))
        session.retired.clear()
        if session.accessed:
            response.vary.add("Cookie")
        if not session:
            if session.modified and not session.new:
                self.cache.delete(("session", session.sid))
                response.delete_cookie(name, domain=domain, path=path)
                response.vary.add("Cookie")
            return
        if not self.should_set_cookie(app, session):
            return
        lifetime = int(app.permanent_session_lifetime.total_seconds())
        self.cache.set(("session", session.sid), dict(session), max(lifetime, 1))
        response.set_cookie(
            name,
            self._signed(app, session.sid),
            expires=self.get_expiration_time(app, session),
            httponly=self.get_cookie_httponly(app),
            domain=domain,
            path=path,
            secure=self.get_cookie_secure(app),
            samesite=self.get_cookie_samesite(app),
        )
        response.vary.add("Cookie")

    @staticmethod
    def _signed(app: Flask, sid: str) -> str:
        return Signer(app.secret_key, salt=SALT).sign(sid).decode()  # type: ignore[arg-type]

    @staticmethod
    def _unsigned(app: Flask, signed: str) -> str | None:
        try:
            return Signer(app.secret_key, salt=SALT).unsign(signed).decode()  # type: ignore[arg-type]
        except BadSignature:
            return None  # forged, or signed with an old key: a new session


def _new_sid() -> str:
    return secrets.token_urlsafe(32)


def session_cache(app: Flask) -> Cache:
    """Return the cache ``app``'s sessions live in: ``MCACHE_SESSION_URL``'s, else
    ``MCACHE_URL``'s, with ``MCACHE_SESSION_REPLICAS`` copies on a memcached pool."""
    config = dict(app.config)
    url_key = "MCACHE_SESSION_URL" if config.get("MCACHE_SESSION_URL") else "MCACHE_URL"
    url = config.get(url_key) or "memory://"
    replicas = config.get("MCACHE_SESSION_REPLICAS", 2)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"MCACHE_SESSION_REPLICAS must be a whole number >= 1, got {replicas!r}")
    copies = memcached_replicas(url, replicas)
    if copies is not None and copies > 1:
        config["MCACHE_REPLICAS"] = copies
    return cache_from_config(config, url_key)
