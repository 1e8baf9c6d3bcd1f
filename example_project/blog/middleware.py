"""The footer's cache status, filled in after ``@cached_view`` answered (see
:mod:`example_project.cache_footer`)."""

from __future__ import annotations

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from example_project.cache_footer import filled


class CacheFooterMiddleware:
    """Say in each page's footer what the cache did for this request; outermost, so it
    times the whole answer and sees the headers every other layer set."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        if response.streaming or "html" not in response.get("Content-Type", ""):
            return response
        took = time.perf_counter() - started
        content = response.content  # joined anew on each read: read once
        body = filled(content, response.get("X-Cache"), response.get("X-Cache-Reason"), took)
        if body is not content:
            response.content = body
            if response.has_header("Content-Length"):
                response["Content-Length"] = str(len(body))
        return response
