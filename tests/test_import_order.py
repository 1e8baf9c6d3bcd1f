"""No import-order trap: any modules of mcache, django_mcache and flask_mcache can be
imported from several threads at once, in any order, without a deadlock.

A threaded server (``runserver``, gunicorn's gthread workers) imports lazily in its
first requests; two threads importing ``mcache.cache`` and ``mcache.observe.outcome``
at once used to deadlock every time, because ``mcache/__init__.py`` imported its own
modules. The proof is the import graph (``tests/import_graph.py`` says why a graph
without a cycle cannot deadlock); the races below show it on real imports, each pair
in an interpreter that has imported none of ours.
"""

from __future__ import annotations

import ast
import importlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.import_graph import (
    ROOT,
    cycle,
    lazy_exports,
    lock_graph,
    modules,
    typed_exports,
)

ONLY_AT_DJANGO_START = {"django_mcache.models", "django_mcache.admin"}
"""Imported by Django itself while it sets up the installed app, before any request (and
not importable otherwise: a model needs its app installed)."""

FIRST_REQUEST = (
    # what settings, URLconfs and templates name, which Django imports at a first request
    "django_mcache",
    "django_mcache.backend",
    "django_mcache.views",
    "django_mcache.middleware",
    "django_mcache.sessions",
    "django_mcache.routers",
    "django_mcache.templatetags.mcache",
    "django_mcache.panels",
    "django_mcache.functions",
    "django_mcache.counters",
    "django_mcache.holes",
    "django_mcache.tasks",
    # what a Flask app imports, lazily in a view or a hook as often as at its top
    "flask_mcache",
    "flask_mcache.extension",
    "flask_mcache.views",
    "flask_mcache.sessions",
    "flask_mcache.sqlalchemy",
    "flask_mcache.jinja",
    "flask_mcache.dashboard",
    "flask_mcache.counters",
    # what an application names of the core
    "mcache",
    "mcache.cache",
    "mcache.stores",
    "mcache.edge",
    "mcache.refreshers",
    "mcache.observe.outcome",
    "mcache.web.page",
    "mcache.web.query",
)
"""The modules a first request can be the first to import: named by a site's settings,
URLconfs, templates or code (the modules below them come with these)."""


def race(pairs: list[tuple[str, str]], *packages: str) -> dict[str, str]:
    """Run ``tests/import_race.py`` on ``pairs`` in a fresh interpreter; return what failed."""
    done = subprocess.run(
        [sys.executable, "-m", "tests.import_race", *packages],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_import_graph_has_no_cycle() -> None:
    graph = lock_graph()
    assert len(graph) > 150, "every module of the three packages is read"
    assert "mcache.observe.outcome" in graph["mcache.engine.build"], "top-level imports count"
    assert "mcache" in graph["mcache.cache"], "each module's edge to its package counts"
    assert cycle(graph) is None, " -> ".join(cycle(graph) or [])


def test_a_cycle_is_found_where_there_is_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycle(graph) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_every_lazily_exported_name_is_typed_listed_and_found() -> None:
    """Each package's table of lazy exports names the same homes as its imports for type
    checkers, every name is in ``__all__``, and each is there when asked for."""
    trees = {
        name: ast.parse(path.read_text("utf-8"))
        for name, path in modules().items()
        if path.name == "__init__.py"
    }
    packages = {name: table for name, tree in trees.items() if (table := lazy_exports(tree))}
    assert {"mcache", "mcache.stores", "flask_mcache", "django_mcache"} <= set(packages)
    for package, table in packages.items():
        assert typed_exports(modules()[package]) == table, package
        module = importlib.import_module(package)
        assert set(table) <= set(module.__all__), package
        for name, home in table.items():
            value = getattr(module, name)
            assert value is importlib.import_module(home) or value is getattr(
                importlib.import_module(home), name
            ), f"{package}.{name}"


def test_no_package_imports_its_own_modules_when_imported() -> None:
    """What the graph's lack of cycles implies, said plainly for whoever adds an export:
    a package's ``__init__`` imports none of its own modules at its top."""
    graph = lock_graph()
    for name, path in modules().items():
        if path.name == "__init__.py":
            inside = sorted(t for t in graph[name] if t.startswith(f"{name}."))
            assert not inside, f"{name} imports {inside}: export them with lazy_exports"


@pytest.mark.timeout(900)  # some 1,300 interpreters, one at a time beside the other tests
def test_modules_first_imported_together_from_eight_threads_never_deadlock() -> None:
    """Every pair of the modules a first request can import, in both orders, and every
    module with each package above it (the package first: the order that deadlocks when
    its ``__init__`` imports the module), imported at once from 8 threads in an
    interpreter that has imported none of ours. Before the lazy exports, the first
    two pairs below deadlocked here in every run."""
    assert set(FIRST_REQUEST) <= set(modules())
    pairs = set(itertools.permutations(FIRST_REQUEST, 2))
    for name in modules():
        if name not in ONLY_AT_DJANGO_START:
            parts = name.split(".")
            pairs.update((".".join(parts[:i]), name) for i in range(1, len(parts)))
    pairs |= {
        ("mcache.cache", "mcache.observe.outcome"),
        ("mcache.observe.outcome", "mcache.cache"),
    }
    assert ("django_mcache.middleware", "django_mcache.views") in pairs
    assert len(pairs) > 1000
    assert race(sorted(pairs)) == {}


def test_the_race_finds_a_package_that_imports_its_own_modules(tmp_path: Path) -> None:
    """The harness has teeth: a package whose ``__init__`` imports its module deadlocks
    (or fails) when that module and the package are imported at once."""
    package = tmp_path / "eager"
    package.mkdir()
    (package / "__init__.py").write_text("from eager.engine import run\n")
    (package / "engine.py").write_text(
        textwrap.dedent(
            """
            import time
            time.sleep(0.05)  # what a module's imports cost, so the threads overlap
            from eager.outcome import told
            def run(): return told
            """
        )
    )
    (package / "outcome.py").write_text("import eager\ntold = 1\n")
    pairs = [("eager", "eager.outcome")] * 10
    env_path = f"{tmp_path}{os.pathsep}{ROOT}"
    done = subprocess.run(
        [sys.executable, "-m", "tests.import_race", "eager"],
        input=json.dumps(pairs),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "PYTHONPATH": env_path},
    )
    assert done.returncode == 0, done.stderr
    failures = json.loads(done.stdout)
    assert failures, "ten races of an eager package, and not one failed"
    # How the import system gives up varies: a deadlock detected (3.10-3.12), a module
    # partially initialised, or (3.13) its package gone from sys.modules
    signs = ("Deadlock", "partially initialized", "KeyError: 'eager'")
    assert any(sign in told for told in failures.values() for sign in signs), failures
