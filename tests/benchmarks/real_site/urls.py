"""The blog's URLs; the hole-cost pages only where holes are on."""

from django.urls import path

from . import views

urlpatterns = [
    path("ping/", views.ping),
    path("posts/", views.post_list),
    path("posts/<int:pk>/", views.post_detail),
]
if views.SITE == "holes":
    urlpatterns += [
        path("token/", views.token_page),
        path("hole/", views.hole_page),
        path("no-token/", views.plain_page),
    ]
