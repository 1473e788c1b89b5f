"""Settings of the embedded mode (``jobsched dev``): ports, shards, worker slots, schedules, tenants."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import timedelta

from jobsched.core.errors import ValidationError
from jobsched.core.shares import DEFAULT_FAIR_SHARE, pool_ceiling
from jobsched.runtime import resources

DEFAULT_TENANT = "default"

# Worker slots per queue: concurrent worker invocations of that queue's poller. Each poller has its
# own, and no other queue can take them: high's 4 are reserved as the high worker function's reserved
# concurrency is on AWS (where default, low and long share one function, each with MaximumConcurrency
# as a ceiling). docs/semantics/limits.md, "Priorities and reserved capacity".
DEFAULT_SLOTS = {"high": 4, "default": 20, "low": 2, "long": 2}
# Records per invocation, as infra's event source mappings: a chunk of a long job may run for minutes.
DEFAULT_BATCH_SIZES = {"long": 1}


@dataclass
class LocalConfig:
    """Everything the embedded mode can be told; the defaults are what ``make run`` uses."""

    host: str = "127.0.0.1"
    port: int = 8080  # the API; 0 picks a free port
    moto_port: int | None = None  # None picks a free port
    dynamodb_port: int | None = None  # DynamoDB's moto process; None picks a free port
    prefix: str = "jobsched-local"
    shards: int = resources.DEFAULT_SHARDS
    lookahead_seconds: int = resources.DEFAULT_LOOKAHEAD_SECONDS
    slots: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_SLOTS))
    dlq_slots: int = 1
    batch_size: int = 10
    batch_sizes: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_BATCH_SIZES))
    visibility_timeout_seconds: int = 60
    # The idle footprint (issue 12 §6, docs/performance.md "Embedded mode footprint"): every request
    # to moto costs ~4 ms of CPU between the two processes, so the schedules below poll no more often
    # than the runs need.
    poll_wait_seconds: int = 20  # a queue's long poll (SQS's longest; wakes for a send, sees a delayed
    # message when it becomes visible: jobsched.local.moto_fixes) ...
    poll_idle_seconds: float = 0.5  # ... and the pause between empty short polls if the wait is 0
    dlq_poll_wait_seconds: int = 20  # a DLQ's long poll (nothing in a DLQ is delayed: the poll wakes)
    tick_seconds: float = 30.0  # dispatcher ticks (AWS: 60 s); runs are queued ahead 30-900 s anyway
    # Ticks do not align their sends to the second here (decision 0032; AWS: 100 ms): a message that
    # surfaces early is gathered and waited out on time by the pollers.
    send_align_ms: int = 0
    sweeper_seconds: float = 60.0
    #: The sweeper's grace (``--sweeper-grace-seconds``, at least 10; local only): how long past its due
    #: instant, retry or lease a run waits before the sweeper acts on it (a lost send re-sent, a missed
    #: deadline reported); 120 as on AWS.
    sweeper_grace_seconds: int = resources.DEFAULT_SWEEPER_GRACE_SECONDS
    capacity_seconds: float = 60.0  # the capacity service: forecast, pollers' slots raised and lowered
    #: The most worker slots the capacity service may give each Lambda queue's poller before a forecast
    #: peak or on age (``--capacity-max-slots``); 0: each keeps its configured slots and the capacity
    #: service is not run (decision 0055).
    capacity_max_slots: int = 0
    retention_days: int = resources.DEFAULT_RETENTION_DAYS  # runs (TTL) and bucket objects, as on AWS
    #: Minutes in place of the days (``--retention-minutes``, at least 10): local only, so a long session
    #: with per-second jobs keeps an hour's runs, not a month's (issue 12 §6).
    retention_minutes: int | None = None

    def pool_slots(self, kind: str) -> int:
        """The worker slots of ``kind``'s poller: its ``slots``, raised by the fair share's head-room."""
        slots = self.slots.get(kind, 1)
        if kind in resources.FAIR_SHARE_QUEUES and self.fair_share < 1:
            return pool_ceiling(slots, self.fair_share)
        return slots

    def tenant_slots(self) -> dict[str, int]:
        """What ``JOBSCHED_TENANT_SLOTS`` says: the slots one tenant may hold per queue (none when off)."""
        if self.fair_share >= 1:
            return {}
        return {kind: self.slots.get(kind, 1) for kind in resources.FAIR_SHARE_QUEUES}

    @property
    def retention(self) -> timedelta:
        if self.retention_minutes is not None:
            return timedelta(minutes=self.retention_minutes)
        return timedelta(days=self.retention_days)

    housekeeping_seconds: float = 60.0  # how often expired items and objects are deleted (housekeeping)
    events_seconds: float = 1.0
    fair_queues: bool = True  # serve message groups (tenants) as SQS fair queues do (local/fair_poller.py)
    #: The fair share (``--fair-share``, decision 0057): each of high/default/low's pollers gets
    #: ``ceil(slots / fair_share)`` slots, of which one tenant may hold its ``slots``; 1 = off.
    fair_share: float = DEFAULT_FAIR_SHARE
    tenants: dict[str, str] = field(default_factory=dict)  # tenant name -> bearer token
    admins: tuple[str, ...] = ()  # tenants whose token is also an administrator's (--admin)
    tenant_max_running: int = 0  # the deployment default per tenant (0 = none), as on AWS
    tenant_runs_per_second: float = 0.0
    demo: bool = True
    verbose: bool = False  # keep the functions' JSON logs and EMF metrics on stdout
    log_file: str | None = None  # the file the functions write to (jobsched dev): GET /runs/{id}/logs
    shutdown_grace_seconds: float = 2.0
    #: Runs the container worker process handles at once (``--container-concurrency``); 0: no process.
    container_concurrency: int = 1
    #: Lambda's time limit here (``--lambda-time-limit``): every invocation ends by then, and the API's
    #: checks of a job's pool read it (``JOBSCHED_LAMBDA_TIME_LIMIT_SECONDS``).
    lambda_time_limit_seconds: int = resources.LAMBDA_TIME_LIMIT_SECONDS

    def tenant_tokens(self) -> dict[str, str]:
        """``{token: tenant}`` as the api function reads it from ``JOBSCHED_TENANT_TOKENS``."""
        return {token: tenant for tenant, token in self.tenants.items()}


def parse_tenant(text: str) -> tuple[str, str]:
    """``NAME=TOKEN`` -> (name, token), for ``--tenant``."""
    name, sep, token = text.partition("=")
    if not sep or not name.strip() or not token.strip():
        raise ValidationError(f"--tenant {text!r}: expected NAME=TOKEN, e.g. acme=s3cret", field="tenant")
    return name.strip(), token.strip()


def resolve_tenants(pairs: list[str], env_token: str | None) -> tuple[dict[str, str], bool]:
    """Tenants from ``--tenant`` pairs; without any, one ``default`` tenant whose token is
    ``$JOBSCHED_TOKEN`` or a generated one. Returns (tenants, whether a token was generated)."""
    tenants: dict[str, str] = {}
    for pair in pairs:
        name, token = parse_tenant(pair)
        if name in tenants:
            raise ValidationError(f"--tenant {name!r} is given twice", field="tenant")
        if token in tenants.values():
            raise ValidationError(f"--tenant {name!r}: its token is already another tenant's", field="tenant")
        tenants[name] = token
    if tenants:
        return tenants, False
    if env_token:
        return {DEFAULT_TENANT: env_token}, False
    return {DEFAULT_TENANT: secrets.token_urlsafe(24)}, True


def tenant_tokens_json(config: LocalConfig) -> str:
    return json.dumps(config.tenant_tokens(), sort_keys=True)
