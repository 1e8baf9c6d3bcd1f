"""A deterministic simulation of mcache: the library's own steps, interleaved from a seed.

Simulated processes of simulated threads run the real read path, tag bumps and lock
renewals against a simulated memcached, on virtual time, with faults chosen per seed;
every call goes into a history that checkers hold to the rules of
``docs/explanation/consistency.md``. ``python -m tests.sim`` runs it (see
``docs/explanation/simulation.md``).
"""
