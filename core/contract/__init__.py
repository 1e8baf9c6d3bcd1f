"""The contract between the cache and its stores: the Store protocol and its declared traits,
what every store shares, and the suites a store must pass.
"""
