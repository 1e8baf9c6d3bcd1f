"""Write (or, with ``--check``, compare) the module tables of ``docs/layout.md``.

Each row is a module's path and the first paragraph of its docstring, so the page
says what the code says: a module added, moved or renamed changes the page, and
``tests/test_layout.py`` fails until this is run again (``python docs/tools/layout.py``).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "layout.md"
BEGIN = (
    "<!-- the tables below are written by docs/tools/layout.py: run it after adding a module -->"
)
END = "<!-- end of the written tables -->"
PACKAGES = {
    "core": "`core/`, installed as `mcache`",
    "django_mcache": "`django_mcache/`",
    "flask_mcache": "`flask_mcache/`",
    "example_project": "`example_project/`",
}


def summary(path: Path) -> str:
    """The first paragraph of the module's docstring, on one line."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    first = " ".join(docstring.split("\n\n")[0].split()).replace("|", "\\|")
    return re.sub(r":\w+:`~?([^`]+)`", r"`\1`", first)  # a Sphinx role, shown as code


def tables() -> str:
    parts = []
    for package, title in PACKAGES.items():
        folder = ROOT / package
        by_folder: dict[Path, list[Path]] = {}
        for module in sorted(folder.rglob("*.py")):
            if "migrations" in module.parts:
                continue
            by_folder.setdefault(module.parent, []).append(module)
        parts.append(f"### {title}\n")
        for subfolder, modules in by_folder.items():
            where = subfolder.relative_to(ROOT).as_posix() + "/"
            parts.append(f"#### `{where}`\n\n| module | what it holds |\n|---|---|")
            for module in modules:
                parts.append(f"| `{module.relative_to(ROOT).as_posix()}` | {summary(module)} |")
            parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def written(page: str) -> str:
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{tables()}\n{END}{tail}"


def main() -> int:
    page = PAGE.read_text(encoding="utf-8")
    if BEGIN not in page or END not in page:
        print(f"{PAGE}: the markers are missing", file=sys.stderr)
        return 2
    new = written(page)
    if "--check" in sys.argv:
        if new != page:
            print("docs/layout.md is stale: run python docs/tools/layout.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
