"""The SQS message that carries one run to a worker.

The message holds a snapshot of everything the worker needs (target, payload, timeout, retry) so the
worker never reads the job item: one read fewer per run. A job edited after dispatch rewrites its runs
queued ahead (a new message with a new send token; the old message is dropped on arrival:
docs/semantics/runs.md, "Editing a job"), so a run executes with the definition its newest message
carries. The payload travels inline, never by reference: a job's payload is
at most :data:`MAX_PAYLOAD_BYTES` (64 KiB of compact JSON, checked when the job is written), well
under SQS's 256 KiB per message; :mod:`jobsched.aws.queues` splits a send batch by size so ten such
messages never exceed the batch limit (docs/decisions/0011-retention-and-inline-payloads.md).

**Envelope versions** (``v``; docs/semantics/runs.md, "Envelope versions"). ``v=2`` (written since
handlers have versions, decision 0048) adds ``payload_version``: the handler version the payload was
written for (``null``: the payload is the bound version's own, as for an HTTP target or a workflow
node), and carries the version a run is bound to in ``target["version"]`` once its first attempt was
claimed. ``v=1`` (written by the code before) is still read, as payload version 1 and unbound. Any
other ``v`` is a poison message.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from jobsched.core.errors import ValidationError
from jobsched.core.models import RetrySpec, from_iso, parse_run_id, to_iso
from jobsched.core.pools import LAMBDA_POOL, POOLS

#: The envelope written; :data:`READABLE_VERSIONS` are the ones a worker reads (the current and the
#: previous one, so messages, retries and dead letters written before a deploy stay readable).
MESSAGE_VERSION = 2
READABLE_VERSIONS = (1, 2)
#: What a ``v=1`` message's payload was written for: every handler before versions existed was version 1.
V1_PAYLOAD_VERSION = 1
#: Largest payload (UTF-8 JSON bytes) a job, a manual run or a replay may have (checked by the job and
#: run services); it travels inside the message. SQS allows 256 KiB per message.
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_SQS_DELAY_SECONDS = 900


def payload_size(payload: Any) -> int:
    """Size in bytes of the payload as it is sent (compact JSON, UTF-8)."""
    return len(json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode())


def delay_seconds(due_at: datetime, now: datetime) -> int:
    """SQS ``DelaySeconds`` for a run due at ``due_at``: ``clamp(floor(due_at - now), 0, 900)``.

    Rounded *down*, so the message becomes visible at most one second before its due instant and the
    worker waits out the sub-second rest before it claims the run (:mod:`jobsched.services.worker`): the run
    starts on time instead of up to a second late, and never early. A run due beyond 900 s is
    delivered at 900 s and the worker re-delays it (the dispatcher's look-ahead keeps that rare).
    """
    seconds = math.floor((due_at - now).total_seconds())
    return max(0, min(MAX_SQS_DELAY_SECONDS, seconds))


@dataclass(kw_only=True)
class RunMessage:
    """Body of the SQS message for one delivery of a run (``attempt`` = the attempt it should claim)."""

    run_id: str
    job_id: str
    tenant: str
    attempt: int
    scheduled_at: datetime
    due_at: datetime
    target: dict[str, Any]
    payload: dict[str, Any] | None = None
    timeout_seconds: int = 300
    retry: RetrySpec = field(default_factory=RetrySpec)
    priority: str = "default"
    #: The run's pool (:mod:`jobsched.core.pools`): every re-send of the run goes to
    #: ``queue_for(pool, priority)``. A message written before runs had pools has none: ``lambda``.
    pool: str = "lambda"
    #: The job's ``notify`` (:mod:`jobsched.core.notify`) at dispatch; kept on a dead letter with the
    #: rest of the snapshot. Left out of the body when empty.
    notify: dict[str, str] = field(default_factory=dict)
    #: The run's ``send_token`` when this message was sent: only the newest message of a run executes.
    token: str | None = None
    #: The job's limits at dispatch, keys filled in (:mod:`jobsched.core.limits`); left out when empty.
    concurrency: dict[str, Any] = field(default_factory=dict)
    rate_limit: dict[str, Any] = field(default_factory=dict)
    #: Set on a message re-sent for its rate-limit booking: its tokens are taken, it starts at ``due_at``.
    booked: bool = False
    #: Set by the dispatcher when the run's tenant had a monthly budget when it was sent: before the
    #: first attempt the worker checks the tenant's cap (decision 0062). Left out when False, so a
    #: tenant without a budget costs its runs no read.
    budgeted: bool = False
    #: The handler version the payload was written for (the job's ``payload_version``); the worker
    #: upgrades it to the version the run is bound to. None: the bound version's own payload.
    payload_version: int | None = None
    v: int = MESSAGE_VERSION

    @property
    def handler(self) -> str | None:
        """The handler the target names (None for an HTTP target)."""
        name = self.target.get("handler") if isinstance(self.target, dict) else None
        return name if isinstance(name, str) and name else None

    @property
    def handler_version(self) -> int | None:
        """The version the target pins or the run is bound to (None: unbound, the newest will run)."""
        version = self.target.get("version") if isinstance(self.target, dict) else None
        return version if isinstance(version, int) and not isinstance(version, bool) else None

    def bound_to(self, version: int | None) -> RunMessage:
        """This message with the run's bound handler ``version`` in its target (itself when there is
        none, or no handler): what a retry, a takeover and a dead letter's snapshot carry."""
        if version is None or self.handler is None or self.handler_version == version:
            return self
        return replace(self, target={**self.target, "version": version})

    def to_dict(self) -> dict[str, Any]:
        return {
            "v": self.v,
            "run_id": self.run_id,
            "job_id": self.job_id,
            "tenant": self.tenant,
            "attempt": self.attempt,
            "scheduled_at": to_iso(self.scheduled_at),
            "due_at": to_iso(self.due_at),
            "target": self.target,
            "payload": self.payload,
            "timeout_seconds": self.timeout_seconds,
            "retry": self.retry.to_dict(),
            "priority": self.priority,
            "pool": self.pool,
            "payload_version": self.payload_version,
            **({"token": self.token} if self.token is not None else {}),
        } | _present(
            notify=self.notify,
            concurrency=self.concurrency,
            rate_limit=self.rate_limit,
            booked=self.booked,
            budgeted=self.budgeted,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, body: str) -> RunMessage:
        """Parse a message body; anything malformed raises :class:`ValidationError` (a poison message)."""
        try:
            data = json.loads(body)
        except (TypeError, ValueError) as exc:
            raise ValidationError(f"run message is not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ValidationError("run message must be a JSON object")
        version = data.get("v")
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ValidationError(f"unsupported run message version {version!r}")
        missing = [
            k
            for k in ("run_id", "job_id", "tenant", "attempt", "scheduled_at", "due_at", "target")
            if k not in data
        ]
        if missing:
            raise ValidationError(f"run message lacks {', '.join(missing)}")
        job_id, _ = parse_run_id(data["run_id"])
        if job_id != data["job_id"]:
            raise ValidationError("run message: run_id does not belong to job_id")
        if not isinstance(data["attempt"], int) or data["attempt"] < 1:
            raise ValidationError("run message: attempt must be an integer >= 1")
        return cls(
            run_id=data["run_id"],
            job_id=data["job_id"],
            tenant=data["tenant"],
            attempt=data["attempt"],
            scheduled_at=from_iso(data["scheduled_at"]),
            due_at=from_iso(data["due_at"]),
            target=data["target"],
            payload=data.get("payload"),
            timeout_seconds=int(data.get("timeout_seconds", 300)),
            retry=RetrySpec.from_dict(data.get("retry")),
            priority=data.get("priority", "default"),
            pool=_pool(data.get("pool")),
            notify=data["notify"] if isinstance(data.get("notify"), dict) else {},
            token=data.get("token") if isinstance(data.get("token"), str) else None,
            concurrency=data["concurrency"] if isinstance(data.get("concurrency"), dict) else {},
            rate_limit=data["rate_limit"] if isinstance(data.get("rate_limit"), dict) else {},
            booked=data.get("booked") is True,
            budgeted=data.get("budgeted") is True,
            payload_version=(
                V1_PAYLOAD_VERSION if version == 1 else _payload_version(data.get("payload_version"))
            ),
        )


def _payload_version(value: Any) -> int | None:
    """A ``v=2`` message's ``payload_version``: an integer >= 1 or null; anything else is poison."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError("run message: payload_version must be an integer >= 1 or null")
    return value


def _pool(value: Any) -> str:
    """A message's ``pool``: absent (a message written before runs had pools) is ``lambda``; a value
    that names no pool is poison."""
    if value is None:
        return LAMBDA_POOL
    if not isinstance(value, str) or value not in POOLS:
        raise ValidationError(f"run message: pool must be one of {', '.join(POOLS)}, got {value!r}")
    return value


def _present(**fields: Any) -> dict[str, Any]:
    """The optional fields that carry something (absent fields keep the message small)."""
    return {name: value for name, value in fields.items() if value}


@dataclass(frozen=True)
class Outgoing:
    """One message to send: which queue, the body, and its delay."""

    queue: str  # high | default | low | long | container: jobsched.core.pools.queue_for(pool, priority)
    message: RunMessage
    delay_seconds: int

    @property
    def key(self) -> str:
        return f"{self.message.run_id}@{self.message.attempt}"
