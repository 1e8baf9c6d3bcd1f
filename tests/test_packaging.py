"""The installed package: importable as ``mcache``, free of framework imports, typed."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import mcache

REPO = Path(__file__).resolve().parent.parent


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
        "import sys, mcache, mcache.stores, mcache.testing;"
        "print(mcache.__file__);"
        "optional = ('django', 'flask', 'pymemcache', 'redis', 'prometheus_client',"
        " 'opentelemetry', 'debug_toolbar');"
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
