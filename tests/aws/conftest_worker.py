"""Helpers for the worker-side AWS tests: a run + its message in moto, and a worker wired to them.

Imported explicitly by the test modules (``from tests.aws.conftest_worker import ...``); the moto
environment itself comes from ``tests/aws/conftest.py`` (``aws``, ``clock``).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import jobsched.targets.demo  # noqa: F401  (registers demo.*)
from jobsched.aws.attempts import AttemptStore
from jobsched.aws.metering import Meter, dynamo_for
from jobsched.aws.outputs import OutputStore
from jobsched.aws.queues import RunQueues
from jobsched.aws.runs_store import RunsStore
from jobsched.core.messages import RunMessage
from jobsched.core.models import RetrySpec, Run, make_run_id
from jobsched.runtime.observability import RecordingSink
from jobsched.services.deliveries import Delivery
from jobsched.services.worker import Worker, WorkerConfig
from jobsched.targets.context import IdempotentEffects


@dataclass
class Kit:
    """Stores, a metrics sink and a worker factory over one moto environment."""

    aws: Any
    clock: Any
    meter: Meter = field(default_factory=Meter)
    metrics: RecordingSink = field(default_factory=RecordingSink)

    def __post_init__(self) -> None:
        self.dynamo = dynamo_for(self.aws.settings, self.aws.clients.dynamodb, self.meter)
        self.runs = RunsStore(self.dynamo, self.aws.settings.runs_table)
        self.attempts = AttemptStore(self.dynamo, self.aws.settings.runs_table)
        self.outputs = OutputStore(self.aws.clients.s3, self.aws.settings.bucket)
        self.effects = IdempotentEffects(self.aws.clients.dynamodb, self.aws.settings.idempotency_table)
        self.queues = RunQueues(self.aws.clients.sqs, self.aws.settings.queue_urls, self.meter)

    def worker(
        self, owner: str = "worker-a", *, lease: float = 60, heartbeat: float = 3600, **kw: Any
    ) -> Worker:
        return Worker(
            config=WorkerConfig(owner=owner, lease_seconds=lease, heartbeat_seconds=heartbeat, **kw),
            attempts=self.attempts,
            outputs=self.outputs,
            queues=self.queues,
            clock=self.clock,
            effects=self.effects,
            metrics=self.metrics,
            rng=random.Random(7),
        )

    def new_run(
        self,
        target: dict | None = None,
        payload: dict | None = None,
        *,
        job_id: str = "job1",
        tenant: str = "acme",
        scheduled_at: datetime | None = None,
        max_attempts: int = 3,
        base_seconds: float = 2.0,
        max_seconds: float = 300.0,
        timeout_seconds: int = 30,
        priority: str = "default",
        pool: str = "lambda",
    ) -> tuple[Run, RunMessage]:
        """Create a queued run (as the dispatcher would) and the message for its first attempt."""
        at = scheduled_at or self.clock.now()
        run = Run(
            id=make_run_id(job_id, at),
            job_id=job_id,
            tenant=tenant,
            scheduled_at=at,
            due_at=at,
            priority=priority,
            pool=pool,
            max_attempts=max_attempts,
            created_at=at - timedelta(seconds=30),
        )
        self.runs.create(run)
        msg = RunMessage(
            run_id=run.id,
            job_id=job_id,
            tenant=tenant,
            attempt=1,
            scheduled_at=at,
            due_at=at,
            target=target or {"handler": "demo.echo"},
            payload=payload if payload is not None else {"hello": "world"},
            timeout_seconds=timeout_seconds,
            retry=RetrySpec(max_attempts=max_attempts, base_seconds=base_seconds, max_seconds=max_seconds),
            priority=priority,
            pool=pool,
        )
        return run, msg

    def messages(self, kind: str = "default") -> list[dict]:
        """Every message in a queue now, delayed ones included (moto hides delayed messages, so this
        reads them through a zero-delay view: receive repeatedly with visibility 0)."""
        return self.aws.queue_messages(kind)

    def bodies(self, kind: str = "default") -> list[dict]:
        return [json.loads(m["Body"]) for m in self.messages(kind)]


def sent_messages(aws: Any, kind: str = "default") -> list[tuple[dict, int]]:
    """(body, DelaySeconds) of every message in a queue, delayed or in flight included, read from moto's
    backend: moto keeps delayed messages invisible for real seconds, and the tests move a fake clock."""
    if hasattr(aws.clients.sqs, "peek"):  # the in-memory fakes (tests/aws/memory.py)
        return [
            (json.loads(m["body"]), m["delay"]) for m in aws.clients.sqs.peek(aws.settings.queue_urls[kind])
        ]
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    name = aws.settings.queue_urls[kind].rsplit("/", 1)[-1]
    queue = sqs_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].queues[name]
    out = []
    for message in queue._messages:
        delay = round((message.delayed_until - message.sent_timestamp) / 1000) if message.delayed_until else 0
        out.append((json.loads(message.body), max(0, delay)))
    return out


def sweeper_for(kit: Kit, jobs: Any):
    """The sweeper over the kit's tables, queues, attempts and metrics (``jobs``: a JobsStore)."""
    from jobsched.services.sweeper import Sweeper, SweeperConfig

    return Sweeper(
        config=SweeperConfig(runs_table=kit.aws.settings.runs_table),
        dynamo=kit.dynamo,
        jobs=jobs,
        attempts=kit.attempts,
        queues=kit.queues,
        metrics=kit.metrics,
    )


def run_service(kit: Kit):
    """A RunService over the kit's stores."""
    from jobsched.aws.jobs_store import JobsStore
    from jobsched.services.runs import RunService

    return RunService(
        runs=kit.runs,
        attempts=kit.attempts,
        jobs=JobsStore(kit.dynamo, kit.aws.settings.jobs_table),
        outputs=kit.outputs,
        queues=RunQueues(kit.aws.clients.sqs, kit.aws.settings.queue_urls, kit.meter),
    )


def fail_permanently(kit: Kit, payload: dict | None = None, **kw: Any):
    """A run that ran once and was dead-lettered with a permanent error; returns (run, message)."""
    run, msg = kit.new_run({"handler": "demo.fail"}, payload or {"kind": "permanent"}, **kw)
    out = kit.worker().handle(Delivery.of(msg.to_json()), kit.clock.now())
    assert out.status == "dead_lettered"
    return run, msg
