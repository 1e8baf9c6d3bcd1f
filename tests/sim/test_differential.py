"""Simulated histories replayed on a real memcached and a real Redis answer the same.

The histories of seeds whose processes reach the library's memcached-semantics store:
what they applied are store calls, which any store answers; and those of seeds on the
simulated Redis, replayed on a real Redis. Seeds on the protocol server apply memcached's
own commands; that server is compared with a real memcached command by command
(``test_protocol_fidelity``)."""

from __future__ import annotations

import logging

import pytest

from mcache.contract.store import Store
from mcache.stores import from_url
from tests.sim.config import Config, choose
from tests.sim.differential import horizon, replay
from tests.sim.simulation import Result, run_seed


@pytest.mark.parametrize("server", ["memcached_text_url", "redis_url"])
def test_simulated_histories_replay_the_same_on_a_real_server(
    request: pytest.FixtureRequest, server: str
) -> None:
    seeds = [seed for seed in range(90) if choose(seed).store == "memory"]
    _, compared = replayed(seeds, from_url(request.getfixturevalue(server)))
    assert compared > 1000, "the replays compared too little to tell anything"


def test_simulated_redis_histories_replay_the_same_on_a_real_redis(redis_url: str) -> None:
    """The real Redis store's calls as the simulated Redis answered them, sent again to a
    real Redis: the same answers (a claim made in a read is recorded as its lock's
    ``add``, which the real server, its entries given an hour, answers as the claim did).
    Not the seeds whose hits a lagging replica answers: a real primary would not lag."""
    seeds = [seed for seed in range(120) if on_one_redis(choose(seed))]
    results, compared = replayed(seeds, from_url(redis_url))
    assert len(results) > 10 and compared > 500, "the replays compared too little"


def replayed(seeds: list[int], store: Store) -> tuple[list[Result], int]:
    """Play ``seeds``, replay each history on ``store`` (asserting no answer differs);
    return the results and how many operations were compared."""
    logging.disable(logging.CRITICAL)
    try:
        results = [run_seed(seed) for seed in seeds]
    finally:
        logging.disable(logging.NOTSET)
    compared = 0
    for result in results:
        mismatches, _ = replay(result, store)
        assert mismatches == [], f"seed {result.config.seed}: {mismatches[0]}"
        compared += sum(1 for applied in result.history.applied if applied[0] < horizon(result))
    return results, compared


def on_one_redis(config: Config) -> bool:
    return config.store == "redis" and not config.redis_replica_lag
