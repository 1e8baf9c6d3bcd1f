"""URLs of the adapter's test views (filled in by the views tests)."""

urlpatterns: list = []
