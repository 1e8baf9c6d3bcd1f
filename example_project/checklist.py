"""The list of expectations both examples' ``--check`` print as they go (no framework needed)."""

from __future__ import annotations

import re
import secrets

__all__ = ["CHECK_POSTS", "Checklist", "check_slug", "view_count_moved"]

CHECK_POSTS = 11
"""Posts of the blog a check creates for itself: one more than a page of the list."""


def check_slug() -> str:
    """Return the slug of the blog a check creates, so it never depends on (nor edits) the
    demo data an admin may have changed, and two checks on one database keep apart."""
    return f"check-{secrets.token_hex(4)}"


def view_count_moved(first: bytes, second: bytes) -> bool:
    """Return whether the second page shows one view more than the first, whatever the
    count was before (an admin may have set it)."""
    before, after = (re.search(rb"(\d+) views?", page) for page in (first, second))
    return before is not None and after is not None and int(after[1]) == int(before[1]) + 1


class Checklist:
    """Print each expectation as it is checked; remember the ones that failed."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def expect(self, ok: bool, what: str) -> None:
        print(("ok   " if ok else "FAIL ") + what)
        if not ok:
            self.problems.append(what)

    def verdict(self) -> int:
        """Print the summary line; return the exit status (0: all fine)."""
        print("all pages fine" if not self.problems else f"{len(self.problems)} problem(s)")
        return 1 if self.problems else 0
