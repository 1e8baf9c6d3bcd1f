"""Local HTTP servers for the purge tests: format checkers of Fastly's and Cloudflare's
published purge APIs (not the services: a format test, never a live one), and a tiny
origin whose pages carry xkey headers, for a real Varnish to cache.

A checker answers each request as the vendor's documentation says a well-formed one is
answered, and anything else with a 400 naming what is wrong, so a test sees a
malformed purge fail as it would against the real API. It can be told to answer 503
for a while (the endpoint down).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["Checker", "Origin", "checker", "origin", "redirecting"]


@dataclass
class Checker:
    """What a checker received and how it answers."""

    vendor: str
    ident: str
    token: str
    port: int = 0
    accepted: list[dict] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    down_for: int = 0
    """Answer the next this many requests with 503."""
    limited_for: int = 0
    """Answer the next this many requests with 429 and ``Retry-After: retry_after``."""
    retry_after: str = "1"
    arrivals: list[float] = field(default_factory=list)
    """When each request arrived (``time.monotonic()``)."""

    @property
    def api(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def problem(self, method: str, path: str, headers: dict[str, str], body: bytes) -> str | None:
        """Return what is wrong with the request for this vendor's API, or None."""
        if method != "POST":
            return f"method {method}"
        try:
            document = json.loads(body)
        except ValueError:
            return "the body is no JSON"
        if headers.get("content-type") != "application/json":
            return "Content-Type is not application/json"
        if self.vendor == "fastly":
            if path != f"/service/{self.ident}/purge":
                return f"path {path}"
            if headers.get("fastly-key") != self.token:
                return "Fastly-Key"
            keys = document.get("surrogate_keys")
            most = 256
        else:
            if path != f"/zones/{self.ident}/purge_cache":
                return f"path {path}"
            if headers.get("authorization") != f"Bearer {self.token}":
                return "Authorization"
            keys = document.get("tags")
            most = 100
        if not isinstance(keys, list) or not keys or len(keys) > most:
            return f"keys {keys!r}"
        if not all(isinstance(key, str) and re.fullmatch(r"[ -~]{1,1024}", key) for key in keys):
            return f"a key is no printable ASCII of at most 1,024 characters: {keys!r}"
        if self.vendor == "cloudflare" and any("," in key for key in keys):
            return "a cache tag holds a comma"
        if self.vendor == "fastly" and any(" " in key for key in keys):
            return "a surrogate key holds a space"
        return None

    def answer(self, problem: str | None) -> tuple[int, dict]:
        if self.vendor == "fastly":
            return (400, {"msg": problem}) if problem else (200, {"status": "ok"})
        if problem:
            return 400, {"success": False, "errors": [{"code": 1012, "message": problem}]}
        return 200, {"success": True, "errors": [], "messages": [], "result": {"id": "x"}}


@contextmanager
def checker(vendor: str, ident: str = "SVC123", token: str = "secret-token") -> Iterator[Checker]:
    """Serve a format checker of ``vendor`` (``fastly`` or ``cloudflare``) on a free port."""
    state = Checker(vendor, ident, token)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self._handle()

        def do_GET(self) -> None:  # what a followed redirect turns a POST into
            self._handle()

        def _handle(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {name.lower(): value for name, value in self.headers.items()}
            state.arrivals.append(time.monotonic())
            if state.limited_for > 0:
                state.limited_for -= 1
                self._reply(429, {"msg": "rate limited"}, {"Retry-After": state.retry_after})
                return
            if state.down_for > 0:
                state.down_for -= 1
                self._reply(503, {"msg": "down"})
                return
            problem = state.problem(self.command, self.path, headers, body)
            if problem is None:
                state.accepted.append({"headers": headers, "body": json.loads(body)})
            else:
                state.refused.append(problem)
            self._reply(*state.answer(problem))

        def _reply(self, status: int, document: dict, more: dict[str, str] | None = None) -> None:
            data = json.dumps(document).encode()
            self.send_response(status)
            for name, value in (more or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    with _serving(Handler) as port:
        state.port = port
        yield state


@dataclass
class Origin:
    """A site behind Varnish: ``/<name>`` answers with ``xkey: <tags[name]>`` and counts."""

    tags: dict[str, str]
    port: int = 0
    served: dict[str, int] = field(default_factory=dict)


@contextmanager
def origin(tags: dict[str, str]) -> Iterator[Origin]:
    """Serve an :class:`Origin` whose pages carry ``tags`` (page name → xkey value)."""
    state = Origin(tags)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            name = self.path.strip("/")
            state.served[name] = state.served.get(name, 0) + 1
            body = f"{name} #{state.served[name]}".encode()
            self.send_response(200)
            self.send_header("Cache-Control", "max-age=300")
            self.send_header("xkey", state.tags.get(name, ""))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with _serving(Handler) as port:
        state.port = port
        yield state


@contextmanager
def redirecting(to: str) -> Iterator[str]:
    """Serve an API that answers every POST with a 302 to ``to`` (the same path), which
    urllib's default handlers would follow, headers and all; yield its base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.send_response(302)
            self.send_header("Location", to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    with _serving(Handler) as port:
        yield f"http://127.0.0.1:{port}"


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[int]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
