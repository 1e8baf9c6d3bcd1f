"""``WSGIEdge``: stored pages answered before a WSGI application (Django, Flask) runs."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from mcache.edge.answering import Edge
from mcache.edge.learning import Sent
from mcache.edge.record import CHANNEL, PageRecord
from mcache.edge.resolve import cache_resolver

if TYPE_CHECKING:
    from mcache.cache import Cache

__all__ = ["WSGIEdge"]

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class WSGIEdge:
    """Wrap a WSGI application: ``application = WSGIEdge(get_wsgi_application(), "default")``.

    ``cache``: the pages' cache, a Django alias or an mcache ``Cache`` (None: any the
    application's ``@cached_view`` uses). ``private_headers``: request headers that make
    a visitor someone (an API key, say), besides ``Authorization`` and the session
    cookie: requests carrying one always go to the application.
    """

    def __init__(
        self,
        app: WSGIApp,
        cache: str | Cache | None = None,
        *,
        private_headers: Sequence[str] = (),
    ) -> None:
        self.app = app
        self.edge = Edge(cache_resolver(cache, "WSGIEdge"), private_headers)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        plan = self.edge.plan(environ)
        if plan is not None:
            answer = self.edge.near_answer(plan) or self.edge.answer(
                plan, plan.cache.peek(plan.key, None, plan.recipe.record.tags)
            )
            if answer is not None:
                start_response(_status_line(answer.status), answer.headers)
                return [answer.body]
        return self._forwarded(environ, start_response)

    def _forwarded(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        """Run the application; learn its page from a response ``@cached_view`` recorded."""
        arrived = {name: environ.get(name) for name in self.edge.learned.names}
        environ[CHANNEL] = None  # listening: the adapter records its page here
        seen: list[Sent] = []

        def starting(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            seen[:] = [Sent(int(status[:3]), list(headers))]
            return start_response(status, headers, exc_info)

        body = self.app(environ, starting)
        record = environ.get(CHANNEL)
        if record is None or environ.get("REQUEST_METHOD") != "GET":
            return body
        return _Watched(body, lambda: seen[0] if seen else None, self._learner(arrived, record))

    def _learner(self, arrived: dict[str, Any], record: PageRecord) -> Callable[[Sent], bool]:
        return lambda sent: self.edge.learned.learn(arrived, record, sent)


class _Watched:
    """The application's body, passed on chunk by chunk and learned from once all sent."""

    def __init__(
        self, body: Iterable[bytes], sent: Callable[[], Sent | None], learn: Callable[[Sent], bool]
    ) -> None:
        self.body, self.sent, self.learn = body, sent, learn
        self.seen: Sent | None = None

    def __iter__(self) -> Iterator[bytes]:
        seen = Sent(0, [])
        for chunk in self.body:
            seen.add(chunk)
            yield chunk
        self.seen = seen

    def close(self) -> None:
        close = getattr(self.body, "close", None)
        if close is not None:
            close()
        sent = self.sent()
        if self.seen is not None and sent is not None:  # the whole body went out
            sent.length, sent.crc = self.seen.length, self.seen.crc
            self.learn(sent)


@functools.cache  # a handful of statuses, asked on every answer
def _status_line(status: int) -> str:
    try:
        return f"{status} {HTTPStatus(status).phrase}"
    except ValueError:
        return f"{status} Unknown"
