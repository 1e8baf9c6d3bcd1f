"""What the engine asks of a refresher: take a background rebuild, say whether it did.

The engine hands stale keys' rebuilds to whatever callable its cache was given;
the refreshers mcache ships (:mod:`mcache.refreshers`) and a user's own both meet
this protocol, so the engine never imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Refresher"]


class Refresher(Protocol):
    """Runs a background rebuild; returns whether it accepted the job.

    The job rebuilds in this process when called. A refresher that sends it
    elsewhere calls ``job.hand_off(seconds)`` for the worker's payload instead
    (None: the job must stay here), and ``job.take_back()`` or ``job.give_up()``
    if the send fails.
    """

    def __call__(self, job: Callable[[], object]) -> bool: ...
