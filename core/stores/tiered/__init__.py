"""Nested tiers (a fast store over a durable one) and the async twin."""
