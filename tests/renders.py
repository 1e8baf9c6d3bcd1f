"""A template variable that counts how often a cached fragment really rendered."""

from __future__ import annotations


class Renders:
    """Call it from a template: each real render of the fragment returns the next number."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self) -> int:
        self.count += 1
        return self.count
