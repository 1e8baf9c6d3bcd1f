"""The example's URLs."""

from django.contrib import admin
from django.urls import path

from example_project.blog import views

urlpatterns = [
    path("", views.home, name="home"),
    path("blogs/<slug:slug>/", views.blog, name="blog"),
    path("posts/<int:pk>/", views.post, name="post"),
    path("calendar/", views.calendar, name="calendar"),
    path("feed/", views.feed, name="feed"),
    path("site.css", views.stylesheet, name="stylesheet"),
    path("admin/", admin.site.urls),
]
