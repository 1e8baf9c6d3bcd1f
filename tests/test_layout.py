"""The map of the code cannot go stale: ``docs/layout.md``'s module tables are what
``docs/tools/layout.py`` writes from the modules' own docstrings, and every module path
and dotted ``mcache`` name the docs give exists."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mcache import Cache

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
CORE_FOLDERS = {p.name for p in (ROOT / "core").iterdir() if p.is_dir() and p.name != "__pycache__"}


def test_the_layout_page_lists_every_module_as_its_docstring_says() -> None:
    checked = subprocess.run(
        [sys.executable, str(DOCS / "tools" / "layout.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stderr


def test_every_module_path_the_architecture_page_names_exists() -> None:
    page = (DOCS / "explanation" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_]+/)+[a-z_*]+\.py)`", page))
    assert len(named) > 20, named
    for path in sorted(named):
        top = path.split("/")[0]
        base = ROOT if top in {"core", "django_mcache", "flask_mcache", "docs"} else ROOT / "core"
        assert list(base.glob(path)), f"architecture.md names {path}, which does not exist"


def dotted_names() -> list[tuple[str, str]]:
    found = set()
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for name in re.findall(
            r"(?<![\w.])((?:mcache|django_mcache|flask_mcache)\.[a-z_]\w*(?:\.[A-Za-z_]\w*)+)", text
        ):
            found.add((str(page.relative_to(DOCS)), name))
    return sorted(found)


def resolves(name: str) -> bool:
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                return False
            found = getattr(found, attribute)
        return True
    return False


TELEMETRY = {
    "mcache.build",
    "mcache.build.duration",
    "mcache.outcome",
    "mcache.key",
    "mcache.family",
    "mcache.store_errors",
    "mcache.rebuild",
    "mcache.trace",
    "mcache.near",
    "mcache.views",
    "mcache.counters",
    "mcache.fresh_reads",
}


@pytest.mark.parametrize(("page", "name"), dotted_names())
def test_every_dotted_name_the_docs_give_exists(page: str, name: str) -> None:
    if name in TELEMETRY or re.fullmatch(r"django_mcache\.[EW]\d{3}", name):
        return  # a span, metric, attribute, logger or task name, or a check's id: no module
    method = name.removeprefix("mcache.cache.")
    if method != name and hasattr(Cache, method):
        return  # Flask's extension, conventionally named mcache: its .cache is a Cache
    assert resolves(name), f"{page} names {name}, which does not import"
