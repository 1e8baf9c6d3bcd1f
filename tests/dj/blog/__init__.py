"""A tiny blog app the adapter's tests cache pages and counters of."""
