"""A cache that cannot invalidate says so: ``depends_on=`` in a site where no change would
bump its tags fails where it is written (``ImproperlyConfigured``), so ``manage.py check``
and the first import of the URLconf show it, instead of a page that stays stale.

Two ways to get there: ``django_mcache`` left out of ``INSTALLED_APPS`` (its app connects
the ORM signals), or a model left out by ``MCACHE_MODELS`` / ``MCACHE_EXCLUDE_MODELS``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_mcache.functions import cached
from django_mcache.views import cached_view
from tests.dj.blog.models import Post

ROOT = Path(__file__).resolve().parents[2]


def test_manage_py_check_fails_without_the_app_naming_installed_apps(tmp_path: Path) -> None:
    (tmp_path / "site_without_app.py").write_text(
        textwrap.dedent(
            """
            SECRET_KEY = "followed"
            INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth",
                              "tests.dj.blog"]
            DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
            CACHES = {"default": {"BACKEND": "django_mcache.backend.MCacheBackend",
                                  "LOCATION": "memory://"}}
            ROOT_URLCONF = "urls_without_app"
            """
        )
    )
    (tmp_path / "urls_without_app.py").write_text(
        textwrap.dedent(
            """
            from django.http import HttpResponse
            from django.urls import path

            from django_mcache.views import cached_view
            from tests.dj.blog.models import Post


            @cached_view(ttl=60, depends_on=[Post])
            def titles(request):
                return HttpResponse(",".join(p.title for p in Post.objects.all()))


            urlpatterns = [path("", titles)]
            """
        )
    )
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
        "DJANGO_SETTINGS_MODULE": "site_without_app",
    }
    checked = subprocess.run(
        [sys.executable, "-m", "django", "check"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert checked.returncode != 0, checked.stdout
    assert "ImproperlyConfigured" in checked.stderr
    assert "'django_mcache' to INSTALLED_APPS" in checked.stderr, checked.stderr


@pytest.mark.parametrize(
    "settings",
    [{"MCACHE_MODELS": ["auth.user"]}, {"MCACHE_EXCLUDE_MODELS": ["blog.post"]}],
)
def test_depends_on_a_model_no_change_bumps_fails_where_it_is_written(settings: dict) -> None:
    with override_settings(**settings):
        with pytest.raises(ImproperlyConfigured, match=r"follows blog\.post, whose changes"):
            cached_view(ttl=60, depends_on=[Post])
        with pytest.raises(ImproperlyConfigured, match=r"MCACHE_MODELS"):
            cached_view(ttl=60, depends_on="blog.Post")
        with pytest.raises(ImproperlyConfigured, match=r"cached\(depends_on=\.\.\.\)"):
            cached(60, depends_on=Post.objects.all())
    assert cached_view(ttl=60, depends_on=[Post]) is not None, "followed by default"


def test_a_command_invalidating_a_models_tag_by_hand_is_not_refused() -> None:
    from django.core.management import call_command

    with override_settings(MCACHE_MODELS=["auth.user"]):
        call_command("mcache_invalidate", "--model", "blog.Post")
