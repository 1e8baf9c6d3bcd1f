"""Django adapter for mcache (arrives with the Django adapter issue)."""
