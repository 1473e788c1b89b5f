"""Decision 0061: the sweeper counts the runs of the ledger items it settles per tenant and minute of
their due instant, once, and ``RunStatsStore`` reads a range back by minute."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.queue_depths import QueueDepths
from jobsched.aws.queues import RunQueues
from jobsched.aws.run_stats_store import RunStatsStore
from jobsched.compose.pipeline import notifier_from_settings
from jobsched.core.run_stats import lag_bin, minute_key, stats_range
from jobsched.services.deliveries import Delivery
from jobsched.services.sweeper import Sweeper, SweeperConfig
from tests.aws.conftest_worker import Kit, run_service
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def stats(kit):
    return RunStatsStore(kit.dynamo, kit.aws.settings.runs_table, timedelta(days=30))


def sweeper_over(kit, stats, dynamo=None):
    return Sweeper(
        config=SweeperConfig(runs_table=kit.aws.settings.runs_table),
        dynamo=dynamo or kit.dynamo,
        jobs=JobsStore(kit.dynamo, kit.aws.settings.jobs_table),
        attempts=kit.attempts,
        queues=kit.queues,
        metrics=kit.metrics,
        notifier=notifier_from_settings(kit.aws.settings, kit.aws.clients, kit.dynamo, metrics=kit.metrics),
        stats=stats,
    )


def minutes_of(stats, tenant, clock, hours=1):
    span = stats_range(clock.now() - timedelta(hours=hours), clock.now() + timedelta(minutes=1), "minute")
    return {m.pop("minute"): m for m in stats.minutes(tenant, span)}


def test_settled_runs_are_counted_per_tenant_and_minute_of_their_due_instant(kit, stats, clock):
    # Given, due in one minute, a run that succeeded 5 s late, one that failed into the dead letters
    # and one cancelled while queued; and another tenant's run that succeeded on time
    start = clock.now()
    _, ok = kit.new_run(job_id="ok")
    _, bad = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"}, job_id="bad", max_attempts=1)
    cancelled, _ = kit.new_run(job_id="gone")
    _, other = kit.new_run(job_id="theirs", tenant="globex")
    run_service(kit).cancel("acme", cancelled.id, clock.now())
    assert kit.worker().handle(Delivery.of(other.to_json()), clock.now()).status == "succeeded"
    clock.advance(seconds=5)
    assert kit.worker().handle(Delivery.of(ok.to_json()), clock.now()).status == "succeeded"
    kit.worker().handle(Delivery.of(bad.to_json()), clock.now())
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    summary = sweeper_over(kit, stats).sweep(clock.now())
    # Then one statistics item per tenant and minute is written, with each outcome and the lags
    assert summary.stats_written == 2
    minute = minute_key(start)
    acme = minutes_of(stats, "acme", clock)
    assert acme == {
        minute: {
            "succeeded": 1,
            "failed": 1,
            "dead_lettered": 1,
            "dead_letters": 1,  # dead-lettered in the same minute as it was due (decision 0064)
            "cancelled": 1,
            lag_bin(5.0): 2,  # the two that started, 5 s after their due instant
        }
    }
    assert minutes_of(stats, "globex", clock) == {minute: {"succeeded": 1, lag_bin(0.0): 1}}


def test_a_second_sweep_counts_nothing_again(kit, stats, clock):
    _, ok = kit.new_run()
    assert kit.worker().handle(Delivery.of(ok.to_json()), clock.now()).status == "succeeded"
    clock.advance(minutes=3)
    sweeper = sweeper_over(kit, stats)
    assert sweeper.sweep(clock.now()).stats_written == 1
    # When it sweeps again, Then the settled item is gone and nothing is added
    assert sweeper.sweep(clock.now()).stats_written == 0
    assert [m["succeeded"] for m in minutes_of(stats, "acme", clock).values()] == [1]


class _RacingTable:
    """The sweeper's table, with another sweeper deleting each ledger item just before this one does."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def delete(self, table, key, **kw):
        if key["job_id"].startswith("inflight#"):
            assert self.inner.delete(table, key) is not None  # the other sweeper's delete
        return self.inner.delete(table, key, **kw)


def test_a_ledger_item_another_sweeper_deleted_first_is_not_counted_by_this_one(kit, stats, clock):
    # Given a settled run whose ledger item another sweeper deletes (and counts) first
    _, ok = kit.new_run()
    assert kit.worker().handle(Delivery.of(ok.to_json()), clock.now()).status == "succeeded"
    clock.advance(minutes=3)
    # When this sweeper settles it, Then its DeleteItem returns nothing and it counts nothing
    summary = sweeper_over(kit, stats, _RacingTable(kit.dynamo)).sweep(clock.now())
    assert summary.settled == 1 and summary.stats_written == 0
    assert minutes_of(stats, "acme", clock) == {}


def test_a_run_the_sweep_itself_fails_is_counted_as_failed(kit, stats, clock):
    # Given a queued run whose job is gone and whose send was lost
    due = clock.now()
    kit.new_run(job_id="deleted")
    clock.advance(minutes=3)
    # When the sweeper runs: it fails the run (lost) and settles its item in the same sweep
    summary = sweeper_over(kit, stats).sweep(clock.now())
    # Then it is counted as failed, not started (no lag), and as a dead letter: in its due minute, and
    # in the sweep's minute as dead-lettered then (decision 0064)
    assert summary.failed == 1 and summary.stats_written == 2
    assert minutes_of(stats, "acme", clock) == {
        minute_key(due): {"failed": 1, "dead_lettered": 1},
        minute_key(clock.now()): {"dead_letters": 1},
    }


def test_minutes_outside_the_range_and_other_tenants_are_not_read(kit, stats, clock):
    # Given counts in three minutes an hour apart
    base = clock.now()
    keys = [minute_key(base + timedelta(hours=h)) for h in range(3)]
    stats.add({("acme", k): {"succeeded": 2} for k in keys} | {("globex", keys[1]): {"failed": 1}})
    # When the middle hour is read
    span = stats_range(base + timedelta(minutes=30), base + timedelta(minutes=90), "minute")
    # Then only its minute comes back, with its counters
    assert stats.minutes("acme", span) == [{"minute": keys[1], "succeeded": 2}]


def test_a_dead_letter_is_counted_in_the_minute_it_was_dead_lettered(kit, stats, clock):
    # Given a run due now that starts 2 minutes late and fails permanently: into the dead letters then
    start = clock.now()
    _, bad = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"}, job_id="bad", max_attempts=1)
    clock.advance(minutes=2)
    kit.worker().handle(Delivery.of(bad.to_json()), clock.now())
    dead_at = clock.now()
    # When the sweeper settles it
    clock.advance(minutes=3)
    sweeper_over(kit, stats).sweep(clock.now())
    # Then the outcome counts in its due minute, the dead letter in the minute of its dead-lettering
    assert minutes_of(stats, "acme", clock) == {
        minute_key(start): {"failed": 1, "dead_lettered": 1, lag_bin(120.0): 1},
        minute_key(dead_at): {"dead_letters": 1},
    }


class _BrokenSampler:
    def sample(self, now):
        raise RuntimeError("the table refused the sample")


def test_a_failed_depth_sample_is_logged_and_the_sweep_goes_on(kit, stats, clock, caplog):
    # Given a settled run and a depth sampler that fails (decision 0064)
    _, ok = kit.new_run()
    assert kit.worker().handle(Delivery.of(ok.to_json()), clock.now()).status == "succeeded"
    clock.advance(minutes=3)
    sweeper = sweeper_over(kit, stats)
    sweeper.depths = _BrokenSampler()
    # When it sweeps, Then the sweep still settles and counts the run, and says what failed
    summary = sweeper.sweep(clock.now())
    assert (summary.settled, summary.stats_written, summary.depths_sampled) == (1, 1, 0)
    assert "could not write the queue depth sample" in caplog.text


def test_a_queue_that_cannot_be_read_is_left_out_of_the_sample(kit, clock, caplog):
    # Given the deployment's queues, one of them named by a URL that does not exist
    urls = {**kit.aws.settings.queue_urls, "low": kit.aws.settings.queue_urls["low"] + "-gone"}
    queues = RunQueues(kit.aws.clients.sqs, urls, kit.meter)
    depths = QueueDepths(queues, tuple(urls), kit.dynamo, kit.aws.settings.runs_table, timedelta(days=1))
    # When a sample is taken, Then the other four queues are in it and the low queue is not
    assert depths.sample(clock.now()) == 4
    [sample] = depths.samples(stats_range(clock.now(), clock.now() + timedelta(minutes=1), "minute"))
    assert "default_visible" in sample and not any(k.startswith("low_") for k in sample)
    assert "could not read the depth of the low queue" in caplog.text
