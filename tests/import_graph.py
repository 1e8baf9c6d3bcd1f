"""The import graph of ``mcache``, ``django_mcache`` and ``flask_mcache``, read from the source.

Two threads importing modules at once deadlock only where the import locks they take
can be taken in opposite orders. A thread holds a module's lock while the module runs,
and takes the lock of each module it imports; CPython (before 3.15) takes a module's
own lock *before* it imports the module's package. So the locks follow the edges of
one graph: each ``import`` a module runs (at its top, or in a function, which may
run while another module is importing), and each module's edge to its package. While
that graph has no cycle, every thread takes its locks in one order, and no two
threads can each hold what the other waits for.

A package's lazily exported names (:func:`mcache.lazy_exports`) are imported when a
module asks its package for them (``from mcache import Cache``): that is an edge from
the asking module to the name's home, not from the package, which never runs the
import while it is itself being imported. Imports under ``if TYPE_CHECKING:`` never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"core": "mcache", "django_mcache": "django_mcache", "flask_mcache": "flask_mcache"}


def modules() -> dict[str, Path]:
    """Every module of the three packages, by its dotted name (``core/`` is ``mcache``)."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [package, *path.relative_to(ROOT / folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def lazy_exports(tree: ast.Module) -> dict[str, str]:
    """The table a package passes to ``lazy_exports`` (name: home module), if it has one."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "lazy_exports"
        ):
            return ast.literal_eval(node.value.args[1])
    return {}


def typed_exports(path: Path) -> dict[str, str]:
    """The names of ours a package imports for type checkers only, each with its module:
    from its stub (``__init__.pyi``) if it has one, else its ``if TYPE_CHECKING:`` block."""
    known = modules()
    stub = path.with_suffix(".pyi")
    tree = ast.parse((stub if stub.exists() else path).read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if stub.exists() or (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
    ]
    names = {}
    for block in blocks:
        for node in ast.walk(block):
            if isinstance(node, ast.ImportFrom) and node.module in known:
                for alias in node.names:
                    whole = f"{node.module}.{alias.name}"
                    names[alias.asname or alias.name] = whole if whole in known else node.module
    return names


def _runtime_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: at the top or in a function, not for typing."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(inner) for inner in ast.walk(node))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in skipped:
            yield node


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def lock_graph() -> dict[str, set[str]]:
    """For each module, the modules whose import locks it may take while holding its own."""
    known = modules()
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in known.items()}
    exported = {name: lazy_exports(tree) for name, tree in trees.items()}
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, tree in trees.items():
        package = name.rpartition(".")[0]
        if package:
            graph[name].add(package)
        is_package = known[name].name == "__init__.py"
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                source = _absolute(name, is_package, node)
                targets = [source]
                for alias in node.names:
                    targets.append(exported.get(source, {}).get(alias.name, ""))
                    targets.append(f"{source}.{alias.name}")
            graph[name].update(t for t in targets if t in known and t != name)
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one cycle of ``graph`` (its modules in order), or None if it has none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for after in sorted(graph[node]):
            if state.get(after) == 1:
                return [*path[path.index(after) :], after]
            if after not in state and (found := visit(after)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None
