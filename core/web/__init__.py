"""Framework-neutral cached pages and what a cached view reports; the Django and Flask adapters
share them.
"""
