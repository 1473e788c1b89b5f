"""The forecast read from the deployment (decision 0054) and the capacity service acting on it
(decision 0055), on the in-memory fakes: runs queued ahead (the in-flight ledger) and the due index's
jobs counted at their instants, one tenant's forecast holding only its own runs, and a tick raising
ceilings and warm capacity before a peak, releasing them after, emitting the two metrics per pool."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from jobsched.aws.limits_store import PoolCeilingItems, epoch_ms
from jobsched.aws.metering import Meter, dynamo_for
from jobsched.compose.pipeline import capacity_service_from_settings, forecast_service_from_settings
from jobsched.core.capacity import CapacityPolicy, QueueCaps
from jobsched.ports.capacity import CapacityRefused
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


class TickBetweenReads:
    """A forecast source that lets a dispatcher tick run right after the forecast's first read."""

    def __init__(self, source, tick):
        self.source, self.tick, self.reads = source, tick, []

    def _after_first(self, name, result):
        self.reads.append(name)
        if len(self.reads) == 1:
            self.tick()
        return result

    def jobs_due(self, until, now, tenant=None):
        return self._after_first("jobs_due", self.source.jobs_due(until, now, tenant))

    def queued_ahead(self, now, until, tenant=None):
        return self._after_first("queued_ahead", self.source.queued_ahead(now, until, tenant))


def test_an_occurrence_dispatched_between_the_two_reads_is_counted_once(aws, pipeline):
    # Given a per-minute job created at 12:00 (12:00 and 12:01 queued ahead, its cursor at 12:02)
    job = pipeline.jobs.create(
        "acme", {"name": "m", "schedule": "* * * * *", "target": {"handler": "echo"}}, T0
    )
    now = T0 + timedelta(minutes=1)
    service = forecast_service_from_settings(aws.settings, aws.clients)
    # and the 12:01 tick (queueing 12:02 ahead, then advancing the cursor past it) happening between
    # the forecast's two reads
    service.source = TickBetweenReads(service.source, lambda: pipeline.tick(job, now))
    # When the forecast is read at 12:01
    forecast = service.forecast(now)
    # Then each minute from 12:01 holds its one run: 12:02 neither lost between the two sources (the
    # ledger read before the tick, the index after it) nor counted in both
    assert service.source.reads == ["jobs_due", "queued_ahead"]
    assert lane(forecast) == [1] * 60


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


# --- the pool ceiling items the fair share's gate reads (decision 0057) ------------------------------

SHARED_POLICY = CapacityPolicy(
    queues={"default": QueueCaps(25, 500), "low": QueueCaps(7, 7)}, lead_minutes=10
)


def shared_settings(aws, share: float | None = 0.8):
    """The deployment's settings with fair shares on (20 slots on default, 5 on low) at ``share``."""
    return replace(aws.settings, tenant_slots={"default": 20, "high": 20, "low": 5}, fair_share=share)


class OrderedCeilings:
    """The real ceiling items, noting the mapping's ceiling in force when each is written."""

    def __init__(self, items: PoolCeilingItems, capacity: InMemoryCapacity):
        self.items, self.capacity, self.seen = items, capacity, []

    def record(self, kind, ceiling, now, *, changed):
        self.seen.append((kind, ceiling, self.capacity.ceiling(kind), changed))
        self.items.record(kind, ceiling, now, changed=changed)


def test_the_capacity_service_writes_a_shared_pools_ceiling_beside_raising_and_lowering_it(aws, pipeline):
    # Given 600 runs due at 12:08 (120 invocations wanted on default) and fair shares on
    peak_job(pipeline, T0 + timedelta(minutes=8))
    settings = shared_settings(aws)
    capacity = InMemoryCapacity({"default": 25, "low": 7})
    dynamo = dynamo_for(settings, aws.clients.dynamodb, Meter())
    items = PoolCeilingItems(dynamo, settings.leases_table)
    service = capacity_service_from_settings(
        settings, aws.clients, capacity, SHARED_POLICY, metrics=RecordingSink()
    )
    ordered = OrderedCeilings(items, capacity)
    service.ceilings = ordered
    # When it ticks at 12:00: the mapping is raised to 120, then the item written (ceiling 120, set now)
    service.tick(T0)
    assert ordered.seen == [("default", 120, 120, True)]
    written = items.read("default")
    assert written is not None and written.ceiling == 120
    assert written.set_at_ms == epoch_ms(T0) and written.until_ms == epoch_ms(T0) + 300_000
    assert items.read("low") is None  # at its base, never written
    # When it ticks at 12:01 with the peak still ahead: the item is renewed (set_at kept, until moved)
    service.tick(T0 + timedelta(minutes=1))
    renewed = items.read("default")
    assert renewed is not None and renewed.set_at_ms == epoch_ms(T0)
    assert renewed.until_ms == epoch_ms(T0 + timedelta(minutes=1)) + 300_000
    assert ordered.seen[-1] == ("default", 120, 120, False)
    # When the peak has passed: the item comes down to the base first, then the mapping
    service.tick(T0 + timedelta(minutes=9))
    assert ordered.seen[-1] == ("default", 25, 120, True)
    assert capacity.ceiling("default") == 25
    lowered = items.read("default")
    assert (
        lowered is not None
        and lowered.ceiling == 25
        and lowered.set_at_ms == epoch_ms(T0 + timedelta(minutes=9))
    )


def test_the_capacity_service_writes_no_ceiling_item_without_a_fair_share(aws, pipeline):
    # Given the same peak and the share off (no JOBSCHED_FAIR_SHARE)
    peak_job(pipeline, T0 + timedelta(minutes=8))
    settings = shared_settings(aws, share=None)
    capacity = InMemoryCapacity({"default": 25, "low": 7})
    service = capacity_service_from_settings(
        settings, aws.clients, capacity, SHARED_POLICY, metrics=RecordingSink()
    )
    # When it raises default's mapping
    service.tick(T0)
    assert capacity.ceiling("default") == 120
    # Then no ceiling item is written
    dynamo = dynamo_for(settings, aws.clients.dynamodb, Meter())
    assert PoolCeilingItems(dynamo, settings.leases_table).read("default") is None


def test_a_refused_lowering_writes_the_ceiling_the_mapping_kept(aws):
    # Given default raised to 120 and its item saying so, and a mapping that refuses every change
    settings = shared_settings(aws)

    class Refusing(InMemoryCapacity):
        def set_ceiling(self, kind, value):
            raise CapacityRefused("no")

    capacity = Refusing({"default": 120, "low": 7})
    dynamo = dynamo_for(settings, aws.clients.dynamodb, Meter())
    items = PoolCeilingItems(dynamo, settings.leases_table)
    items.record("default", 120, T0, changed=True)
    service = capacity_service_from_settings(
        settings, aws.clients, capacity, SHARED_POLICY, metrics=RecordingSink()
    )
    # When a tick with nothing due lowers it and the mapping refuses
    report = service.tick(T0 + timedelta(minutes=1))
    # Then the item says 120 again: the tenants' slots follow the ceiling in force
    assert "default" in report.refused
    kept = items.read("default")
    assert kept is not None and kept.ceiling == 120
