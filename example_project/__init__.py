"""Example Django blog site and Flask app using mcache (arrives with the example-project issue)."""
