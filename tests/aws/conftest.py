"""moto fixtures shared by every AWS-level test: all tables, queues (each with a DLQ and redrive) and
the bucket, created from the same specs as infra/ (:mod:`jobsched.runtime.resources`).

``aws`` yields an :class:`AwsEnv` (settings + clients) inside ``mock_aws()``; ``aws_environ`` also
exports the settings as environment variables for tests that drive a Lambda entry point.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from moto import mock_aws

from jobsched.aws.clients import Clients
from jobsched.core.clock import FakeClock
from jobsched.runtime import resources as r
from jobsched.runtime.settings import Settings
from jobsched.testing.handlers import StaticCatalog

REGION = "us-east-1"
PREFIX = "test-jobsched"
#: A fixed, aware instant that every test clock starts from (never the wall clock).
T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


@dataclass
class AwsEnv:
    settings: Settings
    clients: Clients

    def queue_messages(self, kind: str, max_messages: int = 10) -> list[dict]:
        """Receive (without deleting) up to ``max_messages`` from a queue, ignoring delays is NOT done:
        moto honours DelaySeconds, so tests move time only through their own clock and inspect bodies."""
        out: list[dict] = []
        while len(out) < max_messages:
            got = self.clients.sqs.receive_message(
                QueueUrl=self.settings.queue_url(kind),
                MaxNumberOfMessages=min(10, max_messages - len(out)),
                AttributeNames=["All"],
                MessageAttributeNames=["All"],
                VisibilityTimeout=0,
            ).get("Messages", [])
            if not got:
                break
            out.extend(got)
        return out


def _fake_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
    }.items():
        monkeypatch.setenv(name, value)
    # An embedded mode running in this process (tests/local/conftest.py's package-scoped ``machinery``)
    # exports AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE>: botocore would send to its emulator.
    for name in [name for name in os.environ if name.startswith("AWS_ENDPOINT_URL")]:
        monkeypatch.delenv(name)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def provision(
    clients: Clients,
    prefix: str = PREFIX,
    shards: int = 4,
    lookahead_seconds: int = 60,
    enqueue_horizon_seconds: int = 60,
) -> Settings:
    """Create every table, queue (+DLQ with redrive) and the bucket; return the matching settings."""
    names: dict[str, str] = {}
    for spec in r.TABLES:
        name = f"{prefix}-{spec.logical_name.lower()}"
        clients.dynamodb.create_table(**spec.create_table_kwargs(name))
        names[spec.env_var] = name
    queue_urls: dict[str, str] = {}
    dlq_urls: dict[str, str] = {}
    for spec in r.QUEUES:
        dlq_url = clients.sqs.create_queue(QueueName=f"{prefix}-{spec.kind}-dlq")["QueueUrl"]
        dlq_arn = clients.sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])[
            "Attributes"
        ]["QueueArn"]
        redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(spec.max_receive_count)})
        queue_urls[spec.kind] = clients.sqs.create_queue(
            QueueName=f"{prefix}-{spec.kind}", Attributes={"RedrivePolicy": redrive}
        )["QueueUrl"]
        dlq_urls[spec.kind] = dlq_url
    bucket = f"{prefix}-bucket"
    clients.s3.create_bucket(Bucket=bucket)
    return Settings(
        jobs_table=names[r.ENV_JOBS_TABLE],
        runs_table=names[r.ENV_RUNS_TABLE],
        leases_table=names[r.ENV_LEASES_TABLE],
        idempotency_table=names[r.ENV_IDEMPOTENCY_TABLE],
        queue_urls=queue_urls,
        dlq_urls=dlq_urls,
        bucket=bucket,
        shards=shards,
        lookahead_seconds=lookahead_seconds,
        enqueue_horizon_seconds=enqueue_horizon_seconds,
    )


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[AwsEnv]:
    """Everything jobsched needs, in moto (us-east-1, fake credentials)."""
    _fake_credentials(monkeypatch)
    with mock_aws():
        clients = Clients(region_name=REGION)
        yield AwsEnv(settings=provision(clients), clients=clients)


@pytest.fixture
def aws_environ(aws: AwsEnv, monkeypatch: pytest.MonkeyPatch) -> AwsEnv:
    """The ``aws`` environment, also exported as the function environment variables."""
    for name, value in aws.settings.to_env().items():
        monkeypatch.setenv(name, value)
    return aws


@pytest.fixture
def clock() -> FakeClock:
    """A fake clock at :data:`T0`."""
    return FakeClock(T0)


# --- run pipeline services (H3): job service and dispatcher over the moto environment -------------

KNOWN_HANDLERS = frozenset({"echo", "sleep", "fail"})


@dataclass
class Pipeline:
    """The job service and dispatcher wired to moto, plus the pieces tests inspect."""

    env: AwsEnv
    jobs: object  # JobService
    dispatcher: object  # Dispatcher
    meter: object  # Meter

    def tick(self, job, now):
        """One tick of the shard that owns ``job`` (under the deployment's shard count)."""
        return self.dispatcher.dispatch_shard(self.dispatcher.shard_of(job.id), now)

    def messages(self, kind: str = "default") -> list[dict]:
        """Every message on a queue, delayed or not, as ``{"body", "group", "delay"}`` (oldest first).

        Read from moto's queue state, because moto honours ``DelaySeconds`` against the wall clock and
        the tests' clock is fake; nothing is received, so visibility is untouched.
        """
        return sqs_messages(self.env, kind)


def sqs_messages(env: AwsEnv, kind: str) -> list[dict]:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    name = env.settings.queue_url(kind).rsplit("/", 1)[-1]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID][REGION].queues[name]
    out = []
    for message in queue._messages:
        sent_ms = int(message.sent_timestamp or 0)
        delay = round((message.delayed_until - sent_ms) / 1000) if message.delayed_until else 0
        out.append({"body": json.loads(message.body), "group": message.group_id, "delay": max(0, delay)})
    return out


def build_pipeline(env: AwsEnv, owner: str = "test-dispatcher") -> Pipeline:
    from jobsched.aws.metering import Meter
    from jobsched.compose.pipeline import dispatcher_from_settings
    from jobsched.services.jobs import JobService

    meter = Meter()
    dispatcher = dispatcher_from_settings(env.settings, env.clients, meter=meter, owner=owner)
    service = JobService(
        dispatcher.jobs,
        dispatcher.runs,
        dispatcher,
        catalog=StaticCatalog(KNOWN_HANDLERS),
    )
    return Pipeline(env=env, jobs=service, dispatcher=dispatcher, meter=meter)


@pytest.fixture
def pipeline(aws: AwsEnv) -> Pipeline:
    return build_pipeline(aws)
