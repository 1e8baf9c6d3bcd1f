"""What the example apps' pages say about themselves, read the same way for both apps."""

from __future__ import annotations

import re

__all__ = ["footer_disagrees", "footer_status", "online_shown"]


def footer_status(html: str) -> str:
    """Return the footer's "This request: …" sentence, its tags removed."""
    after = html.split("This request:", 1)[1].split("</footer>", 1)[0]
    return re.sub(r"<[^>]+>", "", after).strip().splitlines()[0]


def footer_disagrees(html: str, state: str | None, reason: str | None) -> str:
    """Return how the footer contradicts the ``X-Cache``/``X-Cache-Reason`` headers, or ""."""
    said = footer_status(html)
    if state is None:
        return "" if said.startswith("not cached as a whole") else f"{said!r} without X-Cache"
    if not said.startswith(state):
        return f"{said!r} for X-Cache: {state}"
    if reason and (reason not in said or "and stored" in said):
        return f"{said!r} for X-Cache-Reason: {reason}"
    if state == "MISS" and not reason and "and stored" not in said:
        return f"{said!r} for a MISS stored"
    return ""


def online_shown(html: str) -> int:
    """Return the number the header shows online."""
    found = re.search(r"(\d+)\s+online</span>", html)
    assert found is not None, "the header shows an online count"
    return int(found[1])
