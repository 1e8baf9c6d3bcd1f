"""The documentation's Python examples run as written.

README.md's ```python blocks run in order in one namespace, and none of them may
warn (an ``MCacheWarning`` is an error here); each page under
``docs/`` (recursively) runs its blocks in order in a namespace of its own, so a
page's examples must carry their own imports and setup, as a reader copying
them would need. Blocks fenced with a title (```python title="app.py"```, the
tutorials' files) and other languages (bash, console, text, django, jinja) are
not run here.
"""

from __future__ import annotations

import re
import textwrap
import warnings
from pathlib import Path

import pytest

from mcache.errors import MCacheWarning

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,})(?P<info>[^`\n]*)$")


def python_blocks(text: str) -> list[str]:
    """The bodies of the plain ```python fences in ``text`` (indented ones dedented)."""
    blocks: list[str] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        index += 1
        if not opening:
            continue
        indent, ticks = opening["indent"], opening["ticks"]
        body: list[str] = []
        while index < len(lines):
            line = lines[index]
            index += 1
            if line.strip() == ticks and line.startswith(indent):
                break
            body.append(line)
        if opening["info"].strip() == "python":
            blocks.append(textwrap.dedent("\n".join(body)) + "\n")
    return blocks


def run_blocks(blocks: list[str], source: str) -> None:
    """Run the blocks as a script would; an mcache warning fails them (they must run clean)."""
    namespace: dict[str, object] = {"__name__": "__main__"}  # as a script runs
    with warnings.catch_warnings():
        warnings.simplefilter("error", MCacheWarning)
        for number, block in enumerate(blocks, 1):
            code = compile(block, f"{source} python block {number}", "exec", dont_inherit=True)
            exec(code, namespace)


def test_readme_examples_run() -> None:
    blocks = python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README shows its Django and Flask settings as Python"
    run_blocks(blocks, "README.md")


PAGES = sorted(DOCS.rglob("*.md"))


def test_docs_pages_are_found() -> None:
    assert len(PAGES) >= 10, PAGES


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(DOCS)) for p in PAGES])
def test_docs_page_examples_run(page: Path) -> None:
    run_blocks(python_blocks(page.read_text(encoding="utf-8")), str(page.relative_to(ROOT)))


def test_fences_are_read_as_written() -> None:
    text = (
        "```python\na = 1\n```\n"
        '```python title="app.py"\nraise SystemExit\n```\n'
        "```bash\nexit 1\n```\n"
        "!!! note\n\n    ```python\n    b = a + 1\n    ```\n"
    )
    assert python_blocks(text) == ["a = 1\n", "b = a + 1\n"]


README_LINES = 250
"""What a new user reads first; the rest belongs on the docs site."""


def test_the_readme_stays_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_LINES, f"README.md is {lines} lines: move some to docs/"


def test_the_readme_figures_are_one_days_runs() -> None:
    """The Figures section names one date, and every figure it quotes is recorded in
    docs/benchmarks.md on that date."""
    text = README.read_text(encoding="utf-8")
    figures = text.split("## Figures", 1)[1].split("\n## ", 1)[0]
    dates = set(re.findall(r"\b20\d\d-\d\d-\d\d\b", figures))
    assert len(dates) == 1, dates
    (day,) = dates
    benchmarks = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    sections = re.split(r"\n(?=## )", benchmarks)
    summaries = ("## Headline figures", "## Every figure")  # they mix days
    that_day = "\n".join(
        [part for part in sections if day in part and not part.startswith(summaries)]
        + [line for line in benchmarks.splitlines() if f"({day})" in line]
    )
    for figure in re.findall(r"\b\d[\d,]*(?:\.\d+)?(?:×|%| µs|/s)?", figures):
        number = figure.rstrip("×% µs/")
        if len(number) > 1 and number != day[:4] and not day.startswith(number):
            assert number in that_day, f"{figure} is not among the {day} figures"
