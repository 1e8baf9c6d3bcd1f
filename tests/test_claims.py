"""What the README, the docs and the packaging metadata claim holds today, on a fresh machine.

mcache is not on PyPI and its docs are published nowhere (docs/releasing.md is
the checklist for when they are): no page may tell a reader to ``pip install``
the bare distribution name, call PyPI its source, or give an address that
serves nothing. And the repository's own housekeeping: no tracked file is one
``.gitignore`` says to ignore.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CLAIMING = sorted(
    [ROOT / "README.md", ROOT / "setup.cfg", ROOT / "mkdocs.yml", *(ROOT / "docs").rglob("*.md")]
)
RELEASING = ROOT / "docs" / "releasing.md"

UNPUBLISHED = [
    # pip install django-flask-mcache (with or without extras), not from a path or a wheel
    (re.compile(r"pip3? install (-U )?\"?django-flask-mcache\b"), "a pip install from PyPI"),
    (re.compile(r"\(PyPI\)|from PyPI|on PyPI:"), "PyPI as where mcache comes from"),
    (re.compile(r"github\.io|mcache-dev"), "an address that serves nothing"),
]


@pytest.mark.parametrize("path", CLAIMING, ids=[str(p.relative_to(ROOT)) for p in CLAIMING])
def test_nothing_claims_a_release_that_has_not_happened(path: Path) -> None:
    if path == RELEASING:
        return  # the checklist names the steps to come, as steps to come
    text = path.read_text(encoding="utf-8")
    for pattern, what in UNPUBLISHED:
        found = pattern.search(text)
        assert found is None, f"{path.relative_to(ROOT)} claims {what}: {found.group(0)!r}"


def test_the_checklist_is_in_the_docs_site() -> None:
    assert "Releasing: releasing.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    assert "pip install django-flask-mcache" in RELEASING.read_text(encoding="utf-8")


def test_the_install_pages_show_the_shadowing_trap() -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started" / "install.md"):
        text = page.read_text(encoding="utf-8")
        assert "cannot import name 'Cache' from 'mcache' (unknown" in text, page
        assert "git clone <this repository's URL> django-flask-mcache" in text, page


def test_no_tracked_file_is_ignored() -> None:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--ignored", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    assert listed.stdout.split() == [], ".gitignore names tracked files"


OUTSIDE = re.compile(
    r"DESIGN\.md|\bseed \d{3}\b|\bissue \d+\b|\b(?:the|this|that) (?:[\w-]+ )?issue(?:'s)?\b",
    re.IGNORECASE,
)
"""A design file beside the repository, a numbered seed, an issue tracker's numbers or
an issue named as if the reader had it ("the issue", "the example-project issue")."""
FOLDERS = ("core", "django_mcache", "flask_mcache", "example_project", "docs", "tests")
OWN_FILES = [
    *sorted(
        path
        for folder in FOLDERS
        for path in (ROOT / folder).rglob("*")
        if path.suffix in {".py", ".pyi", ".md", ".html", ".txt"}
        and "__pycache__" not in path.parts
    ),
    *(
        ROOT / name
        for name in ("README.md", "setup.cfg", "mkdocs.yml", "noxfile.py", "pyproject.toml")
    ),
]


def test_nothing_cites_what_lies_outside_the_repository() -> None:
    """Sources are named by author, title and year; the design is in docs/, not beside it."""
    me = Path(__file__).resolve()
    cited = [
        f"{path.relative_to(ROOT)}: {found.group(0)!r}"
        for path in OWN_FILES
        if path != me
        for found in OUTSIDE.finditer(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert cited == []
