"""The admin, for editing blogs, posts and comments (and watching pages refresh)."""

from django.contrib import admin

from .models import Blog, Comment, Post

admin.site.register(Blog)
admin.site.register(Post)
admin.site.register(Comment)
