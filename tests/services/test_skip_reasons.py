"""Runs skipped by reason (issue 31 §5): a tick counts each skipped run under its ``skip_reason``, and
the dispatcher function emits ``RunsSkipped<Reason>`` for the reasons that skipped something."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from functions.dispatcher import skipped_metrics
from jobsched.core.models import RunState, make_run_id
from jobsched.runtime import observability as obs
from jobsched.services.dispatcher import DispatchSummary
from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws, memory_pipeline  # noqa: F401  (on the in-memory fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}}


def _tick(pipeline, job, at) -> DispatchSummary:
    return pipeline.dispatcher.dispatch_shard(pipeline.dispatcher.shard_of(job.id), at)


def test_an_overlapping_occurrence_is_counted_under_overlap(pipeline):
    # Given a buffer_one job whose 12:00 run is running
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"overlap_policy": "buffer_one"}, T0)
    run = pipeline.dispatcher.runs.get(make_run_id(job.id, T0))
    pipeline.dispatcher.runs.transition(run, RunState.RUNNING, T0)
    # When 12:01 comes due (buffered) and then 12:02 (skipped: one is buffered)
    first = _tick(pipeline, job, T0 + timedelta(minutes=1, seconds=1))
    second = _tick(pipeline, job, T0 + timedelta(minutes=2, seconds=1))
    # Then only the second tick skipped one, under overlap
    assert (first.runs_skipped, +first.skipped_by_reason) == (0, Counter())
    assert (second.runs_skipped, +second.skipped_by_reason) == (1, Counter({"overlap": 1}))


def test_missed_occurrences_are_counted_under_misfire_with_their_summary_records_count(pipeline):
    # Given a per-minute job with misfire_policy skip, and no tick for an hour
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"misfire_policy": "skip"}, T0)
    # When a tick comes an hour late
    summary = _tick(pipeline, job, T0 + timedelta(hours=1, seconds=1))
    # Then every occurrence it skipped is counted under misfire (the summary record's count included)
    assert summary.runs_skipped > 1
    assert +summary.skipped_by_reason == Counter({"misfire": summary.runs_skipped})


def test_merged_ticks_add_their_counts_by_reason():
    total = DispatchSummary()
    total.merge(DispatchSummary(runs_skipped=2, skipped_by_reason=Counter({"misfire": 2})))
    total.merge(DispatchSummary(runs_skipped=3, skipped_by_reason=Counter({"misfire": 1, "overlap": 2})))
    assert (total.runs_skipped, total.skipped_by_reason) == (5, Counter({"misfire": 3, "overlap": 2}))


def test_the_function_names_a_metric_per_reason_and_omits_reasons_that_skipped_nothing():
    summary = DispatchSummary(
        skipped_by_reason=Counter({"dst_gap": 2, "paused": 0, "mystery": 1, "other": 1})
    )
    assert skipped_metrics(summary) == {"RunsSkippedDstGap": 2, "RunsSkippedOther": 2}


def test_skip_reasons_are_the_reasons_the_code_records():
    from jobsched.core.budgets import SKIP_REASON_BUDGET
    from jobsched.core.dispatch_plan import SKIP_REASON_DST_GAP
    from jobsched.core.edits import SKIP_REASON_RESCHEDULED
    from jobsched.core.misfire import SKIP_REASON_MISFIRE
    from jobsched.core.overlap import SKIP_REASON_OVERLAP
    from jobsched.services.dispatcher import SKIP_REASON_DELETED, SKIP_REASON_PAUSED

    recorded = {
        SKIP_REASON_MISFIRE, SKIP_REASON_DST_GAP, SKIP_REASON_OVERLAP,
        SKIP_REASON_PAUSED, SKIP_REASON_DELETED, SKIP_REASON_RESCHEDULED, SKIP_REASON_BUDGET,
    }  # fmt: skip
    assert set(obs.SKIP_REASONS) == recorded | {"other"}
    assert len({obs.skipped_metric(r) for r in obs.SKIP_REASONS}) == len(obs.SKIP_REASONS)
