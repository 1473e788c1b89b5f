"""The worker's figures per pool (issue 31 §5, decision 0056): each run's lag, duration and outcome
counted in the deployment's total and in its pool's own metric (``pool_metric``), and its duration
and pool on the outcome the ``run delivery handled`` line writes (the slowest-runs saved query)."""

from __future__ import annotations

from datetime import timedelta

import jobsched.targets.demo  # noqa: F401
from jobsched.aws.runs_store import RunsStore
from jobsched.compose.pipeline import worker_from_settings
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, make_run_id
from jobsched.runtime import observability as obs
from jobsched.services.deliveries import Delivery
from tests.aws.memory import memory_aws_units  # noqa: F401  (on the in-memory fakes)


def _message(
    store: RunsStore, job_id: str, at, target: dict, pool: str, attempts: int = 1, payload: dict | None = None
) -> RunMessage:
    run = Run(
        id=make_run_id(job_id, at),
        job_id=job_id,
        tenant="acme",
        scheduled_at=at,
        due_at=at,
        created_at=at,
        pool=pool,
    )
    store.create(run)
    return RunMessage(
        run_id=run.id, job_id=job_id, tenant="acme", attempt=1, scheduled_at=at, due_at=at, target=target,
        payload=payload or {"kind": "permanent"}, retry=RetrySpec(max_attempts=attempts),
    )  # fmt: skip


def _points(sink: obs.RecordingSink) -> dict[str, int]:
    return {name: len(values) for name, values in sink.points.items() if values}


def test_each_run_counts_in_the_total_and_in_its_pools_metric(aws, clock):
    # Given a lambda-pool run that succeeds and a container-pool run that fails for good, handled 3 s
    # after their due instant
    sink = obs.RecordingSink()
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w1", metrics=sink)
    store = RunsStore(deliveries.worker.attempts.dynamo, aws.settings.runs_table)
    at = clock.now()
    ok = _message(store, "job-ok", at, {"handler": "demo.echo"}, "lambda")
    bad = _message(store, "job-bad", at, {"handler": "demo.fail"}, "container")
    clock.advance(timedelta(seconds=3))
    # When the worker handles both
    outcomes = [deliveries.handle(Delivery.of(m.to_json()), clock.now()) for m in (ok, bad)]
    # Then each figure is in the total and in its own pool's metric, never in another pool's
    assert [o.status for o in outcomes] == ["succeeded", "dead_lettered"]
    lam, con = (lambda n: obs.pool_metric(n, "lambda")), (lambda n: obs.pool_metric(n, "container"))
    assert _points(sink) == {
        obs.SCHEDULE_LAG: 2, lam(obs.SCHEDULE_LAG): 1, con(obs.SCHEDULE_LAG): 1,
        obs.RUN_DURATION: 2, lam(obs.RUN_DURATION): 1, con(obs.RUN_DURATION): 1,
        obs.RUNS_SUCCEEDED: 1, lam(obs.RUNS_SUCCEEDED): 1,
        obs.RUNS_FAILED: 1, con(obs.RUNS_FAILED): 1,
        obs.RUNS_DEAD_LETTERED: 1, con(obs.RUNS_DEAD_LETTERED): 1,
    }  # fmt: skip
    assert sink.points[lam(obs.SCHEDULE_LAG)] == [3.0] and sink.points[con(obs.SCHEDULE_LAG)] == [3.0]
    # and the outcome (the line the worker logs) names the pool and the attempt's duration
    assert [(o.detail["pool"], o.detail["duration_seconds"]) for o in outcomes] == [
        ("lambda", 0.0),
        ("container", 0.0),
    ]


def test_a_retried_attempt_counts_as_failed_and_retried_in_its_pool(aws, clock):
    sink = obs.RecordingSink()
    deliveries = worker_from_settings(aws.settings, aws.clients, clock, "w1", metrics=sink)
    store = RunsStore(deliveries.worker.attempts.dynamo, aws.settings.runs_table)
    # Given a long-pool run of demo.flaky that fails once, with 2 attempts
    target, payload = {"handler": "demo.flaky"}, {"failures": 1}
    msg = _message(store, "job-flaky", clock.now(), target, "long", attempts=2, payload=payload)
    outcome = deliveries.handle(Delivery.of(msg.to_json()), clock.now())
    assert outcome.status == "retrying"
    long = lambda n: obs.pool_metric(n, "long")  # noqa: E731
    assert (sink.count(long(obs.RUNS_FAILED)), sink.count(long(obs.RUNS_RETRIED))) == (1, 1)
    assert sink.count(long(obs.RUNS_DEAD_LETTERED)) == 0 and sink.count(obs.RUNS_RETRIED) == 1


def test_add_per_pool_names_a_metric_per_pool_and_counts_an_unknown_pool_in_the_total_only():
    sink = obs.RecordingSink()
    obs.add_per_pool(sink, obs.RUN_DURATION, "container", 2.5)
    obs.add_per_pool(sink, obs.RUN_DURATION, "gpu", 1.0)
    assert dict(sink.points) == {"RunDuration": [2.5, 1.0], "RunDurationContainer": [2.5]}
