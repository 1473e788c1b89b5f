"""Pools (issue 30, decision 0053): a job's pool is chosen at creation, checked on every edit, and every
message of its runs (the dispatcher's first send, a manual or backfill run, a retry, a sweeper re-send
or lease reclaim, a limit wait's re-send, a dead letter's replay, a workflow node's start) goes to
``queue_for(pool, priority)``: the container or long run never lands on a Lambda priority queue."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta

import pytest

from jobsched.aws.jobs_store import JobsStore
from jobsched.aws.queues import RunQueues
from jobsched.core.errors import ValidationError
from jobsched.core.models import Job, JobState, RetrySpec, RunState
from jobsched.services.dead_letters import DeadLetterService
from jobsched.services.deliveries import Delivery
from tests.aws.conftest import T0
from tests.aws.conftest_worker import Kit, fail_permanently, run_service, sent_messages, sweeper_for
from tests.aws.memory import build_pipeline, memory_aws  # noqa: F401  (on the in-memory fakes)
from tests.aws.workflow_kit import WorkflowKit, node

KINDS = ("high", "default", "low", "long", "container")


def job_def(**extra) -> dict:
    return {"name": "report", "schedule": "*/5 * * * *", "target": {"handler": "echo"}, **extra}


def queued_on(aws, run_id: str) -> list[str]:
    """The queue kinds holding a message of ``run_id``."""
    return [kind for kind in KINDS if any(body["run_id"] == run_id for body, _ in sent_messages(aws, kind))]


@pytest.fixture
def kit(aws, clock):
    return Kit(aws, clock)


@pytest.fixture
def pipeline(aws):
    return build_pipeline(aws)


# --- choosing and checking the pool ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "pool"),
    [
        ({}, "lambda"),
        ({"timeout_seconds": 900}, "lambda"),
        ({"timeout_seconds": 901}, "container"),
        ({"timeout_seconds": 43200}, "container"),
        ({"pool": "long", "timeout_seconds": 600}, "long"),
        ({"pool": "container", "timeout_seconds": 60}, "container"),
    ],
)
def test_a_job_is_stored_with_the_pool_it_names_or_the_one_its_timeout_needs(pipeline, clock, extra, pool):
    # Given a definition with or without a pool / When created / Then the stored job names its pool
    job = pipeline.jobs.create("acme", job_def(**extra), clock.now())
    assert job.pool == pool
    assert pipeline.jobs.get("acme", job.id).pool == pool


@pytest.mark.parametrize(
    ("extra", "field", "says"),
    [
        ({"pool": "lambda", "timeout_seconds": 901}, "timeout_seconds", "set pool to 'container'"),
        ({"pool": "long", "timeout_seconds": 3600}, "timeout_seconds", "set pool to 'container'"),
        ({"pool": "container", "timeout_seconds": 43201}, "timeout_seconds", "between 1 and 43200"),
        ({"timeout_seconds": 43201}, "timeout_seconds", "between 1 and 43200"),
        ({"pool": "fargate"}, "pool", "use lambda, long, container"),
        (
            {"target": {"http": {"url": "https://example.com/x", "timeout_seconds": 1200}}},
            "target.http.timeout_seconds",
            "set pool to 'container'",
        ),
    ],
)
def test_a_timeout_beyond_its_pool_or_an_unknown_pool_is_refused_naming_the_field(
    pipeline, clock, extra, field, says
):
    with pytest.raises(ValidationError) as refused:
        pipeline.jobs.create("acme", job_def(**extra), clock.now())
    assert refused.value.field == field
    assert says in refused.value.message


def test_an_http_target_on_the_container_pool_may_wait_longer_than_lambda_allows(pipeline, clock):
    target = {"http": {"url": "https://example.com/x", "timeout_seconds": 3600}}
    job = pipeline.jobs.create(
        "acme", job_def(target=target, pool="container", timeout_seconds=3700), clock.now()
    )
    assert job.target["http"]["timeout_seconds"] == 3600 and job.pool == "container"


def test_an_edit_that_leaves_a_lambda_job_over_the_limit_says_to_choose_container(pipeline, clock):
    # Given a lambda job
    job = pipeline.jobs.create("acme", job_def(), clock.now())
    # When its timeout is raised beyond the Lambda limit without a pool / Then 422 naming the fix
    with pytest.raises(ValidationError) as refused:
        pipeline.jobs.update("acme", job.id, {"timeout_seconds": 1800}, job.version, clock.now())
    assert refused.value.field == "timeout_seconds"
    assert "set pool to 'container'" in refused.value.message
    # And with the pool it is accepted
    moved = pipeline.jobs.update(
        "acme", job.id, {"timeout_seconds": 1800, "pool": "container"}, job.version, clock.now()
    )
    assert (moved.pool, moved.timeout_seconds) == ("container", 1800)


def test_the_embedded_lambda_limit_decides_the_default_pool(aws, clock):
    # Given a deployment whose Lambda limit is 5 s (the embedded mode's test-sized limit)
    pipeline = build_pipeline(aws)
    pipeline.jobs.time_limit = 5
    # Then a 10 s job goes to the container pool, and lambda refuses it
    assert pipeline.jobs.create("acme", job_def(timeout_seconds=10), clock.now()).pool == "container"
    with pytest.raises(ValidationError, match="between 1 and 5 on the lambda pool"):
        pipeline.jobs.create("acme", job_def(timeout_seconds=10, pool="lambda"), clock.now())


def test_a_job_stored_before_pools_reads_as_unchosen_and_an_edit_chooses_its_pool(pipeline, clock, aws):
    # Given a job item written before jobs had pools
    job = pipeline.jobs.create("acme", job_def(), clock.now())
    store = pipeline.dispatcher.jobs
    item = job.to_item()
    del item["pool"]
    store.dynamo.put(store.table, item)
    old = pipeline.jobs.get("acme", job.id)
    assert old.pool is None
    # When it is edited (anything else) / Then it is stored with the pool chosen as at creation
    edited = pipeline.jobs.update("acme", job.id, {"description": "x"}, old.version, clock.now())
    assert edited.pool == "lambda"


@pytest.fixture
def chunked_jobs(pipeline):
    """The job service checking targets against this process's registry, demo.chunked_sum included."""
    import jobsched.long_jobs.demo  # noqa: F401  (registers demo.chunked_sum, a chunked job)
    from jobsched.targets.registry import RegistryCatalog

    pipeline.jobs.catalog = RegistryCatalog()
    return pipeline.jobs


def test_a_chunked_job_runs_on_the_long_pool_unless_it_names_container(chunked_jobs, clock):
    chunked = job_def(target={"handler": "demo.chunked_sum"})
    assert chunked_jobs.create("acme", chunked, clock.now()).pool == "long"
    assert chunked_jobs.create("acme", {**chunked, "pool": "container"}, clock.now()).pool == "container"


def test_a_chunked_job_on_the_lambda_pool_is_refused_naming_pool(chunked_jobs, clock):
    with pytest.raises(ValidationError) as refused:
        chunked_jobs.create(
            "acme", job_def(target={"handler": "demo.chunked_sum"}, pool="lambda"), clock.now()
        )
    assert refused.value.field == "pool"
    assert "use long, container" in refused.value.message


# --- routing every send ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "queue"),
    [
        ({"priority": "high"}, "high"),
        ({"priority": "low"}, "low"),
        ({"pool": "long", "priority": "high"}, "long"),
        ({"pool": "container", "priority": "low", "timeout_seconds": 5400}, "container"),
    ],
)
def test_the_dispatcher_sends_a_run_to_its_pools_queue(pipeline, clock, aws, extra, queue):
    # Given a job due within the look-ahead / When it is created (dispatched at once) and ticked
    job = pipeline.jobs.create("acme", job_def(schedule="* * * * *", **extra), clock.now())
    pipeline.tick(job, clock.now())
    # Then its runs' messages are on the pool's queue only, carrying the pool
    bodies = [body for kind in KINDS for body, _ in sent_messages(aws, kind)]
    assert bodies, "the job was dispatched"
    assert {kind for kind in KINDS if sent_messages(aws, kind)} == {queue}
    assert {body["pool"] for body in bodies} == {job.pool}
    stored = pipeline.dispatcher.runs.get(bodies[0]["run_id"])
    assert stored.pool == job.pool


def test_a_manual_and_a_backfill_run_go_to_the_container_queue(pipeline, clock, aws):
    job = pipeline.jobs.create("acme", job_def(schedule="0 3 * * *", pool="container"), clock.now())
    manual = pipeline.jobs.trigger("acme", job.id, clock.now())
    (filled,) = pipeline.jobs.backfill("acme", job.id, T0 - timedelta(days=1), T0, clock.now())
    assert queued_on(aws, manual.id) == ["container"]
    assert queued_on(aws, filled.id) == ["container"]


def test_an_edit_moving_a_job_to_another_pool_re_sends_its_runs_queued_ahead_there(pipeline, clock, aws):
    # Given a lambda job with a run queued ahead on the default queue
    job = pipeline.jobs.create("acme", job_def(schedule="* * * * *"), clock.now())
    pipeline.tick(job, clock.now())
    ahead = [body["run_id"] for body, delay in sent_messages(aws, "default") if delay > 0]
    assert ahead
    # When it moves to the container pool
    job = pipeline.jobs.get("acme", job.id)
    pipeline.jobs.update("acme", job.id, {"pool": "container"}, job.version, clock.now())
    # Then each run queued ahead has a fresh message on the container queue and is recorded there
    for run_id in ahead:
        assert "container" in queued_on(aws, run_id)
        assert pipeline.dispatcher.runs.get(run_id).pool == "container"


@pytest.mark.parametrize("pool", ["long", "container"])
def test_a_retry_is_re_sent_to_the_runs_pool(kit, clock, aws, pool):
    # Given a run on the pool that fails retryably
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "retryable"}, pool=pool, priority="high")
    # When its attempt runs
    assert kit.worker().handle(Delivery.of(msg.to_json()), clock.now()).status == "retrying"
    # Then attempt 2 waits on the pool's queue, not on the priority's
    [(body, _)] = sent_messages(aws, pool)
    assert (body["run_id"], body["attempt"], body["pool"]) == (run.id, 2, pool)
    assert sent_messages(aws, "high") == []


def test_a_retry_beyond_the_sqs_delay_is_re_delayed_on_the_container_queue(kit, clock, aws):
    _, msg = kit.new_run({"handler": "demo.fail"}, {}, base_seconds=3000, max_seconds=3000, pool="container")
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    [(body, _)] = sent_messages(aws, "container")
    clock.advance(seconds=900)
    assert kit.worker("worker-b").handle(Delivery.of(json.dumps(body)), clock.now()).status == "redelayed"
    assert len([b for b, _ in sent_messages(aws, "container") if b["attempt"] == 2]) == 2
    assert sent_messages(aws, "default") == []


def _container_job(jobs: JobsStore, clock) -> Job:
    return jobs.create(
        Job(
            id="job1",
            tenant="acme",
            name="export",
            schedule="at(2026-03-02T12:00:00)",
            target={"handler": "demo.echo"},
            pool="container",
            timeout_seconds=3600,
            retry=RetrySpec(max_attempts=3),
            state=JobState.COMPLETED,
            created_at=clock.now() - timedelta(hours=1),
            updated_at=clock.now() - timedelta(hours=1),
        )
    )


def test_the_sweeper_re_sends_a_lost_container_run_to_the_container_queue(kit, clock, aws):
    # Given a container run whose first send was lost
    jobs = JobsStore(kit.dynamo, kit.aws.settings.jobs_table)
    _container_job(jobs, clock)
    run, _ = kit.new_run(pool="container")
    # When the sweeper runs after the grace period
    clock.advance(minutes=3)
    assert sweeper_for(kit, jobs).sweep(clock.now()).resent == 1
    # Then the copy is on the container queue
    assert queued_on(aws, run.id) == ["container"]


def test_the_sweeper_reclaims_an_expired_container_lease_on_the_container_queue(kit, clock, aws):
    # Given a container run whose worker died holding its lease
    jobs = JobsStore(kit.dynamo, kit.aws.settings.jobs_table)
    _container_job(jobs, clock)
    run, _ = kit.new_run({"handler": "demo.echo"}, pool="container")
    kit.attempts.claim(run.id, 1, "dead-worker", clock.now(), 60)
    # When the lease has long expired and the sweeper runs
    clock.advance(minutes=10)
    assert sweeper_for(kit, jobs).sweep(clock.now()).reclaimed == 1
    # Then the next attempt is on the container queue
    assert queued_on(aws, run.id) == ["container"]


def test_a_replayed_container_dead_letter_goes_to_the_container_queue(kit, clock, aws):
    run, _ = fail_permanently(kit, pool="container")
    clock.advance(minutes=3)
    DeadLetterService(run_service(kit)).replay("acme", run.id, clock.now())
    [(body, _)] = [(b, d) for b, d in sent_messages(aws, "container") if b["attempt"] == 2]
    assert body["run_id"] == run.id and body["pool"] == "container"
    assert sent_messages(aws, "default") == []


def test_a_limit_waits_re_send_stays_on_the_container_queue(kit, clock, aws):
    # Given the only slot of a key held, and a container run of that key delivered near its redrive
    from tests.services.test_worker_limits import STRIPE, limited_worker

    worker = limited_worker(kit)
    _, held = kit.new_run(job_id="job-a")
    assert (
        worker.limits.admit(replace(held, concurrency=STRIPE), clock.now(), None, None, "o").outcome is None
    )
    run, msg = kit.new_run(job_id="job-b", pool="container")
    queues = RunQueues(aws.clients.sqs, aws.settings.queue_urls)
    queues.send_one(replace(msg, concurrency=STRIPE), clock.now())
    url = aws.settings.queue_url("container")
    got = aws.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, VisibilityTimeout=30)[
        "Messages"
    ][0]
    # When it waits for the 4th time / Then its fresh copy is sent to the container queue
    out = worker.handle(
        Delivery(
            message_id="",
            body=got["Body"],
            receipt_handle=got["ReceiptHandle"],
            queue_url=url,
            receive_count=4,
        ),
        clock.now(),
    )
    assert out.status == "waiting"
    assert len([b for b, _ in sent_messages(aws, "container") if b["run_id"] == run.id]) == 2
    assert sent_messages(aws, "default") == []


# --- workflow nodes --------------------------------------------------------------------------------


def test_workflow_nodes_start_on_their_pools_queues(aws, clock):
    # Given a workflow whose root runs on lambda, then one child on long and one on the container pool
    # (that one without a pool, its timeout beyond the Lambda limit)
    kit = WorkflowKit(aws, clock)
    wf = kit.create(
        [
            node("root"),
            node("slow", "wf.echo", "root", pool="long", timeout_seconds=600),
            node("huge", "wf.echo", "root", timeout_seconds=3600),
        ]
    )
    stored = kit.jobs.get("acme", wf.id)
    assert [n.get("pool") for n in stored.target["workflow"]["nodes"]] == [None, "long", "container"]
    run = kit.trigger(wf.id)
    # When the queues are drained
    kit.drain()
    # Then each node ran, from its own pool's queue
    assert kit.states(run.id) == dict.fromkeys(["root", "slow", "huge"], "succeeded")
    view = kit.view(run.id)
    assert {n: view.nodes[n].pool for n in ("root", "slow", "huge")} == {
        "root": "lambda",
        "slow": "long",
        "huge": "container",
    }


def test_a_workflow_node_over_its_pools_limit_is_refused(aws, clock):
    kit = WorkflowKit(aws, clock)
    with pytest.raises(ValidationError) as refused:
        kit.create([node("root", pool="lambda", timeout_seconds=1200)])
    assert "node 'root'" in refused.value.message and "set pool to 'container'" in refused.value.message
    assert refused.value.field in ("target", "timeout_seconds")


def test_a_run_never_leaves_its_pool(kit, clock, aws):
    # Given a container run that succeeds at once
    run, msg = kit.new_run(pool="container")
    kit.worker().handle(Delivery.of(msg.to_json()), clock.now())
    assert kit.runs.get(run.id).state is RunState.SUCCEEDED
    assert kit.runs.get(run.id).pool == "container"


def test_the_first_edit_of_a_job_stored_before_pools_re_plans_nothing_for_its_pool(pipeline, clock, aws):
    # Given a lambda job stored before jobs had pools, with runs queued ahead
    job = pipeline.jobs.create("acme", job_def(schedule="* * * * *"), clock.now())
    pipeline.tick(job, clock.now())
    store = pipeline.dispatcher.jobs
    item = store.get("acme", job.id).to_item()
    del item["pool"]
    store.dynamo.put(store.table, item)
    before = len(sent_messages(aws, "default"))
    # When it is edited (its name only) / Then its pool is stored as lambda and no run is re-sent
    old = pipeline.jobs.get("acme", job.id)
    assert (
        pipeline.jobs.update("acme", job.id, {"name": "renamed"}, old.version, clock.now()).pool == "lambda"
    )
    assert len(sent_messages(aws, "default")) == before
