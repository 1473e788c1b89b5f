"""What the dispatcher costs per run, measured by the metering wrapper (DynamoDB sizing rules), on the
in-memory fakes reached as a DynamoDB client (tests/contract/test_capacity.py: the same figures as moto).

Figures for per-minute jobs over one simulated hour of one-minute ticks; the enqueue horizon spreads
the job advance (1 item write + 2 due-index writes) over the runs enqueued ahead, and the tenant run
feed (one batched item per tenant and hour per tick, docs/decisions/0004-tenant-run-feed.md) over the
runs a tick creates for a tenant.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.metering import item_size, serialize
from jobsched.services.dispatcher import new_run
from tests.aws.conftest import T0, provision
from tests.aws.memory import build_pipeline, memory_aws_units, memory_pipeline  # noqa: F401  (on the fakes)

EVERY_MINUTE = {"name": "tick", "schedule": "* * * * *", "target": {"handler": "echo"}, "payload": {"n": 1}}


def _first_tick(p, job) -> None:
    """A tick with nothing due: the shard's first, which also creates its lease item (one refused
    conditional write more, once per shard: jobsched/aws/leases.py)."""
    p.tick(job, T0 + timedelta(minutes=2))


def _dispatcher_wru_per_run(
    aws, horizon_seconds: int, jobs: int = 4, minutes: int = 30
) -> tuple[float, float]:
    """(WRU per run on the Jobs and Runs tables, lease WRU per tick) for per-minute jobs, one shard."""
    aws.settings = provision(
        aws.clients, prefix=f"cost{horizon_seconds}", shards=1, enqueue_horizon_seconds=horizon_seconds
    )
    p = build_pipeline(aws)
    for i in range(jobs):
        p.jobs.create(f"tenant{i}", EVERY_MINUTE, T0 - timedelta(seconds=30))
    p.dispatcher.dispatch_shard(0, T0 - timedelta(seconds=20))  # the shard's first tick: creates the lease
    p.meter.reset()
    runs = 0
    for minute in range(minutes):
        runs += p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=minute)).runs_created
    by_table = p.meter.snapshot()["dynamodb"]["wcu_by_table"]
    per_run = (by_table[aws.settings.jobs_table] + by_table[aws.settings.runs_table]) / runs
    return per_run, by_table[aws.settings.leases_table] / minutes


def test_a_run_item_stays_well_under_one_kilobyte(pipeline):
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"jitter_seconds": 10}, T0)
    run = new_run(job, T0, "schedule", T0)
    assert item_size(serialize(run.to_item())) < 400


def test_putting_a_run_costs_one_write_unit_and_a_refused_put_one_more(pipeline):
    # Given a run already recorded in its tenant's feed
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0 + timedelta(hours=1))
    run = new_run(job, T0, "schedule", T0)
    pipeline.dispatcher.runs.announce([run])
    pipeline.meter.reset()
    # When it is put, and put again (a duplicate tick)
    _, created = pipeline.dispatcher.runs.put_announced(run)
    # Then the run item is the whole cost: no index entry is written with it
    assert created and pipeline.meter.snapshot()["dynamodb"]["wcu_by_operation"] == {"PutItem": 1}
    pipeline.meter.reset()
    _, created = pipeline.dispatcher.runs.put_announced(run)
    assert not created and pipeline.meter.snapshot()["dynamodb"]["wcu"] == 1  # refused writes are billed


def test_creating_one_run_alone_writes_its_feed_entry_first(pipeline):
    # Given a job / When one run is created on its own (the API's trigger path)
    job = pipeline.jobs.create("acme", EVERY_MINUTE, T0 + timedelta(hours=1))
    pipeline.meter.reset()
    _, created = pipeline.dispatcher.runs.create(new_run(job, T0, "schedule", T0))
    # Then one feed item and one in-flight ledger item (1 WRU each, in one request) and the run (1 WRU)
    snapshot = pipeline.meter.snapshot()
    assert created and snapshot["dynamodb"]["wcu_by_operation"] == {"BatchWriteItem": 2, "PutItem": 1}
    assert snapshot["requests"]["dynamodb.BatchWriteItem"] == 1


def test_job_advance_rewrites_the_due_index_entry(pipeline):
    # Given an hourly job created just after 12:00 (next due 13:00)
    job = pipeline.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 * * * *"}, T0 + timedelta(minutes=1))
    _first_tick(pipeline, job)
    pipeline.meter.reset()
    # When the tick 30 s before 13:00 enqueues the 13:00 run
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=59, seconds=30)
    )
    wcu = pipeline.meter.snapshot()["dynamodb"]["wcu_by_operation"]
    # Then: feed item 1 + ledger item 1, run put 1; advance 1 + due index delete and put 2; lease
    # acquire + release 2
    assert wcu["BatchWriteItem"] == 2 and wcu["PutItem"] == 1 and wcu["UpdateItem"] == 5


def test_the_feed_costs_far_below_one_write_unit_per_run_when_a_tick_creates_many(aws):
    # Given 100 hourly jobs of one tenant on one shard, next due at 13:00 (nothing dispatched yet)
    aws.settings = provision(aws.clients, prefix="feedcost", shards=1)
    p = build_pipeline(aws)
    for _ in range(100):
        p.jobs.create("acme", EVERY_MINUTE | {"schedule": "0 * * * *"}, T0 + timedelta(minutes=1))
    p.meter.reset()
    # When the tick 30 s before 13:00 creates their 100 runs
    summary = p.dispatcher.dispatch_shard(0, T0 + timedelta(minutes=59, seconds=30))
    snapshot = p.meter.snapshot()
    wcu, requests = snapshot["dynamodb"]["wcu_by_operation"], snapshot["requests"]
    # Then the tenant listing's share is one batched feed write: at most 0.1 WRU per run (vs 1 for an
    # index entry per run), and each run item costs exactly 1 WRU
    assert summary.runs_created == 100
    assert requests["dynamodb.BatchWriteItem"] == 1
    assert wcu["BatchWriteItem"] / summary.runs_created <= 0.1
    assert wcu["PutItem"] / summary.runs_created == 1.0


@pytest.mark.parametrize(("horizon", "ceiling"), [(60, 5.3), (300, 1.9), (900, 1.5)])
def test_dispatcher_write_units_per_run_by_enqueue_horizon(aws, horizon, ceiling, capsys):
    per_run, lease_per_tick = _dispatcher_wru_per_run(aws, horizon)
    with capsys.disabled():
        print(f"\n[cost] horizon {horizon:>3} s: {per_run:.2f} WRU/run + {lease_per_tick:.0f} WRU/shard tick")
    assert per_run <= ceiling
    assert lease_per_tick == 2  # acquire + release, whatever the number of jobs


def test_a_large_payload_does_not_make_the_job_advance_dearer(pipeline):
    # Given an hourly job with a 20 KB payload (kept in its own item)
    big = {"blob": "x" * 20_000}
    job = pipeline.jobs.create(
        "acme", EVERY_MINUTE | {"schedule": "0 * * * *", "payload": big}, T0 + timedelta(minutes=1)
    )
    _first_tick(pipeline, job)
    pipeline.meter.reset()
    # When the tick before 13:00 enqueues its run
    pipeline.dispatcher.dispatch_shard(
        pipeline.dispatcher.shard_of(job.id), T0 + timedelta(minutes=59, seconds=30)
    )
    # Then the advance still costs 1 + 2 WRU, and the message carries the full payload
    assert pipeline.meter.snapshot()["dynamodb"]["wcu_by_operation"]["UpdateItem"] == 5  # advance 3 + lease 2
    [message] = pipeline.messages()
    assert message["body"]["payload"] == big
