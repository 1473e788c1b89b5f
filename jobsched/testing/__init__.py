"""In-memory fakes of jobsched's ports, shipped for our tests and for yours (docs/testing.md).

Each fake keeps the semantics the guarantees rest on; the tables, queues and bucket are held to the
same contract suite as the AWS adapters they stand in for (``tests/contract``: every test runs on the
fake and on moto; where moto is laxer than AWS the fake follows AWS, ``test_fake_only.py``):

* :class:`InMemoryTables` -- the :class:`~jobsched.ports.tables.Table` every store is written on:
  conditional put, fenced update, the stored item returned on a refused condition, key-ordered
  queries over the tables' indexes, TTL by a clock;
* :class:`InMemoryQueues` -- SQS: delay, visibility, receive count and redrive by the same clock;
* :class:`InMemoryObjects` -- the bucket of large outputs;
* :class:`InMemoryStateMachine` -- Step Functions for chunked jobs (a test plays the workflow);
* :class:`InMemoryTopics` -- SNS for dead-letter notifications: topics, SQS subscriptions, publish;
* :class:`InMemoryHandlerMarks` -- the draining marks of handler versions and forced deploy-checks.

:func:`in_memory_aws` builds all of them for one deployment, with :class:`~jobsched.runtime.settings.Settings`
naming them and a ``clients`` bundle the wiring factories (:mod:`jobsched.compose.pipeline`) accept in place
of boto3's, so the real stores and services run on the fakes.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from jobsched.aws.errors import refused
from jobsched.aws.metering import table_specs
from jobsched.core.clock import Clock, FakeClock
from jobsched.runtime.settings import Settings
from jobsched.testing.handlers import InMemoryHandlerMarks
from jobsched.testing.objects import InMemoryObjects
from jobsched.testing.queues import InMemoryQueues
from jobsched.testing.state_machine import InMemoryStateMachine
from jobsched.testing.tables import InMemoryTables

__all__ = [
    "InMemoryAws",
    "InMemoryClients",
    "InMemoryHandlerMarks",
    "InMemoryObjects",
    "InMemoryQueues",
    "InMemoryStateMachine",
    "InMemoryTables",
    "InMemoryTopics",
    "in_memory_aws",
    "memory_settings",
]

#: Where a fresh fake clock starts unless told otherwise (any aware instant would do).
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


class InMemoryTopics:
    """SNS in memory: topics (``create_topic``), SQS subscriptions (``subscribe``, delivered to
    ``queues``: the message itself with ``RawMessageDelivery``, else SNS's JSON envelope) and
    ``Publish``, which refuses a topic that does not exist (``NotFound``, as SNS). Every published
    message is also kept in :attr:`published`."""

    def __init__(self, queues: InMemoryQueues | None = None) -> None:
        self.queues = queues
        self.published: list[dict[str, Any]] = []
        self._topics: dict[str, list[tuple[str, bool]]] = {}  # ARN -> (queue ARN, raw delivery)
        self._lock = threading.Lock()

    def create_topic(self, Name: str, **_: Any) -> dict[str, Any]:
        from jobsched.testing.queues import ACCOUNT, REGION

        arn = f"arn:aws:sns:{REGION}:{ACCOUNT}:{Name}"
        with self._lock:
            self._topics.setdefault(arn, [])
        return {"TopicArn": arn}

    def subscribe(
        self, TopicArn: str, Protocol: str, Endpoint: str, Attributes: dict[str, str] | None = None, **_: Any
    ) -> dict[str, Any]:
        if Protocol != "sqs" or self.queues is None:
            raise refused(
                "InvalidParameter", f"only sqs subscriptions are modelled, not {Protocol}", "Subscribe"
            )
        raw = (Attributes or {}).get("RawMessageDelivery", "false").lower() == "true"
        with self._lock:
            self._topic(TopicArn, "Subscribe").append((Endpoint, raw))
        return {"SubscriptionArn": f"{TopicArn}:{uuid.uuid4()}"}

    def publish(self, **kwargs: Any) -> dict[str, Any]:
        message_id = str(uuid.uuid4())
        with self._lock:
            subscriptions = list(self._topic(kwargs.get("TopicArn", ""), "Publish"))
            self.published.append({"MessageId": message_id, **kwargs})
        for queue_arn, raw in subscriptions:
            body = kwargs["Message"] if raw else json.dumps(self._envelope(message_id, kwargs))
            assert self.queues is not None  # a subscription was accepted only with queues
            self.queues.send_message(QueueUrl=self.queues.url_of(queue_arn), MessageBody=body)
        return {"MessageId": message_id}

    def _topic(self, arn: str, operation: str) -> list[tuple[str, bool]]:
        if arn not in self._topics:
            raise refused("NotFound", "Topic does not exist", operation)
        return self._topics[arn]

    @staticmethod
    def _envelope(message_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        envelope = {"Type": "Notification", "MessageId": message_id, "TopicArn": kwargs["TopicArn"]}
        if kwargs.get("Subject"):
            envelope["Subject"] = kwargs["Subject"]
        envelope["Message"] = kwargs["Message"]
        return envelope


def memory_settings(prefix: str = "test-jobsched", *, shards: int = 4, **overrides: Any) -> Settings:
    """Settings naming a deployment's tables, queues (each with a DLQ) and bucket under ``prefix``, as
    the tests' ``provision`` names them on moto; ``overrides`` are further :class:`Settings` fields."""
    from jobsched.runtime import resources as r
    from jobsched.testing.queues import ACCOUNT, REGION

    tables = {spec.env_var: f"{prefix}-{spec.logical_name.lower()}" for spec in r.TABLES}
    base = f"https://sqs.{REGION}.amazonaws.com/{ACCOUNT}/{prefix}"
    fields: dict[str, Any] = {
        "jobs_table": tables[r.ENV_JOBS_TABLE],
        "runs_table": tables[r.ENV_RUNS_TABLE],
        "leases_table": tables[r.ENV_LEASES_TABLE],
        "idempotency_table": tables[r.ENV_IDEMPOTENCY_TABLE],
        "queue_urls": {spec.kind: f"{base}-{spec.kind}" for spec in r.QUEUES},
        "dlq_urls": {spec.kind: f"{base}-{spec.kind}-dlq" for spec in r.QUEUES},
        "bucket": f"{prefix}-bucket",
        "shards": shards,
    }
    fields.update(overrides)
    return Settings(**fields)


@dataclass
class InMemoryClients:
    """What :class:`jobsched.aws.clients.Clients` hands out, as fakes: ``dynamodb`` is a
    :class:`~jobsched.ports.tables.Table` (the adapters take it as it is), the others answer boto3's
    calls."""

    dynamodb: InMemoryTables
    sqs: InMemoryQueues
    s3: InMemoryObjects
    stepfunctions: InMemoryStateMachine
    sns: InMemoryTopics = field(default_factory=InMemoryTopics)

    def __post_init__(self) -> None:
        if self.sns.queues is None:  # SNS delivers to this deployment's queues
            self.sns.queues = self.sqs

    def client(self, service: str) -> Any:
        return getattr(self, service)


@dataclass
class InMemoryAws:
    """One deployment in memory: its settings, the fakes (as ``clients``) and the clock they run by."""

    settings: Settings
    clients: InMemoryClients
    clock: FakeClock

    @property
    def tables(self) -> InMemoryTables:
        return self.clients.dynamodb

    @property
    def queues(self) -> InMemoryQueues:
        return self.clients.sqs

    @property
    def objects(self) -> InMemoryObjects:
        return self.clients.s3

    @property
    def state_machine(self) -> InMemoryStateMachine:
        return self.clients.stepfunctions


def in_memory_aws(
    settings: Settings | None = None, *, clock: Clock | None = None, start: datetime = DEFAULT_START
) -> InMemoryAws:
    """Every table, queue (with its DLQ and redrive policy) and the bucket ``settings`` name (default:
    :func:`memory_settings`), in memory, run by ``clock`` (default: a :class:`FakeClock` at ``start``)."""
    settings = settings or memory_settings()
    fake_clock = clock if clock is not None else FakeClock(start)
    clients = InMemoryClients(
        dynamodb=InMemoryTables(table_specs(settings), clock=fake_clock),
        sqs=InMemoryQueues.for_settings(settings, clock=fake_clock),
        s3=InMemoryObjects(*([settings.bucket] if settings.bucket else [])),
        stepfunctions=InMemoryStateMachine(fake_clock),
    )
    return InMemoryAws(settings=settings, clients=clients, clock=fake_clock)  # type: ignore[arg-type]
