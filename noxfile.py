"""The Python x Django x Flask version matrix: ``nox -s matrix`` (``.ci/run`` runs it).

The full suite runs in ``.ci/run`` twice: on the main combination (the machine's
``python3``, 3.11 here, with Django 5.2 and Flask 3.x) and on the newest supported Python
with the newest Django and Flask pip resolves. Each session here installs one other
combination and runs the fast subset below, the tests where the Python, Django and Flask
versions matter. With the two full runs, the combinations cover each Python, Django and
Flask version at least once, within what each release supports (Django 6.x needs Python
3.12 or later; Django 4.2 stops at Python 3.12).

``nox -s matrix`` needs the Pythons of its rows on ``PATH`` (python3.10, python3.12,
python3.13); a missing one fails the run. ``nox -l`` lists the sessions,
``nox -s "matrix(py3.10-dj4.2-fl2.3)"`` runs one, and ``nox -s matrix -- tests/fl`` runs
other tests than the subset.
"""

from __future__ import annotations

import os

import nox

nox.options.sessions = ["matrix"]
nox.options.error_on_missing_interpreters = True
nox.options.reuse_existing_virtualenvs = False

DJANGO = {
    "4.2": "Django~=4.2.0",
    "5.2": "Django~=5.2.0",
    "6.0": "Django~=6.0.0",
    "6.1": "Django~=6.1.0",
}
FLASK = {"2.3": "Flask[async]~=2.3.0", "3.x": "Flask[async]>=3,<4"}

COMBINATIONS = [
    # (Python, Django, Flask)
    ("3.10", "4.2", "2.3"),  # the oldest of everything
    ("3.12", "6.0", "3.x"),  # Django 6.0 on its oldest Python
    ("3.13", "6.1", "2.3"),  # the newest Python and Django with the oldest Flask
]
"""Besides the main combination, (3.11, 5.2, 3.x), which ``.ci/run`` tests in full, as it
does the newest (3.13 with the newest Django and Flask). ``.ci/run`` runs the sessions side
by side, one each."""

GET_OR_BUILD = "tests/core/test_get_or_build.py"
FAST = [
    # the Django and Flask integrations, Django's own cache test suite among them
    "tests/dj",
    "tests/fl",
    # the dashboard and the example site in a real browser (the admin's API moves between
    # Django versions); the docs' own browser test needs MkDocs, the main combination's
    "tests/browser/test_dashboard_django.py",
    "tests/browser/test_dashboard_flask.py",
    "tests/browser/test_example_site.py",
    # the core where it leans on the language and the standard library
    "tests/core/test_cache_basics.py",
    "tests/core/test_memory_store.py",
    "tests/core/test_async_plain.py",
    "tests/core/test_async_stores.py",
    "tests/core/test_codec.py",
    "tests/core/test_keys.py",
    "tests/core/test_dependencies.py",
    "tests/core/test_store_urls.py",
    "tests/core/test_stale_sets.py",
    "tests/core/test_refresh.py",
    "tests/core/test_metrics_export.py",
    # the flush at exit (which Pythons start a thread at interpreter shutdown varies)
    f"{GET_OR_BUILD}::test_a_process_that_exits_before_the_interval_still_adds_its_counts[redis]",
    f"{GET_OR_BUILD}::test_exit_waits_about_a_second_for_a_hung_server",
    # django.tasks (Django 6.0) or the django-tasks backport (earlier)
    "tests/queues/test_queues.py::test_django_tasks_workers_rebuild_each_stale_key_once",
    # the example project's Django site (its migrations) and its Flask twin
    "tests/test_example_project.py::test_every_page_answers_hits_and_follows_an_edit",
    "tests/test_example_project.py::test_the_flask_twin_reads_the_same_data_and_follows_an_edit",
    # what this combination installed: the extras and a framework-free core
    "tests/test_packaging.py",
]
"""About a minute and a half of tests; the whole suite takes about fifteen."""


@nox.session
@nox.parametrize(
    ("python", "django", "flask"),
    [
        nox.param(python, django, flask, id=f"py{python}-dj{django}-fl{flask}")
        for python, django, flask in COMBINATIONS
    ],
)
def matrix(session: nox.Session, django: str, flask: str) -> None:
    """Install one combination and run the fast subset on it, servers required."""
    # A wheel built beforehand (.ci/run builds one) installs without writing into the
    # checkout, so sessions can run side by side; without one, the checkout, editable.
    wheel = os.environ.get("MCACHE_MATRIX_WHEEL")
    package = f"{wheel}[all,test]" if wheel else ".[all,test]"
    session.install(*([] if wheel else ["-e"]), package, DJANGO[django], FLASK[flask])
    session.run(
        "python",
        "-c",
        "import sys, django, flask, importlib.metadata as m;"
        "print(sys.version.split()[0], 'Django', django.__version__, 'Flask', m.version('flask'))",
    )
    session.run(
        "pytest",
        "-p",
        "no:cacheprovider",
        *(session.posargs or FAST),
        env={"MCACHE_REQUIRE_SERVERS": "1"},
    )
