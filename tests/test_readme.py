"""The README's Python examples run as written, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) >= 5
    namespace: dict[str, object] = {}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"README.md python block {number}", "exec")
        exec(code, namespace)


def test_docs_pages_examples_run() -> None:
    pages = sorted((README.parent / "docs").glob("*.md"))
    assert pages, "the docs pages are there"
    for page in pages:
        namespace: dict[str, object] = {}
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), re.S)
        for number, block in enumerate(blocks, 1):
            exec(compile(block, f"{page.name} python block {number}", "exec"), namespace)
