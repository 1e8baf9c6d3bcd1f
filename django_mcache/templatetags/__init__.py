"""``{% load mcache %}``."""
