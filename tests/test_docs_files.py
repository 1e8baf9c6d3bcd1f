"""The docs' file excerpts outside the tutorials (``python title="settings.py"`` blocks).

They are parts of a project, so they cannot run alone as the plain examples do
(``test_readme.py``) or be followed step by step as the tutorials are
(``test_tutorials.py``). What can still go stale is checked here: each compiles,
each ``settings.py`` excerpt executes and every mcache cache in its ``CACHES``
builds (an option renamed since would fail), and every name imported from
mcache's packages exists, called with keywords its signature takes.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest
from django.test import override_settings

from django_mcache.aliases import BACKEND
from django_mcache.config import cache_from_settings

DOCS = Path(__file__).resolve().parent.parent / "docs"
TITLED = re.compile(r'^( *)```python title="([^"]+)"\n(.*?)^\1```', re.S | re.M)
OURS = ("mcache", "django_mcache", "flask_mcache")


def excerpts() -> list[tuple[str, str, str]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        if page.parent.name == "tutorials":
            continue  # followed and run by test_tutorials.py
        for indent, title, body in TITLED.findall(page.read_text(encoding="utf-8")):
            lines = [line.removeprefix(indent) for line in body.splitlines()]
            found.append((str(page.relative_to(DOCS)), title, "\n".join(lines) + "\n"))
    return found


EXCERPTS = excerpts()


def test_the_docs_have_file_excerpts() -> None:
    assert len(EXCERPTS) >= 10


@pytest.mark.parametrize(
    ("page", "title", "code"), EXCERPTS, ids=[f"{p}:{t}" for p, t, _ in EXCERPTS]
)
def test_each_excerpt_holds_today(page: str, title: str, code: str) -> None:
    tree = ast.parse(code, f"{page} {title}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in OURS:
            module = importlib.import_module(node.module)  # type: ignore[arg-type]
            for alias in node.names:
                assert hasattr(module, alias.name), f"{page}: {node.module}.{alias.name} is gone"
    _check_calls(tree, page)
    if title.startswith("settings.py"):
        _check_settings(code, page)


def _check_calls(tree: ast.Module, page: str) -> None:
    """Each call of a decorator imported from our packages uses keywords it takes."""
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in OURS:
            module = importlib.import_module(node.module)  # type: ignore[arg-type]
            imported.update({a.asname or a.name: getattr(module, a.name) for a in node.names})
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = imported.get(node.func.id)
            if callable(target):
                accepted = inspect.signature(target).parameters
                for keyword in node.keywords:
                    assert keyword.arg in accepted, f"{page}: {node.func.id}({keyword.arg}=)"


def _check_settings(code: str, page: str) -> None:
    namespace: dict[str, object] = {}
    exec(compile(code, page, "exec", dont_inherit=True), namespace)
    caches = namespace.get("CACHES", {})
    assert isinstance(caches, dict)
    with override_settings(CACHES=caches):  # an alias: LOCATION names a cache beside it
        for params in caches.values():
            if params.get("BACKEND") == BACKEND:
                cache_from_settings(params["LOCATION"], params)  # raises on a stale option


COLUMNS = 88


def test_code_lines_fit_88_columns() -> None:
    """Every line of a fenced block under docs/ is at most 88 columns wide.

    The docs' code column shows about 88 characters on a laptop; a longer line is
    cut, and the reader must scroll sideways to see its end. A comment goes on its
    own line above the code it explains. The one exemption: what a command prints
    (a line of a ```console block not starting with ``$ ``), which the page shows
    as the command prints it.
    """
    too_long = []
    for page in sorted(DOCS.rglob("*.md")):
        fence = None
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("```"):
                fence = None if fence else line.strip()
                continue
            output = fence == "```console" and not line.lstrip().startswith("$ ")
            if fence and not output and len(line.rstrip()) > COLUMNS:
                too_long.append(f"{page.relative_to(DOCS.parent)}:{number}")
    assert too_long == [], f"lines over {COLUMNS} columns: {too_long}"
