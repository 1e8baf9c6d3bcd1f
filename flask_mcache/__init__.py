"""Flask extension for mcache (arrives with the Flask extension issue)."""
