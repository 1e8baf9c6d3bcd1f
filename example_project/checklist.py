"""The list of expectations both examples' ``--check`` print as they go (no framework needed)."""

from __future__ import annotations

__all__ = ["Checklist"]


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
