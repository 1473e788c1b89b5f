"""The forecast read from the deployment (decision 0054) and the capacity service acting on it
(decision 0055), on the in-memory fakes: runs queued ahead (the in-flight ledger) and the due index's
jobs counted at their instants, one tenant's forecast holding only its own runs, and a tick raising
ceilings and warm capacity before a peak, releasing them after, emitting the two metrics per pool."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from jobsched.compose.pipeline import capacity_service_from_settings, forecast_service_from_settings
from jobsched.core.capacity import CapacityPolicy, QueueCaps
from jobsched.runtime import observability as obs
from jobsched.runtime.observability import RecordingSink
from jobsched.services.capacity import CapacityConfig, CapacityService
from jobsched.testing.capacity import InMemoryCapacity
from tests.aws.conftest import T0
from tests.aws.memory import build_pipeline, memory_aws  # noqa: F401  (on the in-memory fakes)

POLICY = CapacityPolicy(
    queues={"default": QueueCaps(10, 500), "low": QueueCaps(2, 2), "container": QueueCaps(0, 4)},
    provisioned_cap=300,
    lead_minutes=10,
)


@pytest.fixture
def pipeline(aws):
    return build_pipeline(aws)


def lane(forecast, pool="lambda", priority="default"):
    return forecast.lanes[(pool, priority)].counts


def test_runs_queued_ahead_and_the_due_index_make_the_forecast(aws, pipeline, clock):
    # Given a per-minute job dispatched at 12:00 (its runs to 12:01 queued ahead, its cursor after them)
    job = pipeline.jobs.create(
        "acme", {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}}, T0
    )
    pipeline.tick(job, T0)
    # and a container job due at 12:30 in Paris time (13:30 CET), not yet dispatched
    pipeline.jobs.create(
        "acme",
        {
            "name": "c",
            "schedule": "30 13 * * *",
            "timezone": "Europe/Paris",
            "target": {"handler": "echo"},
            "pool": "container",
            "timeout_seconds": 1800,
        },
        T0,
    )
    # When the forecast is read at 12:00:30
    forecast = forecast_service_from_settings(aws.settings, aws.clients).forecast(T0 + timedelta(seconds=30))
    # Then minute 0 holds nothing (12:00 is past), every later minute one run, and the container job 12:30
    assert lane(forecast)[:3] == [0, 1, 1] and sum(lane(forecast)) == 59
    assert lane(forecast, "container")[30] == 1 and sum(lane(forecast, "container")) == 1


def test_a_tenants_forecast_holds_only_its_own_runs(aws, pipeline):
    for tenant, schedule in (("acme", "*/2 * * * *"), ("other", "* * * * *")):
        job = pipeline.jobs.create(
            tenant, {"name": "m", "schedule": schedule, "target": {"handler": "echo"}}, T0
        )
        pipeline.tick(job, T0)
    service = forecast_service_from_settings(aws.settings, aws.clients)
    now = T0 + timedelta(seconds=1)
    # (12:00 is past: acme's 12:02..12:58, other's 12:01..12:59)
    assert service.forecast(now, tenant="acme").total == 29
    assert service.forecast(now, tenant="other").total == 59
    assert service.forecast(now).total == 88


def peak_job(pipeline, at: datetime, runs: int = 600) -> None:
    """``runs`` one-off jobs all due at ``at`` (a peak the due index knows)."""
    stamp = at.strftime("%Y-%m-%dT%H:%M:%S")
    for i in range(runs):
        pipeline.jobs.create(
            "acme", {"name": f"p{i}", "schedule": f"at({stamp})", "target": {"handler": "echo"}}, T0
        )


def test_a_tick_prewarms_before_a_peak_and_releases_after(aws, pipeline):
    # Given 600 runs due at 12:08:00 (1 s each, sized to start within 5 s: 120 slots)
    peak_job(pipeline, T0 + timedelta(minutes=8))
    capacity = InMemoryCapacity({"default": 10, "low": 2, "container": 0})
    sink = RecordingSink()
    service = capacity_service_from_settings(aws.settings, aws.clients, capacity, POLICY, metrics=sink)
    # When the service ticks at 12:00 (the peak within the 10-minute lead)
    report = service.tick(T0)
    # Then the default mapping and the warm capacity are raised for it, nothing else moves
    assert capacity.ceiling("default") == 120 and capacity.provisioned() == 120
    assert report.changed == {"default": (10, 120), "provisioned": (0, 120)}
    assert sink.points[obs.pool_metric(obs.FORECAST_CONCURRENCY, "lambda")] == [120.0]
    assert sink.points[obs.pool_metric(obs.POOL_CAPACITY, "lambda")] == [122.0]  # default + low
    assert sink.points[obs.pool_metric(obs.POOL_CAPACITY, "container")] == [0.0]
    # When the peak has passed (a fresh process: nothing kept) the ceiling and warm capacity fall back
    later = capacity_service_from_settings(aws.settings, aws.clients, capacity, POLICY, metrics=sink)
    later.tick(T0 + timedelta(minutes=9))
    assert capacity.ceiling("default") == 10 and capacity.provisioned() == 0


def test_an_old_container_run_raises_the_container_pool_and_a_drained_one_lowers_it(aws):
    # Given a container run waiting since 11:55 (the sweeper's measurement) and no task running
    capacity = InMemoryCapacity({"default": 10, "container": 0})
    sink = RecordingSink()
    waiting = {"container": T0 - timedelta(minutes=5)}
    service = CapacityService(
        CapacityConfig(POLICY),
        forecast_service_from_settings(aws.settings, aws.clients),
        capacity,
        lambda: dict(waiting),
        sink,
    )
    # When the service ticks each minute, then once the run has started (nothing waits)
    seen = []
    for minute in range(4):
        service.tick(T0 + timedelta(minutes=minute))
        seen.append(capacity.ceiling("container"))
    waiting.clear()
    service.tick(T0 + timedelta(minutes=4))
    seen.append(capacity.ceiling("container"))
    # Then the desired count goes 1, 2, 4 (the cap), stays, and falls back to 0
    assert seen == [1, 2, 4, 4, 0]


def test_a_tick_counts_ceilings_in_invocations_of_a_batch(aws, pipeline):
    # Given 150 low-priority runs due at 12:05:00 (1 s each, 30 at once to start within 5 s) and a
    # policy whose low invocations run batches of 10
    for i in range(150):
        pipeline.jobs.create(
            "acme",
            {
                "name": f"b{i}",
                "schedule": "at(2026-03-02T12:05:00)",
                "priority": "low",
                "target": {"handler": "echo"},
            },
            T0,
        )
    policy = CapacityPolicy(queues={"low": QueueCaps(2, 8)}, runs_per_unit={"low": 10})
    capacity = InMemoryCapacity({"low": 2})
    service = capacity_service_from_settings(
        aws.settings, aws.clients, capacity, policy, metrics=RecordingSink()
    )
    # When the service ticks at 12:00
    service.tick(T0)
    # Then the low mapping allows 3 invocations (30 runs / 10 a batch), not 30 (capped at 8)
    assert capacity.ceiling("low") == 3
