"""django_mcache's migrations: the dashboard's permissions, and never a table."""
