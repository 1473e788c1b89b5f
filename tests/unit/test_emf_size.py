"""The EMF size benchmark measures the line the worker really flushes (jobsched/bench/emf_size.py)."""

from __future__ import annotations

from jobsched.bench.emf_size import emf_bytes
from jobsched.runtime import observability as obs


def test_the_per_pool_line_defines_each_figure_twice_and_is_longer():
    (before, totals), (after, both) = emf_bytes(False, 10), emf_bytes(True, 10)
    assert sorted(totals) == sorted([obs.SCHEDULE_LAG, obs.RUN_DURATION, obs.RUNS_SUCCEEDED])
    assert sorted(both) == sorted(totals + [obs.pool_metric(n, "lambda") for n in totals])
    assert after > before
