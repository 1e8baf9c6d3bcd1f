"""The installed package: importable as ``mcache``, free of framework imports, typed.

Installed as the distribution ``django-flask-mcache``; its extras each install what
their feature imports and no more (read back from the installed metadata).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import mcache

REPO = Path(__file__).resolve().parent.parent
DIST = "django-flask-mcache"

RUNTIME_EXTRAS = {
    "memcached": {"pymemcache"},
    "redis": {"redis", "hiredis"},
    "msgpack": {"msgpack"},
    "django": {"django"},
    "flask": {"flask"},
    "sqlalchemy": {"sqlalchemy"},
    "example": {"rich"},
    "postgres": {"psycopg"},
    "celery": {"celery"},
    "rq": {"rq"},
    "tasks": {"django-tasks", "django-tasks-db"},
    "toolbar": {"django-debug-toolbar"},
    "prometheus": {"prometheus-client"},
    "opentelemetry": {"opentelemetry-api"},
}
"""Each runtime extra and exactly the distributions it installs."""
TOOL_EXTRAS = {
    "docs": {"mkdocs", "mkdocs-material", "mkdocstrings", "ruff"},
    "dev": {"nox", "build", "twine", "import-linter"},
}


def _run_elsewhere(code: str) -> str:
    """Run Python in a directory outside the checkout, so only the installed package is seen."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory() as cwd:
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True
        )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_core_imports_without_frameworks() -> None:
    out = _run_elsewhere(
        "import sys, mcache, mcache.stores, mcache.testing.store_contract;"
        "print(mcache.__file__);"
        "optional = ('django', 'flask', 'werkzeug', 'jinja2', 'asgiref', 'pymemcache',"
        " 'redis', 'hiredis', 'psycopg', 'sqlalchemy', 'msgpack', 'celery', 'rq',"
        " 'django_tasks', 'debug_toolbar', 'prometheus_client', 'opentelemetry', 'rich',"
        " 'matplotlib');"
        "print(sorted(m for m in optional if m in sys.modules))"
    )
    location, loaded = out.splitlines()
    assert Path(location).resolve() == (REPO / "core" / "__init__.py").resolve() or (
        "site-packages" in location
    )
    assert loaded == "[]", f"importing mcache pulled in {loaded}"


def test_top_level_core_is_not_a_package_name() -> None:
    out = _run_elsewhere("import importlib.util; print(importlib.util.find_spec('core'))")
    assert out == "None", "core/ must install as 'mcache', never as a top-level 'core'"


def test_public_names_and_typing_marker() -> None:
    for name in ("Cache", "Codec", "NO_VALUE", "Store", "make_key", "errors"):
        assert name in mcache.__all__
        assert hasattr(mcache, name)
    assert (Path(mcache.__file__).parent / "py.typed").exists()
    from mcache.stores import MemcachedStore, MemoryStore, RedisStore, from_url

    assert all((MemcachedStore, MemoryStore, RedisStore, from_url))


def _extras() -> dict[str, list[Requirement]]:
    """The installed distribution's extras, each with its requirements."""
    try:
        meta = metadata.metadata(DIST)
    except metadata.PackageNotFoundError:  # pragma: no cover - an install under the old name
        pytest.fail(f'{DIST} is not installed: pip install -e ".[all,test]"', pytrace=False)
    requirements = [Requirement(line) for line in metadata.requires(DIST) or []]
    assert all(r.marker is not None for r in requirements), "mcache itself requires nothing"
    return {
        extra: [r for r in requirements if r.marker.evaluate({"extra": extra})]  # type: ignore[union-attr]
        for extra in meta.get_all("Provides-Extra") or []
    }


def _names(requirements: list[Requirement]) -> set[str]:
    return {canonicalize_name(r.name) for r in requirements}


def test_the_distribution_installs_the_import_names() -> None:
    assert metadata.metadata(DIST)["Name"] == DIST
    owners = metadata.packages_distributions()
    for package in ("mcache", "django_mcache", "flask_mcache"):
        assert DIST in owners.get(package, []), package


def test_each_extra_installs_exactly_what_its_feature_needs() -> None:
    extras = _extras()
    for extra, names in {**RUNTIME_EXTRAS, **TOOL_EXTRAS}.items():
        assert _names(extras[extra]) == names, extra
    assert "django-redis" not in _names(extras["django"]), "mcache never imports django_redis"
    assert "flask-sqlalchemy" not in _names(extras["sqlalchemy"]), "plain SQLAlchemy suffices"
    (flask,) = extras["flask"]
    assert "async" in flask.extras, "async views need Flask[async] (asgiref)"
    # Libraries only the tests import stay in the test extra.
    assert {"django-redis", "flask-sqlalchemy", "pytest"} <= _names(extras["test"])


def test_all_is_every_runtime_extra_and_nothing_else() -> None:
    extras = _extras()
    assert set(extras) == {*RUNTIME_EXTRAS, *TOOL_EXTRAS, "all", "test"}
    runtime = {str(r).split(";")[0] for extra in RUNTIME_EXTRAS for r in extras[extra]}
    assert {str(r).split(";")[0] for r in extras["all"]} == runtime


def test_the_classifiers_name_the_versions_the_matrix_tests() -> None:
    """Each Python and Django classifier is a version CI runs: noxfile.py's combinations
    plus the main one (.ci/run's full suite on Python 3.11 and Django 5.2)."""
    import ast

    tree = ast.parse((REPO / "noxfile.py").read_text())
    (combinations,) = (
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMBINATIONS"
    )
    pythons = {"3.11"} | {python for python, _, _ in combinations}
    djangos = {"5.2"} | {django for _, django, _ in combinations}
    classifiers = metadata.metadata(DIST).get_all("Classifier") or []
    prefix = "Programming Language :: Python :: 3."
    assert {c.rsplit(" :: ", 1)[1] for c in classifiers if c.startswith(prefix)} == pythons
    prefix = "Framework :: Django :: "
    assert {c.removeprefix(prefix) for c in classifiers if c.startswith(prefix)} == djangos
    assert metadata.metadata(DIST)["Requires-Python"] == f">={min(pythons, key=_version)}"


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def test_the_readmes_wheel_installs_where_no_clone_is(tmp_path: Path) -> None:
    """The README's second way in: ``python -m build --wheel``, then pip install the file."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    wheel_line = next(line for line in readme.splitlines() if line.startswith('pip install "dist/'))
    wheel_name = wheel_line.split('"dist/', 1)[1].split("[", 1)[0]
    source = tmp_path / "clone"  # the tracked files, as a fresh clone has them
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    for name in filter(None, tracked):
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, source / name)
    built = subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path)],
        cwd=source,
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    assert (tmp_path / wheel_name).exists(), f"the README names {wheel_name}, the build made" + (
        f" {[p.name for p in tmp_path.iterdir()]}"
    )
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    installed = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", str(tmp_path / wheel_name)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr
    code = "import mcache, pathlib; print(mcache.Cache('memory://').single_flight, mcache.__file__)"
    ran = subprocess.run([python, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("lock ") and str(venv) in ran.stdout, ran.stdout
    packages = sorted(
        ".".join(("mcache", *init.parent.relative_to(REPO / "core").parts))
        for init in (REPO / "core").rglob("__init__.py")
    )
    code = (
        "import importlib.util, sys;"
        " print([p for p in sys.argv[1:] if importlib.util.find_spec(p) is None])"
    )
    found = subprocess.run(
        [python, "-c", code, *packages], cwd=tmp_path, capture_output=True, text=True
    )
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]", f"packages the wheel leaves out: {found.stdout}"
    templates = sorted(
        str(path.relative_to(REPO)) for path in (REPO / "django_mcache").rglob("*.html")
    )
    with zipfile.ZipFile(tmp_path / wheel_name) as wheel:
        missing = set(templates) - set(wheel.namelist())
    assert templates and not missing, f"templates the wheel leaves out: {sorted(missing)}"
