"""Framework-neutral cached pages: the format the Django and Flask adapters both store."""
