"""The sans-I/O kernel: the steps a cache operation yields and their sync and async drivers.
Imports nothing of mcache.
"""
