"""A tick aligns its sends to the second (decision 0032): against moto, with SQS on the fake clock, so
each message's surfacing instant is what moto computed from the DelaySeconds the dispatcher sent."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

import functions.dispatcher as fn
from jobsched.aws.queues import RunQueues
from jobsched.bench.environment import sqs_on_clock
from jobsched.core.clock import FakeClock
from jobsched.core.ids import shard_for
from jobsched.core.messages import Outgoing, RunMessage
from jobsched.core.models import from_iso
from jobsched.runtime.resources import QUEUE_KINDS
from jobsched.services.send_alignment import AlignedSends
from tests.aws.conftest import REGION, T0, build_pipeline

EVERY_5_SECONDS = {"name": "fast", "schedule": "*/5 * * * * *", "target": {"handler": "echo"}}
MARGIN = 0.1  # the deployment default, JOBSCHED_SEND_ALIGN_MS = 100


class _Context:
    function_name = "dispatcher"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:dispatcher"
    aws_request_id = "req-align"


def surfacings(env, kind: str = "default", sent_from: datetime | None = None) -> list[tuple[datetime, float]]:
    """(due instant, surfacing - due in seconds) of each message on the queue sent at or after
    ``sent_from``, read from moto's queue state (nothing is received)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    name = env.settings.queue_url(kind).rsplit("/", 1)[-1]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues[name]
    out = []
    for message in queue._messages:
        sent = int(message.sent_timestamp) / 1000
        if sent_from is not None and sent < sent_from.timestamp() - 0.001:
            continue
        surfaced = (message.delayed_until or int(message.sent_timestamp)) / 1000
        due = from_iso(json.loads(message.body)["due_at"])
        out.append((due, surfaced - due.timestamp()))
    return out


@pytest.fixture
def ticking(aws_environ, monkeypatch):
    """The dispatcher function on a fake clock whose sleep moves it, moto's SQS on the same clock."""
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "jobsched")
    clock = FakeClock(T0)
    with fn.seam.installed(clock=clock, sleep=clock.advance), sqs_on_clock(clock):
        yield clock


def test_a_tick_at_a_fraction_of_a_second_lands_every_message_at_or_just_after_its_due_instant(
    aws_environ, ticking
):
    # Given a job every 5 s, created at T0, and its shard's tick firing 0.37 s into a minute later
    job = build_pipeline(aws_environ).jobs.create("acme", EVERY_5_SECONDS, T0)
    tick_at = ticking.set(T0 + timedelta(minutes=1, seconds=0.37))
    # When the dispatcher function runs that tick
    result = fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then each message it sent surfaces at its due instant or up to the margin after, never before
    sent = surfacings(aws_environ, sent_from=tick_at)
    assert len(sent) == result["messages_sent"] >= 10
    assert all(0.0 <= offset <= MARGIN for _, offset in sent), sent
    # ... having waited once, for the rest of the second (0.63 s of the tick's time)
    assert result["send_align_waits"] == 1
    assert result["send_align_seconds"] == pytest.approx(0.63)


def test_with_alignment_off_a_tick_rounds_down_and_messages_surface_early(aws_environ, ticking, monkeypatch):
    # Given the same job and tick, with JOBSCHED_SEND_ALIGN_MS=0 (the embedded mode's setting)
    monkeypatch.setenv("JOBSCHED_SEND_ALIGN_MS", "0")
    job = build_pipeline(aws_environ).jobs.create("acme", EVERY_5_SECONDS, T0)
    tick_at = ticking.set(T0 + timedelta(minutes=1, seconds=0.37))
    # When it ticks
    result = fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then nothing waits, and each message surfaces 0.63 s early (the worker sleeps that out)
    sent = surfacings(aws_environ, sent_from=tick_at)
    assert sent and all(offset == pytest.approx(-0.63) for _, offset in sent)
    assert result["send_align_waits"] == 0


def test_with_alignment_off_delays_count_from_the_send_not_from_the_tick_s_start(
    aws_environ, ticking, monkeypatch
):
    # Given alignment off (the embedded mode) and a tick whose puts take 0.2 s each before its send
    # (12 runs: 2.4 s, as a loaded emulator or a big page takes)
    from jobsched.aws.runs_store import RunsStore

    monkeypatch.setenv("JOBSCHED_SEND_ALIGN_MS", "0")
    job = build_pipeline(aws_environ).jobs.create("acme", EVERY_5_SECONDS, T0)
    tick_at = ticking.set(T0 + timedelta(minutes=1, seconds=0.37))
    put = RunsStore.put_announced

    def slow_put(self, record):
        ticking.advance(0.2)
        return put(self, record)

    monkeypatch.setattr(RunsStore, "put_announced", slow_put)
    # When the shard ticks
    result = fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then every message still surfaces within the second before its due instant, never after it
    # (counted from the tick's start, each would surface 2.4 - 0.63 = 1.77 s late)
    sent = surfacings(aws_environ, sent_from=tick_at)
    assert len(sent) == result["messages_sent"] >= 10
    assert all(-1.0 < offset <= 0.0 for _, offset in sent), sent


def test_jittered_runs_surface_under_a_second_early_or_within_the_margin_late(aws_environ, ticking):
    # Given a job every 5 s with 3 s of jitter (due instants at milliseconds inside their second)
    job = build_pipeline(aws_environ).jobs.create("acme", EVERY_5_SECONDS | {"jitter_seconds": 3}, T0)
    tick_at = ticking.set(T0 + timedelta(minutes=1, seconds=0.37))
    # When its shard ticks 0.37 s into the minute
    fn.handler({"shard": shard_for(job.id, 4), "shards": 4}, _Context())
    # Then no message surfaces later than the margin, none a second or more early, and the run's
    # sub-second position decides which: the worker waits out an early one, as before
    sent = surfacings(aws_environ, sent_from=tick_at)
    assert sent and all(-1.0 < offset <= MARGIN for _, offset in sent), sent
    assert any(offset < 0 for _, offset in sent)


# --- AlignedSends itself: the order of sends, re-alignment, the budget -------------------------------


def _outgoing(run: int, due: datetime) -> Outgoing:
    message = RunMessage(
        run_id=f"job-{run}.{due.strftime('%Y%m%dT%H%M%S%f')}",
        job_id=f"job-{run}",
        tenant="acme",
        attempt=1,
        scheduled_at=due,
        due_at=due,
        target={"handler": "echo"},
    )
    return Outgoing(queue="default", message=message, delay_seconds=0)


class _TimedQueues(RunQueues):
    """moto's queues, each send call taking ``seconds`` on the fake clock (a slow network); the instants
    of the calls are kept."""

    def __init__(self, env, clock: FakeClock, seconds: float):
        super().__init__(env.clients.sqs, env.settings.queue_urls)
        self.clock, self.seconds, self.calls = clock, seconds, []

    def send(self, outgoing):
        self.calls.append((self.clock.now(), [o.message.due_at for o in outgoing]))
        report = super().send(outgoing)
        self.clock.advance(self.seconds)
        return report


def test_runs_already_due_are_sent_first_without_waiting(aws):
    # Given a tick at :00.37 with one run overdue and one due 10 s later
    clock = FakeClock(T0 + timedelta(seconds=0.37))
    queues = _TimedQueues(aws, clock, 0.0)
    sends = AlignedSends(clock=clock, sleep=clock.advance, late_margin=MARGIN, budget=2.0)
    overdue, ahead = T0 - timedelta(seconds=3), T0 + timedelta(seconds=10)
    # When both are sent
    with sqs_on_clock(clock):
        report = sends.send(queues, [_outgoing(1, ahead), _outgoing(2, overdue)])
    # Then the overdue one went out at :00.37, before the wait; the other at :01, landing on its instant
    assert [(at, dues) for at, dues in queues.calls] == [
        (T0 + timedelta(seconds=0.37), [overdue]),
        (T0 + timedelta(seconds=1), [ahead]),
    ]
    assert len(report.sent) == 2 and not report.failed
    with sqs_on_clock(clock):
        offsets = dict(surfacings(aws))
    assert offsets[ahead] == 0.0


def test_a_long_burst_is_re_aligned_once_its_sends_pass_the_margin(aws):
    # Given 40 runs due on whole seconds, and sends that take 60 ms each (one batch at a time)
    clock = FakeClock(T0 + timedelta(seconds=0.37))
    queues = _TimedQueues(aws, clock, 0.06)
    sends = AlignedSends(clock=clock, sleep=clock.advance, late_margin=MARGIN, budget=2.0)
    dues = [T0 + timedelta(seconds=30 + i // 10) for i in range(40)]
    # When they are sent
    with sqs_on_clock(clock):
        sends.send(queues, [_outgoing(i, due) for i, due in enumerate(dues)])
        offsets = [offset for _, offset in surfacings(aws)]
    # Then the third batch would have gone out 0.12 s into its second: the tick waited for the next
    # one instead, so every message landed within the margin after its instant
    assert [at for at, _ in queues.calls] == [
        T0 + timedelta(seconds=1),
        T0 + timedelta(seconds=1.06),
        T0 + timedelta(seconds=2),
        T0 + timedelta(seconds=2.06),
    ]
    assert sends.waits == 2 and sends.slept == pytest.approx(0.63 + 0.88)
    assert len(offsets) == 40 and all(0.0 <= o <= MARGIN for o in offsets)


def test_once_the_budget_is_spent_batches_go_out_at_once_rounded_per_message(aws):
    # Given a budget of 0.7 s and the same slow sends
    clock = FakeClock(T0 + timedelta(seconds=0.37))
    queues = _TimedQueues(aws, clock, 0.06)
    sends = AlignedSends(clock=clock, sleep=clock.advance, late_margin=MARGIN, budget=0.7)
    dues = [T0 + timedelta(seconds=30 + i // 10) for i in range(40)]
    # When the 40 runs are sent
    with sqs_on_clock(clock):
        sends.send(queues, [_outgoing(i, due) for i, due in enumerate(dues)])
        offsets = [offset for _, offset in surfacings(aws)]
    # Then only the first wait happened (0.63 s); later batches surfaced early (never late past the
    # margin), and their workers wait the rest out
    assert sends.waits == 1 and sends.slept == pytest.approx(0.63)
    assert all(-1.0 < o <= MARGIN for o in offsets)
    assert sorted(round(o, 2) for o in offsets)[:10] == [-0.88] * 10


def test_a_dispatcher_without_a_sleep_does_not_align(aws):
    # Given the API's dispatcher (no clock, no sleep: the immediate dispatch of a created job)
    from jobsched.compose.pipeline import dispatcher_from_settings

    dispatcher = dispatcher_from_settings(aws.settings, aws.clients, owner="api")
    # Then it sends with the delays rounded down from its ``now``, as before
    assert dispatcher.aligned_sends() is None
    ticking = dispatcher_from_settings(
        aws.settings, aws.clients, clock=FakeClock(T0), sleep=lambda s: None, owner="tick"
    )
    assert ticking.aligned_sends() is not None


def test_send_align_ms_out_of_range_is_refused(monkeypatch):
    # Given a margin over half a second / When the settings are read / Then the variable is named
    from jobsched.runtime.settings import ConfigurationError, Settings

    env = {
        "JOBSCHED_JOBS_TABLE": "j",
        "JOBSCHED_RUNS_TABLE": "r",
        "JOBSCHED_LEASES_TABLE": "l",
        "JOBSCHED_SEND_ALIGN_MS": "900",
    } | {f"JOBSCHED_QUEUE_URL_{k.upper()}": f"https://q/{k}" for k in QUEUE_KINDS}
    with pytest.raises(ConfigurationError, match="JOBSCHED_SEND_ALIGN_MS"):
        Settings.from_env(env)
    assert Settings.from_env(env | {"JOBSCHED_SEND_ALIGN_MS": "0"}).send_align_ms == 0
    assert (
        Settings.from_env({k: v for k, v in env.items() if k != "JOBSCHED_SEND_ALIGN_MS"}).send_align_ms
        == 100
    )
