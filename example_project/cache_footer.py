"""What the cache did for a request, said in the page's footer: both example apps fill the
``<!--mcache-status-->`` their pages end with from the response's ``X-Cache`` header.

The cached page holds the marker, not the words: each response says what happened to
it (a HIT, a MISS and how long the build took, a STALE copy, a BYPASS and why), and says
what its headers say: a MISS that carries an ``X-Cache-Reason`` (the store was down, say)
was built but not stored, and the footer says so, with the reason.
"""

from __future__ import annotations

from html import escape
from pathlib import Path

from mcache.observe.outcome import REASONS

MARKER = b"<!--mcache-status-->"
STYLESHEET = Path(__file__).parent / "blog" / "static" / "blog" / "site.css"


def status_html(state: str | None, reason: str | None, seconds: float) -> str:
    """Return the footer's words for a response answered ``state`` (its ``X-Cache``)."""
    took = f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"
    if state == "HIT":
        return f'<span class="cache hit">HIT</span> served from the cache in {took}.'
    why = _reason_html(reason) if reason else ""
    if state == "MISS" and why:
        return f'<span class="cache miss">MISS</span> built in {took}, not stored: {why}.'
    if state == "MISS":
        return f'<span class="cache miss">MISS</span> built in {took} and stored.'
    if state == "STALE":
        return (
            '<span class="cache stale">STALE</span> a stale copy, served while one request'
            " rebuilds the page."
        )
    if state == "BYPASS":
        return f'<span class="cache bypass">BYPASS</span> not cached{f": {why}" if why else ""}.'
    return f'<span class="cache none">not cached as a whole</span>, answered in {took}.'


def _reason_html(reason: str) -> str:
    """Return ``reason`` as the footer shows it: the header's word, its meaning on hover."""
    meaning = REASONS.get(reason, "")
    return f'<code title="{escape(meaning)}">{escape(reason)}</code>'


def filled(body: bytes, state: str | None, reason: str | None, seconds: float) -> bytes:
    """Return ``body`` with its marker replaced by the status (unchanged without one)."""
    if MARKER not in body:
        return body
    return body.replace(MARKER, status_html(state, reason, seconds).encode())
