"""The trace letters are written down once (``mcache.observe.trace.LETTERS``): the docs'
table, the stats commands' legend and every letter the core records agree with it."""

from __future__ import annotations

import re
from pathlib import Path

from mcache.observe.trace import LEGEND, LETTERS

ROOT = Path(__file__).resolve().parents[2]


def test_the_docs_table_lists_every_letter_and_no_other() -> None:
    page = (ROOT / "docs" / "reference" / "trace-letters.md").read_text()
    documented = dict(re.findall(r"^\| `([A-Z])` \| (.+?) \|$", page, flags=re.M))
    assert documented.keys() == LETTERS.keys()
    for letter, meaning in LETTERS.items():
        assert documented[letter].startswith(meaning.split(":")[0]), letter


def test_every_letter_the_core_records_is_in_the_table() -> None:
    recorded: set[str] = set()
    for source in (ROOT / "core").rglob("*.py"):
        recorded |= set(re.findall(r"trace\([^()]*?,\s*\"([A-Z])\"\)", source.read_text()))
    assert recorded, "no trace call found: the pattern no longer matches the core's calls"
    assert recorded <= LETTERS.keys(), recorded - LETTERS.keys()


def test_the_legend_names_every_letter() -> None:
    assert [part.split()[0] for part in LEGEND.split(", ")] == list(LETTERS)
