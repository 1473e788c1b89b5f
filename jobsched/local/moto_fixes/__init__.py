"""The emulator boundary: what the embedded mode, the benchmarks, the deploy rehearsal and the test
suite change in moto before they use it, applied by :func:`apply` in every process that runs moto.

The patches are grouped by purpose:

* :mod:`.correctness` — where moto does not do what AWS documents and our guarantees rely on it (a
  send lost during a delete, conditional writes that are not atomic, a long poll a second late).
* :mod:`.speed` (and :mod:`.speed_dynamodb`) — work and memory moto spends that its answers do not
  need; the answers stay moto's (``tests/local/test_moto_fixes.py`` compares them).
* :mod:`.lanes` — the fairness lanes: moto's server serves a few requests of one tenant at once, as
  AWS serves one tenant on capacity another tenant's burst does not use (decision 0033).

:func:`apply` is idempotent.
"""

from __future__ import annotations

from jobsched.local.moto_fixes import correctness, lanes, speed, speed_dynamodb
from jobsched.local.moto_fixes.correctness import (
    DYNAMODB_READS,
    DYNAMODB_WRITES,
    LONG_POLL_RESCAN_SECONDS,
    WRITE_LOCK,
)
from jobsched.local.moto_fixes.lanes import LANE_CONCURRENCY, lane_slots
from jobsched.local.moto_fixes.speed import KEEP_DELETED_HANDLES, BoundedHandles
from jobsched.local.moto_fixes.speed_dynamodb import (
    KEEP_PARSED_EXPRESSIONS,
    PLAIN_ANSWERS,
    TEXT_ONLY_CHECKS,
)
from jobsched.runtime.resources import LANE_HEADER

__all__ = [
    "DYNAMODB_READS",
    "DYNAMODB_WRITES",
    "KEEP_DELETED_HANDLES",
    "KEEP_PARSED_EXPRESSIONS",
    "LANE_CONCURRENCY",
    "LANE_HEADER",
    "LONG_POLL_RESCAN_SECONDS",
    "PLAIN_ANSWERS",
    "TEXT_ONLY_CHECKS",
    "WRITE_LOCK",
    "BoundedHandles",
    "apply",
    "correctness",
    "lane_slots",
    "lanes",
    "speed",
    "speed_dynamodb",
]


def apply() -> None:
    """Apply the :mod:`.correctness`, the :mod:`.speed` and the :mod:`.lanes` patches (once each)."""
    correctness.apply()
    speed.apply()
    lanes.apply()
