"""Example Django blog site and its Flask twin, both caching with mcache, on one database."""
