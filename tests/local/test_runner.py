"""The embedded mode as a whole: provisioning from the shared specs, environment, shutdown."""

from __future__ import annotations

import json
import os
import time

import pytest

from jobsched.local.embedded import EmbeddedMode
from jobsched.runtime import resources
from tests.local.conftest import Machinery, Recorder, machinery_config


def test_every_table_is_provisioned_from_its_spec(machinery: Machinery) -> None:
    dynamodb = machinery.mode.clients["dynamodb"]
    for spec in resources.TABLES:
        name = os.environ[spec.env_var]
        table = dynamodb.describe_table(TableName=name)["Table"]
        assert {i["IndexName"] for i in table.get("GlobalSecondaryIndexes", [])} == {
            i.name for i in spec.indexes
        }
        if spec.ttl_attribute:
            ttl = dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"]
            assert ttl["AttributeName"] == spec.ttl_attribute


def test_every_queue_has_a_dlq_with_the_spec_redrive_policy(machinery: Machinery) -> None:
    sqs = machinery.sqs
    for spec in resources.QUEUES:
        url = os.environ[spec.env_var]
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        redrive = json.loads(attributes["RedrivePolicy"])
        assert redrive["maxReceiveCount"] == spec.max_receive_count
        assert redrive["deadLetterTargetArn"] == machinery.queue(spec.kind).dlq_arn
        assert os.environ[spec.dlq_env_var] == machinery.queue(spec.kind).dlq_url


def test_the_functions_see_the_same_environment_as_on_aws(machinery: Machinery) -> None:
    assert os.environ["AWS_ENDPOINT_URL"] == machinery.mode.endpoint_url
    # DynamoDB is served by a moto process of its own; botocore picks the per-service variable up
    assert os.environ["AWS_ENDPOINT_URL_DYNAMODB"] == machinery.mode.dynamodb_endpoint_url
    assert machinery.mode.dynamodb_endpoint_url != machinery.mode.endpoint_url
    dynamodb = machinery.mode.clients["dynamodb"]
    assert dynamodb.meta.endpoint_url == machinery.mode.dynamodb_endpoint_url
    assert machinery.mode.clients["sqs"].meta.endpoint_url == machinery.mode.endpoint_url
    assert os.environ["AWS_DEFAULT_REGION"] == "us-east-1"
    assert os.environ[resources.ENV_AUTH_MODE] == "token"
    assert json.loads(os.environ[resources.ENV_TENANT_TOKENS]) == {"tok-acme": "acme"}
    assert os.environ[resources.ENV_SHARDS] == "3"
    assert os.environ[resources.ENV_ALLOWED_HTTP_HOSTS] == "127.0.0.1,localhost"
    assert os.environ[resources.ENV_BUCKET] in [
        b["Name"] for b in machinery.mode.clients["s3"].list_buckets()["Buckets"]
    ]


def test_stop_ends_everything_within_seconds_and_restores_the_environment() -> None:
    # Given a running embedded mode with an invocation in progress. Every function is a recording
    # handler: the real ones build their services once per process from the environment of their first
    # event (EmbeddedMode's docstring), and this mode's environment is private to it, so a real
    # dispatcher would keep the package machinery's tables and write to them after that had stopped
    # (a clean-clone CI recorded its usage writes on a table no environment named any more).
    environ = {"AWS_ENDPOINT_URL": "http://before"}
    worker = Recorder()
    handlers = {name: Recorder() for name in ("api", "dispatcher", "dlq_consumer", "sweeper")}
    mode = EmbeddedMode(
        machinery_config(),
        handlers={"worker": worker, **handlers},
        environ=environ,
        out=lambda s: None,
    )
    mode.start()
    mode.clients["sqs"].send_message(QueueUrl=mode.provisioned.queues["high"].url, MessageBody="block")
    deadline = time.monotonic() + 10
    while not worker.records("block") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.records("block")
    # When it is stopped
    started = time.monotonic()
    mode.stop()
    elapsed = time.monotonic() - started
    # Then it stops within a few seconds, every thread has ended but the abandoned invocation...
    assert elapsed < 5
    assert not any(
        t.is_alive() for t in [p._thread for p in mode.pollers] + [s._thread for s in mode.schedules]
    )
    # ...and the process environment is what it was
    assert environ == {"AWS_ENDPOINT_URL": "http://before"}
    worker.release.set()


def test_a_function_that_cannot_be_imported_is_reported_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given handler overrides for all but the worker, whose module does not exist here
    lines: list[str] = []
    overrides = {"api": None, "dispatcher": None, "dlq_consumer": None, "sweeper": None}
    mode = EmbeddedMode(machinery_config(), handlers=overrides, environ={}, out=lines.append)
    missing = resources.FunctionSpec("worker", "functions.no_such_module.handler", 128, 3)
    monkeypatch.setattr(
        resources, "FUNCTIONS", tuple(missing if s.name == "worker" else s for s in resources.FUNCTIONS)
    )
    try:
        # When it starts
        mode.start()
        # Then a warning names it and no poller runs
        assert any("worker function unavailable" in line for line in lines)
        assert mode.pollers == []
    finally:
        mode.stop()


def test_the_chunked_job_state_machine_is_provisioned_for_the_long_queue(machinery: Machinery) -> None:
    # Given the embedded mode provisioned from jobsched.long_jobs.asl
    arn = os.environ[resources.ENV_STATE_MACHINE_ARN]
    # Then the state machine exists and its tasks go to the provisioned long queue
    described = machinery.mode.clients["stepfunctions"].describe_state_machine(stateMachineArn=arn)
    assert described["type"] == "STANDARD"
    assert machinery.queue("long").url in described["definition"]


def test_the_container_queue_is_provisioned_with_its_dlq_and_no_lambda_poller(machinery: Machinery) -> None:
    # Given the embedded mode / Then the container pool's queue and its DLQ exist and are named in the
    # functions' environment (the state machine's chunk queue for container-pool chunked jobs), and no
    # Lambda poller takes a slot for it (the container worker is a process of its own)
    from jobsched.local.config import DEFAULT_SLOTS

    url = os.environ[resources.ENV_QUEUE_URL_PREFIX + "CONTAINER"]
    assert url == machinery.queue("container").url
    assert os.environ[resources.ENV_DLQ_URL_PREFIX + "CONTAINER"] == machinery.queue("container").dlq_url
    assert "container" not in DEFAULT_SLOTS


def test_a_private_environ_is_what_the_embedded_mode_s_own_clients_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a process environment with no AWS endpoint, credentials or region at all
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    environ: dict[str, str] = {}
    overrides = {name: None for name in ("api", "dispatcher", "worker", "dlq_consumer", "sweeper")}
    mode = EmbeddedMode(machinery_config(), handlers=overrides, environ=environ, out=lambda s: None)
    try:
        # When an embedded mode is started with a private environ
        mode.start()
        # Then its own clients reach its emulator with what it set in that environ (provisioning
        # worked), and the process environment was not read for them
        tables = mode.clients["dynamodb"].list_tables()["TableNames"]
        assert environ[resources.ENV_JOBS_TABLE] in tables
        assert mode.clients["sqs"].meta.endpoint_url == environ["AWS_ENDPOINT_URL"]
        assert mode.clients["dynamodb"].meta.endpoint_url == environ["AWS_ENDPOINT_URL_DYNAMODB"]
        assert not any(key.startswith("AWS_") for key in os.environ)
    finally:
        mode.stop()
