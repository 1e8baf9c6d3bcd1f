"""get_or_build: reading, bidding for the rebuild, building under a lock or a lease, writing,
and handing rebuilds to a refresher.
"""
