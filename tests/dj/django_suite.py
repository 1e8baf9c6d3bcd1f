"""Run Django's own cache test suite (``BaseCacheTests``) against ``MCacheBackend``.

    python -m tests.dj.django_suite memcached://127.0.0.1:11211

Django does not ship its tests in the wheel, so the ``tests/cache`` package of
the sdist matching the installed Django is downloaded once (``pip download``)
and kept under ``~/.cache/mcache`` (``MCACHE_DJANGO_TESTS`` overrides the
place). The suite runs in this process with its own settings, the way Django's
``runtests.py`` runs it, and prints one JSON line: the failing tests with the
first line of their error, and how many ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest
from pathlib import Path

BACKEND = "django_mcache.backend.MCacheBackend"


def suite_dir(version: str) -> Path:
    """Return a directory holding Django's ``cache`` test package for ``version``."""
    default = Path.home() / ".cache" / "mcache" / f"django-{version}-tests"
    root = Path(os.environ.get("MCACHE_DJANGO_TESTS") or default)
    if (root / "cache" / "tests.py").exists():
        return root
    with tempfile.TemporaryDirectory() as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"]
        subprocess.run(
            [*pip, "--no-binary", ":all:", f"django=={version}", "--dest", tmp], check=True
        )
        sdist = next(Path(tmp).glob("*.tar.gz"))
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/tests/cache/" in m.name and m.isfile()]
            for member in members:
                member.name = "cache/" + member.name.split("/tests/cache/", 1)[1]
            root.mkdir(parents=True, exist_ok=True)
            tar.extractall(root, members=members, filter="data")
    return root


def configure(location: str) -> None:
    """Configure Django as runtests.py would for the cache tests, on an mcache default cache."""
    import django
    from django.conf import settings

    sys.path.insert(0, str(suite_dir(django.__version__)))
    settings.configure(
        SECRET_KEY="django-suite",
        USE_TZ=False,
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "cache"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        CACHES={"default": {"BACKEND": BACKEND, "LOCATION": location}},
        DEFAULT_AUTO_FIELD="django.db.models.AutoField",
        MIDDLEWARE=[],
        ROOT_URLCONF=[],
    )
    django.setup()


def mcache_test_case(location: str) -> type:
    """Return Django's BaseCacheTests bound to MCacheBackend at ``location``."""
    from cache import tests as django_tests  # the downloaded package
    from django.test import TestCase, override_settings

    from mcache.errors import NotNumeric

    params = {"BACKEND": BACKEND, "LOCATION": location}
    caches = django_tests.caches_setting_for_tests(base=params, exclude={"cull", "zero_cull"})

    @override_settings(CACHES=caches)
    class MCacheBackendTests(django_tests.BaseCacheTests, TestCase):
        incr_decr_type_error = NotNumeric

    return MCacheBackendTests


def run(location: str) -> dict[str, object]:
    """Run the suite; return {"ran": n, "failed": {test: first line of the error}}."""
    configure(location)
    from django.test.runner import DiscoverRunner
    from django.test.utils import setup_test_environment, teardown_test_environment

    case = mcache_test_case(location)
    tests = unittest.TestLoader().loadTestsFromTestCase(case)
    runner = DiscoverRunner(verbosity=0, interactive=False)
    setup_test_environment()
    databases = runner.setup_databases()
    try:
        with open(os.devnull, "w") as quiet:
            result = unittest.TextTestRunner(stream=quiet, verbosity=0).run(tests)
    finally:
        runner.teardown_databases(databases)
        teardown_test_environment()
    failed = {}
    for test, trace in result.failures + result.errors:
        lines = [line for line in trace.strip().splitlines() if line.strip()]
        failed[test.id().rsplit(".", 1)[-1]] = lines[-1][:300] if lines else ""
    return {"ran": result.testsRun, "skipped": len(result.skipped), "failed": failed}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1])))
