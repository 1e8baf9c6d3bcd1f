"""URLs of the adapter's test views."""

from django.urls import path

from tests.dj import views

urlpatterns = [
    path("posts/", views.post_list),
    path("posts/<int:pk>/", views.post_detail),
    path("lang/", views.by_language),
    path("undeclared-vary/", views.undeclared_vary),
    path("vary-star/", views.vary_star),
    path("cookie/", views.sets_cookie),
    path("private/", views.private_page),
    path("no-store/", views.no_store),
    path("max-age-zero/", views.max_age_zero),
    path("missing/", views.not_found),
    path("stream/", views.streaming),
    path("whoami/", views.whoami),
    path("mine/", views.my_page),
    path("slow/", views.slow),
    path("blogs/<int:pk>/", views.blog_page),
    path("labels/", views.label_cloud),
    path("feed/", views.feed),
    path("no-cache/", views.no_cache),
    path("renamed-header/", views.renamed_header),
    path("no-header/", views.no_header),
    path("flash/", views.flash),
    path("theme/", views.theme),
    path("language/", views.language),
    path("async-background/", views.async_background),
    path("csrf/", views.csrf_form),
    path("cart/", views.cart),
    path("remembers/", views.remembers),
    path("async/", views.async_page),
    path("cbv/", views.ClassBased.as_view()),
    path("catalog/", views.catalog),
    path("patient/", views.patient),
]
