"""The worker's Lambda entry point: SQS events in, partial batch responses out."""

from __future__ import annotations

import time

import pytest

import functions.worker as worker_function
from jobsched.core.models import RunState
from jobsched.local.invoke import LambdaContext
from tests.aws.conftest_worker import Kit


@pytest.fixture
def kit(aws_environ, clock):
    with worker_function.seam.installed(clock=clock):
        yield Kit(aws_environ, clock)


def sqs_event(aws, bodies: list[str]) -> dict:
    """Send ``bodies`` to the default queue and receive them back as a Lambda SQS event."""
    sqs, url = aws.clients.sqs, aws.settings.queue_url("default")
    for body in bodies:
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId="acme")
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    messages = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert len(messages) == len(bodies)
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m.get("Attributes", {}),
                "messageAttributes": {},
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": arn,
                "awsRegion": "us-east-1",
            }
            for m in messages
        ]
    }


def test_one_deferred_record_does_not_fail_the_batch(kit, clock, aws_environ):
    # Given a fresh run, a run held by another worker's live lease, and a malformed message
    fresh, fresh_msg = kit.new_run(job_id="fresh")
    held, held_msg = kit.new_run(job_id="held")
    kit.attempts.claim(held.id, 1, "someone-else", clock.now(), 60)
    event = sqs_event(aws_environ, [fresh_msg.to_json(), held_msg.to_json(), "{broken"])
    ids = {r["body"]: r["messageId"] for r in event["Records"]}
    # When the worker function handles the batch
    response = worker_function.handler(event, LambdaContext("worker", 900))
    # Then only the held and the malformed records are reported failed; the fresh run succeeded
    failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
    assert failed == {ids[held_msg.to_json()], ids["{broken"]}
    assert kit.runs.get(fresh.id).state is RunState.SUCCEEDED
    assert kit.runs.get(held.id).lease_owner == "someone-else"


def test_a_permanent_failure_is_acknowledged_and_dead_lettered(kit, clock, aws_environ):
    # Given a run that fails permanently
    run, msg = kit.new_run({"handler": "demo.fail"}, {"kind": "permanent"})
    # When the function handles it
    response = worker_function.handler(sqs_event(aws_environ, [msg.to_json()]), LambdaContext("worker", 900))
    # Then the record is acknowledged (no retry by SQS) and the run is a dead letter
    assert response["batchItemFailures"] == []
    item = kit.attempts.get_item(run.id)
    assert item["state"] == "failed" and item["dl_reason"] == "permanent"


def test_each_invocation_owns_its_leases():
    first, second = LambdaContext("worker", 900), LambdaContext("worker", 900)
    owners = {f"worker:{c.aws_request_id}" for c in (first, second)}
    assert len(owners) == 2


def test_a_tenant_s_limits_are_read_once_per_container_not_once_per_invocation(kit, aws_environ, monkeypatch):
    # Given the worker function counting its reads of the tenant's limits item
    from jobsched.aws.metering import Dynamo

    reads: list[str] = []
    get = Dynamo.get

    def counted(self, table, key, *args, **kwargs):
        if str(key.get("lease_key", "")).startswith("limits#"):
            reads.append(key["lease_key"])
        return get(self, table, key, *args, **kwargs)

    monkeypatch.setattr(Dynamo, "get", counted)
    # When three invocations each handle a run of tenant acme
    for name in ("one", "two", "three"):
        _, msg = kit.new_run(job_id=name)
        worker_function.handler(sqs_event(aws_environ, [msg.to_json()]), LambdaContext("worker", 900))
    # Then the limits were read once (kept a minute for the container), where every invocation read
    # them before
    assert reads == ["limits#acme"]


def test_an_operator_s_limit_change_reaches_the_same_process_s_workers_at_once(kit, aws_environ, monkeypatch):
    # Given a worker container that has read tenant acme's limits (none)
    from jobsched.aws.tenant_limits import CONTAINER_CACHE
    from jobsched.compose.pipeline import dynamo_for, tenant_limits_from_settings
    from jobsched.runtime.settings import Settings

    _, msg = kit.new_run(job_id="before")
    worker_function.handler(sqs_event(aws_environ, [msg.to_json()]), LambdaContext("worker", 900))
    assert CONTAINER_CACHE.fresh("acme", time.monotonic(), 60) is not None
    # When the admin API (in the embedded mode: the same process) sets a limit for acme
    settings = Settings.from_env()
    admin = tenant_limits_from_settings(settings, dynamo_for(settings, aws_environ.clients.dynamodb, None))
    admin.put("acme", kit.clock.now(), max_running=3, per_second=None, burst=None)
    # Then the container's cache forgot acme: its next run reads the new limit
    assert CONTAINER_CACHE.fresh("acme", time.monotonic(), 60) is None


@pytest.mark.parametrize("share", [None, "0.5"])
def test_with_a_fair_share_the_head_room_refuses_the_tenant_at_its_slots_and_runs_another(
    kit, clock, aws_environ, monkeypatch, share
):
    # Given a deployment where one tenant may hold 1 invocation of the default queue's pool, and
    # tenant acme's one slot held by another invocation (registered on acme's share item); with the
    # share told (JOBSCHED_FAIR_SHARE, as the stack does) the worker reads the pool's ceiling item
    # with the share item in one BatchGetItem, none written: the base ceiling ceil(1 / 0.5) = 2, 1 slot
    from jobsched.aws.limits_store import Semaphores, share_key
    from jobsched.runtime.resources import ENV_FAIR_SHARE, ENV_TENANT_SLOTS

    monkeypatch.setenv(ENV_TENANT_SLOTS, "default=1")
    if share is not None:
        monkeypatch.setenv(ENV_FAIR_SHARE, share)
    Semaphores(kit.dynamo, aws_environ.settings.leases_table).acquire(
        share_key("default", "acme"), "worker:elsewhere", 1, clock.now(), 60
    )
    noisy, noisy_msg = kit.new_run(job_id="noisy", tenant="acme")
    quiet, quiet_msg = kit.new_run(job_id="quiet", tenant="beta")
    event = sqs_event(aws_environ, [noisy_msg.to_json(), quiet_msg.to_json()])
    ids = {r["body"]: r["messageId"] for r in event["Records"]}
    # When this invocation (in the head-room) handles a batch of one acme run and one beta run
    response = worker_function.handler(event, LambdaContext("worker", 900))
    # Then beta's run ran; acme's was left in the queue, visible again, its run queued with no attempt
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [ids[noisy_msg.to_json()]]
    assert kit.runs.get(quiet.id).state is RunState.SUCCEEDED
    stored = kit.attempts.get(noisy.id)
    assert (stored.state, stored.attempt) == ("queued", 0)
    url = aws_environ.settings.queue_url("default")
    again = aws_environ.clients.sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [m["MessageId"] for m in again] == [ids[noisy_msg.to_json()]]
