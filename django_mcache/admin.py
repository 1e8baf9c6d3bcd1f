"""The cache dashboard in Django's admin, at ``/admin/mcache/dashboard/``.

Staff with ``mcache.view_dashboard`` see every mcache cache of ``settings.CACHES``
(superusers have it); its buttons also want ``mcache.act_on_caches``, and each asks for
a confirmation page before it acts (see :mod:`mcache.admin.dashboard_actions`). The page
is the admin's own: its login, its CSRF protection, its stylesheet.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.apps import apps
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.middleware.csrf import get_token
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.safestring import mark_safe

from mcache.admin.dashboard import gather, trace_of
from mcache.admin.dashboard_actions import ActionError, perform, plan
from mcache.admin.dashboard_html import confirm_html, dashboard_html
from mcache.cache import Cache

from .aliases import is_mcache_backend
from .models import Dashboard
from .tags import model_tag

VIEW, ACT = "mcache.view_dashboard", "mcache.act_on_caches"


def mcache_caches() -> dict[str, Cache]:
    """Return every mcache cache of ``settings.CACHES``, by alias."""
    from django.core.cache import caches

    return {
        alias: caches[alias].mcache  # type: ignore[attr-defined]
        for alias, config in settings.CACHES.items()
        if is_mcache_backend(config.get("BACKEND"))
    }


@admin.register(Dashboard)
class DashboardAdmin(admin.ModelAdmin):
    """The dashboard page and its action endpoint, in place of a model's change list."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm(VIEW)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return request.user.has_perm(VIEW)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_urls(self) -> list[Any]:
        return [
            path("", self._guarded(self.dashboard_view), name="mcache_dashboard_changelist"),
            path("act/", self._guarded(self.act_view), name="mcache_dashboard_act"),
        ]

    def _guarded(self, view: Callable[[HttpRequest], HttpResponse]) -> Callable[..., Any]:
        """The admin's own guard (a visitor signs in first), and a 403 for a signed-in user
        who is not staff: the admin would show them its sign-in form again."""
        admin_view = self.admin_site.admin_view(view)

        @wraps(view)
        def guarded(request: HttpRequest) -> HttpResponse:
            if request.user.is_authenticated and not request.user.is_staff:
                raise PermissionDenied
            return admin_view(request)  # type: ignore[no-any-return]

        return guarded

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """The page: every mcache cache's section, and a key's trace when one is asked."""
        if not request.user.has_perm(VIEW):
            raise PermissionDenied
        caches = mcache_caches()
        asked = request.GET.get("trace", "")
        traced = caches.get(request.GET.get("cache", ""), next(iter(caches.values()), None))
        trace = trace_of(traced, asked) if traced is not None and asked else None
        body = dashboard_html(
            [gather(cache, alias) for alias, cache in caches.items()],
            reverse("admin:mcache_dashboard_act"),
            self._hidden(request),
            trace,
            target_label="model (app_label.Model)",
        )
        return self._page(request, body)

    def act_view(self, request: HttpRequest) -> HttpResponse:
        """A button's POST: the confirmation page first, the action on its own POST."""
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:mcache_dashboard_changelist"))
        if not request.user.has_perm(ACT):
            raise PermissionDenied
        caches = mcache_caches()
        back = reverse("admin:mcache_dashboard_changelist")
        try:
            action = plan(request.POST.dict(), caches, _model_tag)
            if request.POST.get("confirmed") != "yes":
                body = confirm_html(action, request.path, back, self._hidden(request))
                return self._page(request, body)
            done = perform(
                action, caches, request.user.get_username(), request.POST.get("typed", "")
            )
        except ActionError as error:
            return self._page(request, "", problem=str(error), status=400)
        messages.success(request, done, fail_silently=True)
        return HttpResponseRedirect(back)

    def _hidden(self, request: HttpRequest) -> dict[str, str]:
        return {"csrfmiddlewaretoken": get_token(request)}

    def _page(
        self, request: HttpRequest, body: str, problem: str = "", status: int = 200
    ) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "title": "Cache dashboard",
            "body": mark_safe(body),  # every value in it is escaped by dashboard_html
            "problem": problem,
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/mcache/dashboard.html", context, status=status)


def _model_tag(label: str) -> tuple[str, str]:
    """Return the tag of the model ``label`` names (``blog.Post``), and the page's words."""
    try:
        model = apps.get_model(label)
    except (LookupError, ValueError):
        raise ActionError(f"there is no model {label!r}: write app_label.Model") from None
    return model_tag(model), f"model {label}"
