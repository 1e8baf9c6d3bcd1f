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


ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?([\w.]+)`")
PACKAGES = {"mcache": ROOT / "core", "django_mcache": ROOT / "django_mcache"}
PACKAGES["flask_mcache"] = ROOT / "flask_mcache"


def module_names() -> list[str]:
    names = []
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def cross_references() -> list[tuple[str, str]]:
    found = set()
    for folder in PACKAGES.values():
        for path in sorted(folder.rglob("*.py")):
            for target in ROLE.findall(path.read_text(encoding="utf-8")):
                if target.startswith(".") or target.split(".")[0] in PACKAGES:
                    found.add((str(path.relative_to(ROOT)), target))
    return sorted(found)


def resolves(name: str) -> bool:
    """Whether ``name`` imports: a module, then attributes, where an attribute may also be
    declared only (a dataclass field, a protocol's annotation, a slot) with no class value."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except (ImportError, LookupError):  # LookupError: an admin module, without the admin
            continue
        for attribute in parts[cut:]:
            if not hasattr(found, attribute):
                declared = {
                    *getattr(found, "__annotations__", {}),
                    *getattr(found, "__slots__", ()),
                }
                return attribute in declared
            found = getattr(found, attribute)
        return True
    return False


@pytest.mark.parametrize(("path", "target"), cross_references())
def test_every_cross_reference_in_a_docstring_resolves(path: str, target: str) -> None:
    """``:mod:`mcache.x``` names a module that exists; ``:class:`.x.Y``` one of some module
    whose name ends so (as Sphinx resolves a relative reference)."""
    if target.startswith("."):
        assert any(resolves(m + target) for m in module_names()), (
            f"{path} refers to {target}, which no module has"
        )
    else:
        assert resolves(target), f"{path} refers to {target}, which does not import"
