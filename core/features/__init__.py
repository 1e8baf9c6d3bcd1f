"""What is built on a cache: counters, visitors, memoized functions, raw keys, warm-up."""
