"""Server-side Flask sessions on mcache, replicated: ``MCACHE_SESSIONS = True``.

Flask's own session is a signed cookie its visitor can read and the server cannot end;
this one lives in the cache under a random id, the cookie carrying only the id, signed.
A lost session signs its user out, so on a memcached pool each is written to
``MCACHE_SESSION_REPLICAS`` servers, as with ``django_mcache.sessions``, and a store
that keeps sessions through a restart (``MCACHE_SESSION_URL`` naming a ``tiered://``
store over PostgreSQL or SQLite) loses none when its memcached dies.

A store that is down never fails a request, and is asked once per request: while it
cannot take a session, the session travels in its cookie (signed with ``SECRET_KEY``,
as Flask's own sessions do), so a visitor still signs in and stays signed in; the first
request that finds the store back writes it there, and the cookie carries the id
alone again. Session reads are counted apart from the cache's (its ``sessions`` line).
Cookie settings are Flask's own. See docs/how-to/sessions.md.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response
from flask.json.tag import TaggedJSONSerializer
from flask.sessions import SecureCookieSession, SessionInterface
from itsdangerous import BadSignature, Signer, URLSafeTimedSerializer

from mcache import Cache
from mcache.errors import ConfigError
from mcache.observe.outcome import asked
from mcache.observe.stats import SESSIONS
from mcache.stores.url import memcached_replicas

from .config import cache_from_config

__all__ = ["MCacheSession", "MCacheSessionInterface"]

SALT = "flask_mcache.sessions"
CARRIED_SALT = "flask_mcache.sessions.carried"


class MCacheSession(SecureCookieSession):
    """A session whose data lives in the cache under ``sid``; Flask tracks reads and writes."""

    def __init__(self, initial: Any = None, sid: str = "", new: bool = False) -> None:
        super().__init__(initial)
        self.sid = sid
        self.new = new
        self.retired: list[str] = []
        self.store_down = False
        """Its store was found down in this request: not asked again before the response."""
        self.unread = False
        """Its data could not be read (the store is down): unless the view writes it anew,
        nothing is written over what the store still holds under ``sid``."""
        self.in_cookie = False
        """It came in its cookie (written while the store was down): to store now."""

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
        if not signed:
            return MCacheSession(sid=_new_sid(), new=True)
        sid = sid_of(app, signed)
        if sid is None:
            return self._from_cookie(app, signed)
        data, down = asked(lambda: self.cache.get(("session", sid), None))
        if isinstance(data, dict):
            return MCacheSession(data, sid)
        session = MCacheSession(sid=sid if down else _new_sid(), new=not down)
        session.store_down = session.unread = down
        return session

    def _from_cookie(self, app: Flask, signed: str) -> MCacheSession:
        """The session its cookie carried while the store was down, or a new one (a cookie
        forged, signed with an old key, or older than the session's lifetime)."""
        lifetime = int(app.permanent_session_lifetime.total_seconds())
        try:
            sid, data = _carrier(app).loads(signed, max_age=lifetime)
        except (BadSignature, TypeError, ValueError):
            return MCacheSession(sid=_new_sid(), new=True)
        session = MCacheSession(data, sid)
        session.in_cookie = True
        return session

    def save_session(self, app: Flask, session: Any, response: Response) -> None:
        name, domain = self.get_cookie_name(app), self.get_cookie_domain(app)
        path = self.get_cookie_path(app)
        for sid in session.retired:
            self._ask(session, lambda sid=sid: self.cache.delete(("session", sid)))
        session.retired.clear()
        if session.accessed:
            response.vary.add("Cookie")
        if not session:
            if (session.modified or session.in_cookie) and not session.new:
                self._ask(session, lambda: self.cache.delete(("session", session.sid)))
                response.delete_cookie(name, domain=domain, path=path)
                response.vary.add("Cookie")
            return
        if session.unread and not session.modified:
            return  # its data is in the store that is down: leave it there as it is
        if not (session.in_cookie or self.should_set_cookie(app, session)):
            return
        lifetime = max(int(app.permanent_session_lifetime.total_seconds()), 1)
        stored = self._ask(
            session, lambda: self.cache.set(("session", session.sid), dict(session), lifetime)
        )
        value = (
            signed_sid(app, session.sid)
            if stored
            else _carrier(app).dumps([session.sid, dict(session)])
        )
        response.set_cookie(
            name,
            value,
            expires=self.get_expiration_time(app, session),
            httponly=self.get_cookie_httponly(app),
            domain=domain,
            path=path,
            secure=self.get_cookie_secure(app),
            samesite=self.get_cookie_samesite(app),
        )
        response.vary.add("Cookie")

    @staticmethod
    def _ask(session: MCacheSession, call: Callable[[], Any]) -> bool:
        """Ask the store (unless found down in this request); return whether it took it."""
        if session.store_down:
            return False
        answer, session.store_down = asked(call)
        return bool(answer) and not session.store_down


def signed_sid(app: Flask, sid: str) -> str:
    return Signer(app.secret_key, salt=SALT).sign(sid).decode()  # type: ignore[arg-type]


def sid_of(app: Flask, signed: str) -> str | None:
    try:
        return Signer(app.secret_key, salt=SALT).unsign(signed).decode()  # type: ignore[arg-type]
    except BadSignature:
        return None  # forged, signed with an old key, or a session carried whole


def _carrier(app: Flask) -> URLSafeTimedSerializer:
    """What signs a whole session into its cookie while the store is down: Flask's own
    format for its cookie sessions (tagged JSON), under a salt of its own."""
    return URLSafeTimedSerializer(
        app.secret_key,  # type: ignore[arg-type]
        salt=CARRIED_SALT,
        serializer=TaggedJSONSerializer(),
    )


def _new_sid() -> str:
    return secrets.token_urlsafe(32)


def session_cache(app: Flask) -> Cache:
    """Return the cache ``app``'s sessions live in: ``MCACHE_SESSION_URL``'s, else
    ``MCACHE_URL``'s, with ``MCACHE_SESSION_REPLICAS`` copies on a memcached pool, its
    reads counted apart as sessions."""
    config = dict(app.config)
    url_key = "MCACHE_SESSION_URL" if config.get("MCACHE_SESSION_URL") else "MCACHE_URL"
    url = config.get(url_key) or "memory://"
    replicas = config.get("MCACHE_SESSION_REPLICAS", 2)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise ConfigError(f"MCACHE_SESSION_REPLICAS must be a whole number >= 1, got {replicas!r}")
    copies = memcached_replicas(url, replicas)
    if copies is not None and copies > 1:
        config["MCACHE_REPLICAS"] = copies
    config["MCACHE_COUNTED_AS"] = SESSIONS
    return cache_from_config(config, url_key)
