"""The in-process store and its async twin."""
