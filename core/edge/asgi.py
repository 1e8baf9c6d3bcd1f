"""``ASGIEdge``: stored pages answered before an ASGI application (Django's) runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any

from mcache.edge.answering import Edge
from mcache.edge.learning import Sent
from mcache.edge.record import CHANNEL
from mcache.edge.resolve import cache_resolver

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["ASGIEdge"]

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ASGIEdge:
    """Wrap an ASGI application: ``application = ASGIEdge(get_asgi_application(), "default")``.

    The same as :class:`~mcache.edge.WSGIEdge` (``cache`` and ``private_headers`` alike);
    a hit is one awaited read of the store and two messages, on the event loop.
    """

    def __init__(
        self,
        app: ASGIApp,
        cache: str | Cache | None = None,
        *,
        private_headers: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.edge = Edge(cache_resolver(cache, "ASGIEdge"), private_headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        environ = environ_of(scope)
        plan = self.edge.plan(environ)
        if plan is not None:
            answer = self.edge.near_answer(plan) or self.edge.answer(
                plan, await plan.cache.apeek(plan.key, None, plan.recipe.record.tags)
            )
            if answer is not None:
                headers = [(n.encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers]
                await send(
                    {"type": "http.response.start", "status": answer.status, "headers": headers}
                )
                await send({"type": "http.response.body", "body": answer.body})
                return
        await self._forwarded(scope, environ, receive, send)

    async def _forwarded(
        self, scope: Scope, environ: dict[str, Any], receive: Receive, send: Send
    ) -> None:
        """Run the application; learn its page from a response ``@cached_view`` recorded,
        as its last byte is sent (Django's handler returns later, after its cleanup)."""
        scope[CHANNEL] = None  # listening: the adapter records its page here
        sent = Sent(0, [])
        learns = environ["REQUEST_METHOD"] == "GET"

        async def sending(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                sent.status = message["status"]
                sent.headers = [
                    (n.decode("latin-1"), v.decode("latin-1")) for n, v in message["headers"]
                ]
            elif kind == "http.response.body" and learns:
                sent.add(message.get("body", b""))
                record = scope.get(CHANNEL)
                if record is not None and not message.get("more_body", False):
                    self.edge.learned.learn(environ, record, sent)
            await send(message)

        await self.app(scope, receive, sending)


def environ_of(scope: Scope) -> dict[str, Any]:
    """Return what the edge reads of an ASGI request, named as in a WSGI environ."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "SCRIPT_NAME": scope.get("root_path", ""),
        "PATH_INFO": scope["path"],
        "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
    }
    server = scope.get("server")
    if server:
        environ["SERVER_NAME"], environ["SERVER_PORT"] = server[0], str(server[1])
    for raw_name, raw_value in scope["headers"]:
        name = "HTTP_" + raw_name.decode("latin-1").upper().replace("-", "_")
        value = raw_value.decode("latin-1")
        if name in environ:  # a repeated header, joined as Django joins it
            value = f"{environ[name]}{'; ' if name == 'HTTP_COOKIE' else ','}{value}"
        environ[name] = value
    return environ
