"""Management commands of the Django adapter."""
